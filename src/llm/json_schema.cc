#include "hxrt/llm/json_schema.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hxrt::llm {
namespace {

using json = nlohmann::ordered_json;  // properties keep the schema's order

constexpr int kMaxDepth = 64;

// The JSON primitives every converted grammar shares (names start with 'j'; generated rules with 'r' or 'd').
// Whitespace between tokens is bounded so that a model cannot loop on it.
constexpr std::string_view kPrimitives = R"gbnf(ws ::= [ \t\n\r]{0,24}
jvalue ::= jobject | jarray | jstring | jnumber | jbool | jnull
jobject ::= "{" ws ( jstring ws ":" ws jvalue ws ( "," ws jstring ws ":" ws jvalue ws )* )? "}"
jarray ::= "[" ws ( jvalue ws ( "," ws jvalue ws )* )? "]"
jstring ::= "\"" jchar* "\""
jchar ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
jint ::= "0" | [1-9] [0-9]*
jinteger ::= "-"? jint
jnumber ::= "-"? jint ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
jbool ::= "true" | "false"
jnull ::= "null"
)gbnf";

// Keywords that constrain nothing a grammar must follow, or that the converter reads.
const std::set<std::string, std::less<>> kKnown = {
    "type", "properties", "required", "items", "minItems", "maxItems", "minLength", "maxLength", "enum", "const",
    "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "title", "description", "default", "examples",
    "$schema", "$id", "$comment", "additionalProperties", "strict", "format", "name", "deprecated", "readOnly",
    "writeOnly", "nullable"};

