// Value: Python's printing, truth and equality rules; JSON in (nlohmann, order kept) and out (json.dumps' format).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hxrt/base/check.h"
#include "hxrt/llm/jinja.h"
#include "llm/jinja/strings.h"
#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::jinja {

const Value* Value::Dict::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (k.equals(key)) return &v;
  }
  return nullptr;
}

const Value* Value::Dict::find_key(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Value::Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

bool Value::as_bool() const {
  HXRT_CHECK(is_bool());
  return std::get<bool>(data_);
}
int64_t Value::as_int() const {
  if (is_bool()) return std::get<bool>(data_) ? 1 : 0;
  HXRT_CHECK(is_int());
  return std::get<int64_t>(data_);
}
double Value::as_double() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(as_int());
}
const std::string& Value::as_string() const {
  HXRT_CHECK(is_string());
  return std::get<std::string>(data_);
}
Value::List& Value::as_list() const {
  HXRT_CHECK(is_list());
  return *std::get<std::shared_ptr<List>>(data_);
}
Value::Dict& Value::as_dict() const {
  HXRT_CHECK(is_dict());
  return *std::get<std::shared_ptr<Dict>>(data_);
}
const Function& Value::as_function() const {
  HXRT_CHECK(is_function());
  return *std::get<std::shared_ptr<Function>>(data_);
}
const std::string& Value::undefined_why() const {
  HXRT_CHECK(is_undefined());
  return std::get<Undefined>(data_).why;
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_double() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kList: return !as_list().empty();
    case Kind::kDict: return !as_dict().entries.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string_view Value::kind_name() const {
  switch (kind()) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return as_dict().is_namespace ? "namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

std::string Value::str() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kString: return as_string();
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return as_bool() ? "True" : "False";
    case Kind::kInt: return std::to_string(as_int());
    case Kind::kFloat: return python_float_repr(as_double());
    case Kind::kString: return python_string_repr(as_string());
    case Kind::kList: {
      std::string out = "[";
      for (const Value& item : as_list()) {
        if (out.size() > 1) out += ", ";
        out += item.repr();
      }
      return out + "]";
    }
    case Kind::kDict: {
      const Dict& d = as_dict();
      std::string out = d.is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : d.entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (d.is_namespace ? "}>" : "}");
    }
    case Kind::kFunction: return "<function>";
  }
  return "";
}

bool Value::equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return as_double() == other.as_double();
    return as_int() == other.as_int();
  }
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return as_string() == other.as_string();
    case Kind::kList: {
      const List& a = as_list();
      const List& b = other.as_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      const Dict& a = as_dict();
      const Dict& b = other.as_dict();
      if (a.entries.size() != b.entries.size()) return false;
      for (const auto& [k, v] : a.entries) {
        const Value* w = b.find(k);
        if (w == nullptr || !v.equals(*w)) return false;
      }
      return true;
    }
    case Kind::kFunction: return &as_function() == &other.as_function();
    default: return false;
  }
}

namespace {

Value from_nlohmann(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.get<double>());
    case nlohmann::json::value_t::string: return Value(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Value::List list;
      list.reserve(j.size());
      for (const auto& item : j) list.push_back(from_nlohmann(item));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      Value::Dict dict;
      for (const auto& [k, v] : j.items()) dict.entries.emplace_back(Value(k), from_nlohmann(v));
      return Value(std::move(dict));
    }
    default: return Value::none();
  }
}

// One byte of a JSON string as json.dumps writes it: the escapes it names, \u00XX for other control characters.
void json_byte(char c, std::string* out) {
  switch (c) {
    case '"': *out += "\\\""; break;
    case '\\': *out += "\\\\"; break;
    case '\n': *out += "\\n"; break;
    case '\r': *out += "\\r"; break;
    case '\t': *out += "\\t"; break;
    case '\b': *out += "\\b"; break;
    case '\f': *out += "\\f"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        *out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      } else {
        out->push_back(c);
      }
  }
}

