// A Jinja engine for chat templates: the subset Hugging Face's `apply_chat_template` environment renders (jinja2's
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and loop controls; `tojson` as json.dumps with
// ensure_ascii=False; the globals `raise_exception`, `strftime_now`, `namespace`, `range`).
//
// Values behave as Python's do where templates can tell: ints and floats print as Python prints them, lists and
// dicts are shared by reference and keep insertion order, strings are UTF-8 and are measured, indexed and sliced by
// code point. A name that is not set is Undefined: it prints empty, is false, iterates as nothing, and fails when an
// attribute of it is read (jinja2's default Undefined).
//
// Threading: a parsed Template is immutable; render() may be called from any number of threads at once. Values are
// thread-compatible (a context shared between threads must not be mutated while renders read it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::llm::jinja {

class Value;

// The arguments of a call from a template: positional first, then keyword, as written.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// A callable value: a global such as `range`, a bound method, a macro.
using Function = std::function<Result<Value>(Arguments&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  using List = std::vector<Value>;
  // Insertion-ordered; keys are compared as Python compares them (1 == 1.0 == True).
  struct Dict {
    std::vector<std::pair<Value, Value>> entries;
    bool is_namespace = false;  // namespace(): the one kind of object `{% set ns.x = ... %}` may change

    const Value* find(const Value& key) const;
    const Value* find_key(std::string_view key) const;  // a string key, without building a Value
    void set(Value key, Value value);
  };

  Value() = default;  // Undefined
  // `why` is jinja2's message for using it: "'x' is undefined", "'dict object' has no attribute 'y'".
  static Value undefined(std::string why) { return Value(Undefined{std::move(why)}); }
  static Value none() { return Value(None{}); }
  Value(bool b) : data_(b) {}              // NOLINT(google-explicit-constructor)
  Value(int64_t i) : data_(i) {}           // NOLINT(google-explicit-constructor)
  Value(int i) : data_(int64_t{i}) {}      // NOLINT(google-explicit-constructor)
  Value(double d) : data_(d) {}            // NOLINT(google-explicit-constructor)
  Value(std::string s) : data_(std::move(s)) {}                // NOLINT(google-explicit-constructor)
  Value(std::string_view s) : data_(std::string(s)) {}         // NOLINT(google-explicit-constructor)
  Value(const char* s) : data_(std::string(s)) {}              // NOLINT(google-explicit-constructor)
  Value(List list) : data_(std::make_shared<List>(std::move(list))) {}  // NOLINT(google-explicit-constructor)
  Value(Dict dict) : data_(std::make_shared<Dict>(std::move(dict))) {}  // NOLINT(google-explicit-constructor)
  Value(Function f) : data_(std::make_shared<Function>(std::move(f))) {}  // NOLINT(google-explicit-constructor)

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_function() const { return kind() == Kind::kFunction; }

  // Accessors; calling one for another kind is a programmer error (checked).
  bool as_bool() const;
  int64_t as_int() const;  // bools and ints
  double as_double() const;  // bools, ints and floats
  const std::string& as_string() const;
  List& as_list() const;
  Dict& as_dict() const;
  const Function& as_function() const;
  // Why an Undefined is undefined (its message when used).
  const std::string& undefined_why() const;

  // Python's truth value.
  bool truthy() const;
  // Python's str(): what `{{ value }}` prints (Undefined prints nothing).
  std::string str() const;
  // Python's repr(): how a value prints inside a list or dict.
  std::string repr() const;
  // Python's ==.
  bool equals(const Value& other) const;
  // A kind name for messages ("string", "list", "undefined").
  std::string_view kind_name() const;

  // Dict convenience for building contexts: sets `key` (a string) on a dict value.
  void set(std::string_view key, Value value) const { as_dict().set(Value(key), std::move(value)); }

 private:
  struct Undefined {
    std::string why;
  };
  struct None {};
  using Data = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
                            std::shared_ptr<Dict>, std::shared_ptr<Function>>;
  explicit Value(Undefined u) : data_(std::move(u)) {}
  explicit Value(None n) : data_(n) {}
  Data data_;
};

// JSON text → Value (objects keep their key order; integers stay ints). InvalidArgument naming the position when
// the text is not JSON.
Result<Value> value_from_json(std::string_view text);

// json.dumps(value, ensure_ascii=False, indent, separators, sort_keys) as Python writes it: indent < 0 means none;
// separators default to (", ", ": ") without indent and (",", ": ") with it. InvalidArgument for values JSON cannot
// hold (Undefined, functions).
struct JsonStyle {
  int indent = -1;
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
  bool ensure_ascii = false;  // escape every non-ASCII character as \uXXXX
};
Result<std::string> to_json(const Value& value, const JsonStyle& style = {});

struct RenderOptions {
  // The time `strftime_now` formats (local time); unset: the clock at render time.
  std::optional<std::chrono::system_clock::time_point> now;
  size_t max_output_bytes = size_t{16} << 20;  // OutOfRange past this
  int max_depth = 200;                         // nested macro calls, loops and expressions
  int64_t max_steps = 50'000'000;              // evaluated nodes: bounds templates that loop without printing
};

struct Program;  // the parsed template (src/llm/jinja/ast.h)

class Template {
 public:
  // Parses `source` as jinja2 does with trim_blocks and lstrip_blocks (and without keep_trailing_newline: one
  // newline at the very end is dropped). InvalidArgument "line L, column C: ..." on a syntax error.
  static Result<Template> parse(std::string_view source);

  // Renders with the variables of `context` (a dict, or Undefined for none). A template that calls
  // raise_exception(msg) fails with InvalidArgument whose message is msg; other errors (an unknown filter or test,
  // a type error) are InvalidArgument and a limit of `options` OutOfRange, each naming the line.
  Result<std::string> render(const Value& context, const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace hxrt::llm::jinja