// A GBNF string literal producing exactly `bytes`.
std::string literal(std::string_view bytes) {
  std::string out = "\"";
  for (const char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20) {
      out += fmt::format("\\x{:02X}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

class Converter {
 public:
  explicit Converter(const json& root) : root_(root) {}

  Result<std::string> run() {
    HXRT_ASSIGN_OR_RETURN(const std::string body, visit(root_, "", 0));
    std::string out = "root ::= ws " + body + " ws\n";
    for (const auto& [name, text] : rules_) out += name + " ::= " + text + "\n";
    out += kPrimitives;
    return out;
  }

 private:
  std::string add_rule(const std::string& text) {
    std::string name = fmt::format("r{}", rules_.size() + 1);
    rules_.emplace_back(name, text);
    return name;
  }

  // A GBNF expression (a rule name or a group) for the documents `schema`, found at JSON pointer `where`, accepts.
  Result<std::string> visit(const json& schema, const std::string& where, int depth) {
    if (depth > kMaxDepth) return invalid_argument("json_schema: nested deeper than {} at '{}'", kMaxDepth, where);
    if (schema.is_boolean()) {
      if (schema.get<bool>()) return std::string("jvalue");
      return invalid_argument("json_schema: 'false' at '{}' accepts no document", where);
    }
    if (!schema.is_object()) return invalid_argument("json_schema: the schema at '{}' is not an object", where);
    for (const auto& item : schema.items()) {
      if (!kKnown.contains(item.key())) {
        return invalid_argument("json_schema: '{}' at '{}' is not supported (the output could not be held to it)",
                                item.key(), where);
      }
    }
    if (schema.contains("$ref")) return ref(schema["$ref"], where, depth);
    if (schema.contains("const")) return literal(schema["const"].dump());
    if (schema.contains("enum")) {
      const json& values = schema["enum"];
      if (!values.is_array() || values.empty()) {
        return invalid_argument("json_schema: 'enum' at '{}' must be a non-empty array", where);
      }
      std::string out = "(";
      for (size_t i = 0; i < values.size(); ++i) out += (i ? " | " : " ") + literal(values[i].dump());
      return out + " )";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      const json& options = schema[key];
      if (!options.is_array() || options.empty()) {
        return invalid_argument("json_schema: '{}' at '{}' must be a non-empty array", key, where);
      }
      std::string out = "(";
      for (size_t i = 0; i < options.size(); ++i) {
        HXRT_ASSIGN_OR_RETURN(const std::string option,
                              visit(options[i], fmt::format("{}/{}/{}", where, key, i), depth + 1));
        out += (i ? " | " : " ") + option;
      }
      return out + " )";
    }
    if (schema.contains("allOf")) {
      const json& all = schema["allOf"];
      if (!all.is_array() || all.size() != 1) {
        return invalid_argument("json_schema: 'allOf' at '{}' is supported with one schema only", where);
      }
      return visit(all[0], where + "/allOf/0", depth + 1);
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const json& t : type) {
          if (!t.is_string()) return invalid_argument("json_schema: 'type' at '{}' must name types", where);
          types.push_back(t.get<std::string>());
        }
      } else {
        return invalid_argument("json_schema: 'type' at '{}' must be a type name or a list of them", where);
      }
    } else if (schema.contains("properties")) {
      types.push_back("object");
    } else if (schema.contains("items")) {
      types.push_back("array");
    } else {
      return std::string("jvalue");
    }
    if (schema.value("nullable", false)) types.push_back("null");
    std::string out = "(";
    for (size_t i = 0; i < types.size(); ++i) {
      HXRT_ASSIGN_OR_RETURN(const std::string typed, of_type(schema, types[i], where, depth));
      out += (i ? " | " : " ") + typed;
    }
    return out + " )";
  }

  Result<std::string> of_type(const json& schema, const std::string& type, const std::string& where, int depth) {
    if (type == "object") return object(schema, where, depth);
    if (type == "array") return array(schema, where, depth);
    if (type == "string") {
      if (!schema.contains("minLength") && !schema.contains("maxLength")) return std::string("jstring");
      HXRT_ASSIGN_OR_RETURN(const std::string bounds, repetition(schema, "minLength", "maxLength", where, 0));
      return add_rule("\"\\\"\" jchar" + bounds + " \"\\\"\"");
    }
    if (type == "number") return std::string("jnumber");
    if (type == "integer") return std::string("jinteger");
    if (type == "boolean") return std::string("jbool");
    if (type == "null") return std::string("jnull");
    return invalid_argument("json_schema: unknown type '{}' at '{}'", type, where);
  }

  // "{m,n}" from the schema's bounds, shifted down by `offset` (for "first, then {m-1,n-1} more").
  Result<std::string> repetition(const json& schema, const char* min_key, const char* max_key, const std::string& where,
                                 int64_t offset) {
    int64_t lo = 0, hi = -1;
    for (const auto& [key, field] : {std::pair{min_key, &lo}, std::pair{max_key, &hi}}) {
      if (!schema.contains(key)) continue;
      if (!schema[key].is_number_integer() || schema[key].get<int64_t>() < 0 || schema[key].get<int64_t>() > 10000) {
        return invalid_argument("json_schema: '{}' at '{}' must be an integer in [0, 10000]", key, where);
      }
      *field = schema[key].get<int64_t>();
    }
    if (hi >= 0 && hi < lo) return invalid_argument("json_schema: '{}' < '{}' at '{}'", max_key, min_key, where);
    lo = std::max<int64_t>(0, lo - offset);
    if (hi < 0) return fmt::format("{{{},}}", lo);
    return fmt::format("{{{},{}}}", lo, std::max<int64_t>(0, hi - offset));
  }

  Result<std::string> array(const json& schema, const std::string& where, int depth) {
    std::string item = "jvalue";
    if (schema.contains("items")) {
      HXRT_ASSIGN_OR_RETURN(item, visit(schema["items"], where + "/items", depth + 1));
    }
    const int64_t min_items = schema.contains("minItems") && schema["minItems"].is_number_integer()
                                  ? schema["minItems"].get<int64_t>() : 0;
    if (schema.contains("maxItems") && schema["maxItems"].is_number_integer() && schema["maxItems"].get<int64_t>() == 0) {
      return add_rule("\"[\" ws \"]\"");
    }
    HXRT_ASSIGN_OR_RETURN(const std::string more, repetition(schema, "minItems", "maxItems", where, 1));
    const std::string elements = item + " ws ( \",\" ws " + item + " ws )" + more;
    return add_rule("\"[\" ws " + (min_items > 0 ? elements : "( " + elements + " )?") + " \"]\"");
  }

  // Keys in the schema's order, each required one present, each optional one present or not (Note in the header:
  // no keys beyond `properties`).
  Result<std::string> object(const json& schema, const std::string& where, int depth) {
    if (!schema.contains("properties")) return std::string("jobject");
    const json& properties = schema["properties"];
    if (!properties.is_object()) return invalid_argument("json_schema: 'properties' at '{}' must be an object", where);
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) return invalid_argument("json_schema: 'required' at '{}' must be a list", where);
      for (const json& key : schema["required"]) {
        if (!key.is_string() || !properties.contains(key.get<std::string>())) {
          return invalid_argument("json_schema: 'required' at '{}' names a key not in 'properties'", where);
        }
        required.insert(key.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, bool>> members;  // (kv expression, required)
    for (const auto& item : properties.items()) {
      HXRT_ASSIGN_OR_RETURN(const std::string value,
                            visit(item.value(), where + "/properties/" + item.key(), depth + 1));
      members.emplace_back(literal(json(item.key()).dump()) + " ws \":\" ws " + value + " ws",
                           required.contains(item.key()));
    }
    // first(i): members i.. with none written yet; rest(i): members i.. after one was written (so a comma leads).
    std::string first, rest;  // "" stands for the empty sequence
    for (size_t i = members.size(); i-- > 0;) {
      const auto& [kv, is_required] = members[i];
      const std::string after = rest.empty() ? "" : " " + rest;
      const std::string next_rest = is_required ? add_rule("\",\" ws " + kv + after)
                                                : add_rule("( \",\" ws " + kv + " )?" + after);
      const std::string next_first =
          is_required ? add_rule(kv + after)
                      : add_rule(kv + after + " | " + (first.empty() ? std::string("\"\"") : first));
      rest = next_rest;
      first = next_first;
    }
    return add_rule("\"{\" ws " + (first.empty() ? std::string() : first + " ") + "\"}\"");
  }

  Result<std::string> ref(const json& target, const std::string& where, int depth) {
    if (!target.is_string()) return invalid_argument("json_schema: '$ref' at '{}' must be a string", where);
    const std::string pointer = target.get<std::string>();
    if (auto it = defs_.find(pointer); it != defs_.end()) return it->second;
    std::string section;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      if (pointer.rfind(prefix, 0) == 0) section = prefix;
    }
    if (section.empty()) {
      return invalid_argument("json_schema: '$ref' '{}' at '{}' is not a local #/$defs/ or #/definitions/ reference",
                              pointer, where);
    }
    const std::string key = section.substr(2, section.size() - 3);
    const std::string name = pointer.substr(section.size());
    if (!root_.contains(key) || !root_[key].is_object() || !root_[key].contains(name)) {
      return invalid_argument("json_schema: '$ref' '{}' at '{}' names no definition", pointer, where);
    }
    const std::string rule = fmt::format("d{}", defs_.size() + 1);
    defs_.emplace(pointer, rule);  // before the body, so that recursive references find it
    HXRT_ASSIGN_OR_RETURN(const std::string body, visit(root_[key][name], pointer.substr(1), depth + 1));
    rules_.emplace_back(rule, body);
    return rule;
  }

  const json& root_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::map<std::string, std::string> defs_;  // $ref pointer → rule name
};

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema) {
  const json parsed = json::parse(schema, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return invalid_argument("json_schema: the schema is not valid JSON");
  try {
    return Converter(parsed).run();
  } catch (const json::exception& e) {  // a value that passed its type check but not a conversion
    return invalid_argument("json_schema: a value cannot be read: {}", e.what());
  }
}

}  // namespace hxrt::llm