void json_string(std::string_view s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  if (!ensure_ascii) {
    for (const char c : s) json_byte(c, out);
  } else {
    for (const char32_t cp : detail::decode_utf8_lenient(s)) {
      if (cp < 0x80) {
        json_byte(static_cast<char>(cp), out);
      } else if (cp >= 0x10000) {  // a surrogate pair, as Python writes astral characters
        const char32_t v = cp - 0x10000;
        *out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        *out += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
      }
    }
  }
  out->push_back('"');
}

class JsonWriter {
 public:
  explicit JsonWriter(const JsonStyle& style) : style_(style) {
    if (style.separators.has_value()) {
      item_ = style.separators->first;
      key_ = style.separators->second;
    } else {
      item_ = style.indent >= 0 ? "," : ", ";
      key_ = ": ";
    }
  }

  Status write(const Value& v, int level, std::string* out) {
    if (level > 512) return invalid_argument("tojson: value nested deeper than 512 levels");
    switch (v.kind()) {
      case Value::Kind::kNone: *out += "null"; return ok_status();
      case Value::Kind::kBool: *out += v.as_bool() ? "true" : "false"; return ok_status();
      case Value::Kind::kInt: *out += std::to_string(v.as_int()); return ok_status();
      case Value::Kind::kFloat: {
        const double d = v.as_double();
        if (std::isnan(d)) {
          *out += "NaN";
        } else if (std::isinf(d)) {
          *out += d > 0 ? "Infinity" : "-Infinity";
        } else {
          *out += python_float_repr(d);
        }
        return ok_status();
      }
      case Value::Kind::kString: json_string(v.as_string(), style_.ensure_ascii, out); return ok_status();
      case Value::Kind::kList: {
        const Value::List& list = v.as_list();
        if (list.empty()) {
          *out += "[]";
          return ok_status();
        }
        out->push_back('[');
        for (size_t i = 0; i < list.size(); ++i) {
          if (i > 0) *out += item_;
          newline(level + 1, out);
          HXRT_RETURN_IF_ERROR(write(list[i], level + 1, out));
        }
        newline(level, out);
        out->push_back(']');
        return ok_status();
      }
      case Value::Kind::kDict: {
        std::vector<const std::pair<Value, Value>*> entries;
        for (const auto& entry : v.as_dict().entries) entries.push_back(&entry);
        if (entries.empty()) {
          *out += "{}";
          return ok_status();
        }
        if (style_.sort_keys) {
          std::stable_sort(entries.begin(), entries.end(),
                           [](const auto* a, const auto* b) { return a->first.str() < b->first.str(); });
        }
        out->push_back('{');
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i > 0) *out += item_;
          newline(level + 1, out);
          const Value& key = entries[i]->first;
          if (key.is_string()) {
            json_string(key.as_string(), style_.ensure_ascii, out);
          } else if (key.is_none()) {
            *out += "\"null\"";
          } else if (key.is_bool()) {
            *out += key.as_bool() ? "\"true\"" : "\"false\"";
          } else if (key.is_number()) {
            json_string(key.repr(), false, out);
          } else {
            return invalid_argument("tojson: keys must be str, int, float, bool or None, not {}", key.kind_name());
          }
          *out += key_;
          HXRT_RETURN_IF_ERROR(write(entries[i]->second, level + 1, out));
        }
        newline(level, out);
        out->push_back('}');
        return ok_status();
      }
      case Value::Kind::kUndefined:
        return invalid_argument("tojson: {}", v.undefined_why().empty() ? "value is undefined" : v.undefined_why());
      case Value::Kind::kFunction: return invalid_argument("tojson: a function is not JSON serializable");
    }
    return ok_status();
  }

 private:
  void newline(int level, std::string* out) const {
    if (style_.indent < 0) return;
    out->push_back('\n');
    out->append(static_cast<size_t>(level) * static_cast<size_t>(style_.indent), ' ');
  }

  const JsonStyle& style_;
  std::string item_;
  std::string key_;
};

}  // namespace

Result<Value> value_from_json(std::string_view text) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) return invalid_argument("not valid JSON: '{}'", text.substr(0, 80));
  return from_nlohmann(j);
}

Result<std::string> to_json(const Value& value, const JsonStyle& style) {
  std::string out;
  JsonWriter writer(style);
  HXRT_RETURN_IF_ERROR(writer.write(value, 0, &out));
  return out;
}

}  // namespace hxrt::llm::jinja
