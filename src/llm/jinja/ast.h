// The parsed form of a Jinja template: expressions and statements as plain trees that the renderer walks.
// Immutable after parsing (shared by every render of the template).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "hxrt/llm/jinja.h"

namespace hxrt::llm::jinja {

struct Position {
  int line = 1;
  int column = 1;
};

enum class ExprKind {
  kLiteral,      // value
  kName,         // name
  kList,         // children: items
  kTuple,        // children: items (a tuple renders as a list)
  kDict,         // children: key, value, key, value, ...
  kAttribute,    // children[0].name
  kSubscript,    // children[0][children[1]]
  kSlice,        // children[0][children[1]:children[2]:children[3]] (absent bounds are nullptr)
  kCall,         // children[0](children[1..], keywords) — keyword values are the last `keywords.size()` children
  kFilter,       // name, children[0] | name(children[1..], keywords)
  kTest,         // name, children[0] is [not] name(children[1..]); negated
  kUnary,        // op ("-", "+", "not"), children[0]
  kBinary,       // op ("+", "-", "*", "/", "//", "%", "**", "~", "and", "or"), children[0], children[1]
  kCompare,      // ops[i] between children[i] and children[i + 1] ("==", "!=", "<", "<=", ">", ">=", "in", "not in")
  kConditional,  // children[1] if children[0] else children[2] (children[2] may be nullptr: Undefined)
};

struct Expr {
  ExprKind kind;
  Position where;
  Value value;                       // kLiteral
  std::string name;                  // kName, kAttribute, kFilter, kTest; the operator for kUnary/kBinary
  std::vector<std::string> ops;      // kCompare
  std::vector<std::string> keywords;  // kCall, kFilter, kTest: names of the trailing keyword arguments
  std::vector<std::unique_ptr<Expr>> children;
  bool negated = false;  // kTest: `is not`
};

enum class StmtKind {
  kText,      // text
  kOutput,    // {{ expr }}
  kIf,        // branches: (condition, body)...; else_body
  kFor,       // targets, iterable = expr, filter = condition, body, else_body
  kSet,       // targets (names, or one "ns.attr") = expr
  kSetBlock,  // targets[0] = rendered body, optionally piped through filters (expr: a kFilter chain over a kName "")
  kMacro,     // name, params (with defaults), body
  kCall,      // {% call(params) expr %} body {% endcall %}: expr is the call, body becomes caller()
  kFilterBlock,  // {% filter f %} body: expr is a kFilter chain whose innermost operand is the body's text
  kBreak,
  kContinue,
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Param {
  std::string name;
  std::unique_ptr<Expr> default_value;  // nullptr: required
};

struct Stmt {
  StmtKind kind;
  Position where;
  std::string text;                  // kText
  std::unique_ptr<Expr> expr;        // kOutput, kFor (iterable), kSet, kCall, kSetBlock/kFilterBlock filters
  std::unique_ptr<Expr> condition;   // kFor's `if`
  std::vector<std::string> targets;  // kFor, kSet, kSetBlock
  std::vector<std::pair<std::unique_ptr<Expr>, Body>> branches;  // kIf
  Body body;
  Body else_body;
  std::string name;            // kMacro
  std::vector<Param> params;   // kMacro, kCall
};

struct Program {
  Body body;
};

// Parses a template (lexer.cc and parser.cc).
Result<std::unique_ptr<Program>> parse_program(std::string_view source);

}  // namespace hxrt::llm::jinja
