// The operators, attribute and item access, filters, tests and methods of jinja2 and Python, over Values. Errors
// come back without a position; the renderer adds the line and column of the expression.
#pragma once

#include <string_view>

#include "hxrt/llm/jinja.h"

namespace hxrt::llm::jinja {

// Reads the arguments of one call by position or keyword, as Python binds them.
class ArgReader {
 public:
  ArgReader(Arguments& args, std::string_view callee) : args_(args), callee_(callee) {}
  // Argument `index` (or keyword `name`), or `fallback` when not given.
  Value get(size_t index, std::string_view name, Value fallback = Value());
  // InvalidArgument when an argument was given that no get() asked for.
  Status finish() const;

 private:
  Arguments& args_;
  std::string_view callee_;
  size_t positional_used_ = 0;
  std::vector<std::string_view> keywords_used_;
};

// Python's binary operators (+ - * / // % **) and Jinja's ~.
Result<Value> binary_operator(std::string_view op, const Value& a, const Value& b);
// == != < <= > >= in, "not in".
Result<bool> compare(std::string_view op, const Value& a, const Value& b);
// What a for loop over `v` visits: list items, dict keys, string characters; nothing for Undefined.
Result<Value::List> iterate(const Value& v);

// obj.name: a method bound to obj, then a dict item or namespace attribute (jinja2's getattr order); Undefined when
// there is none. Fails for an Undefined obj.
Result<Value> get_attribute(const Value& obj, std::string_view name);
// obj[key]: an item (negative indices from the end), then an attribute; Undefined when there is none.
Result<Value> get_item(const Value& obj, const Value& key);
// obj[start:stop:step] for lists and strings (absent bounds are Undefined).
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// The named filter or test; InvalidArgument "unknown filter 'x'" / "unknown test 'x'".
Result<Value> apply_filter(std::string_view name, const Value& input, Arguments& args);
Result<bool> apply_test(std::string_view name, const Value& input, Arguments& args);
bool is_filter(std::string_view name);
bool is_test(std::string_view name);

// The environment's globals that need no render state: range, namespace, dict.
Value::Dict builtin_globals();

}  // namespace hxrt::llm::jinja
