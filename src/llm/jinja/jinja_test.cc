// The Jinja engine against Python's jinja2: the differential goldens (every family template and the constructs
// template over every conversation, rendered by jinja2 in transformers' environment by
// scripts/make_chat_template_goldens.py), and single constructs whose jinja2 output is written next to them.
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hxrt/llm/jinja.h"

namespace hxrt::llm::jinja {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 2026-01-15 09:05:07 local time, as the goldens script fixes strftime_now's clock.
std::chrono::system_clock::time_point fixed_now() {
  std::tm tm{};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 0;
  tm.tm_mday = 15;
  tm.tm_hour = 9;
  tm.tm_min = 5;
  tm.tm_sec = 7;
  tm.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&tm));
}

Result<std::string> render(std::string_view source, const Value& context = Value()) {
  HXRT_ASSIGN_OR_RETURN(Template t, Template::parse(source));
  return t.render(context, {.now = fixed_now()});
}

std::string ok(std::string_view source, const Value& context = Value()) {
  Result<std::string> r = render(source, context);
  EXPECT_TRUE(r.ok()) << source << "\n" << r.status().to_string();
  return r.ok() ? *r : std::string("<error>");
}

std::string error_of(std::string_view source, const Value& context = Value()) {
  Result<std::string> r = render(source, context);
  EXPECT_FALSE(r.ok()) << source << " rendered as " << (r.ok() ? *r : "");
  return r.ok() ? std::string() : std::string(r.status().message());
}

// Expected strings below are what jinja2 3.1 renders in transformers' environment (trim_blocks, lstrip_blocks).
TEST(JinjaTest, LoopsGiveEachIterationItsOwnScope) {
  EXPECT_EQ(ok("{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = x + 1 %}{{ x }};{% endfor %}{{ x }}"),
            "01;01;0");
  EXPECT_EQ(ok("{% for i in [1,2] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}[{{ y }}]"), "[]");
  EXPECT_EQ(ok("{% set ns = namespace(a=1) %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}"),
            "4");
}

TEST(JinjaTest, PrintsValuesAsPythonDoes) {
  EXPECT_EQ(ok("{{ 1/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7 % 3 }} {{ 2**10 }} {{ 1e20 }} {{ 0.1+0.2 }}"),
            "0.5 2.0 3 2 1024 1e+20 0.30000000000000004");
  EXPECT_EQ(ok("{{ 'a' ~ none ~ 1 }} {{ x }}|{{ none }}|{{ true }}"), "aNone1 |None|True");
  EXPECT_EQ(ok("{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1] + [2] }} {{ 'x' * 3 }}"),
            "True True True [1, 2] xxx");
  EXPECT_EQ(ok("{{ [1, 'a', none, 2.5] }} {{ {'a': [1]} }} {{ \"it's\" }}"), "[1, 'a', None, 2.5] {'a': [1]} it's");
  EXPECT_EQ(ok("{{ [\"it's\", 'q\"'] }}"), "[\"it's\", 'q\"']");
  EXPECT_EQ(ok("{{ 1e-5 }} {{ 0.0001 }} {{ 1e16 }} {{ 123456789012345.0 }} {{ -0.0 }}"),
            "1e-05 0.0001 1e+16 123456789012345.0 -0.0");
}

TEST(JinjaTest, StringsAreCodePoints) {
  EXPECT_EQ(ok("{% for a in 'héllo' %}{{ a }}.{% endfor %} {{ 'héllo'|length }} {{ 'héllo'[1] }} {{ 'héllo'[::-1] }}"),
            "h.é.l.l.o. 5 é olléh");
  EXPECT_EQ(ok("{{ 'abcdef'[1:4] }} {{ 'abcdef'[-2:] }} {{ [1,2,3,4][::2] }} {{ [1,2,3][5:] }}"), "bcd ef [1, 3] []");
}

TEST(JinjaTest, Filters) {
  EXPECT_EQ(ok("{{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }}"),
            "d  d None");
  EXPECT_EQ(ok("{{ 3.0|int }} {{ '3.5'|float }} {{ 'x'|int }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} "
               "{{ -3|abs }}"),
            "3 3.5 0 2.0 4.0 2.57 3");
  EXPECT_EQ(ok("{{ [3,1,2]|sort }} {{ ['b','A','a']|unique|list }} {{ 'abc'|reverse }}"), "[1, 2, 3] ['b', 'A'] cba");
  EXPECT_EQ(ok("{{ {'a': 'x', 'b': [1, 2.5, none, true]}|tojson }} {{ {'a': 1}|tojson(indent=2) }}"),
            "{\"a\": \"x\", \"b\": [1, 2.5, null, true]} {\n  \"a\": 1\n}");
  EXPECT_EQ(ok("{{ 'x'|indent(2) }}|{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}"),
            "x|a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(ok("{{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ [1,2,3]|sum }} {{ [1,2,3]|max }} {{ [] | first }}"),
            "1 3 6 3 ");
  EXPECT_EQ(ok("{{ [1,2]|join(',') }} {{ [{'a':1},{'a':2}]|map(attribute='a')|join }} {{ ['a','b']|map('upper')|list }}"),
            "1,2 12 ['A', 'B']");
  EXPECT_EQ(ok("{{ [1,2,3,4]|select('odd')|list }} {{ [{'a':1},{'b':2}]|selectattr('a')|list }} "
               "{{ [{'r':'s'},{'r':'u'}]|selectattr('r','equalto','s')|list }}"),
            "[1, 3] [{'a': 1}] [{'r': 's'}]");
  EXPECT_EQ(ok("{{ 'hello world'.title() }} {{ 'hello-world x'|title }} {{ \"they're\".title() }}"),
            "Hello World Hello-World X They'Re");
  EXPECT_EQ(ok("{{ ' a b  c '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }}"),
            "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b c']");
  EXPECT_EQ(ok("{{ {'b':1,'a':2}|dictsort }}"), "[['a', 2], ['b', 1]]");  // jinja2 prints tuples: ('a', 2)
}

TEST(JinjaTest, WhitespaceControl) {
  EXPECT_EQ(ok("  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}\n{# c #}\nz\n"), "  x\n  y\nz");
  EXPECT_EQ(ok("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(ok("a\n  {%+ if true %}b{% endif +%}\nc"), "a\n  b\nc");
  EXPECT_EQ(ok("{{- ' x ' -}}  \n y"), " x y");
  EXPECT_EQ(ok("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(JinjaTest, MacrosAndCallBlocks) {
  EXPECT_EQ(ok("{% macro m(a, b=2) %}{{ a }}{{ b }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, c=5) }}"),
            "12{}|12{'c': 5}");
  EXPECT_EQ(ok("{% macro m(a) %}{{ a }}{% endmacro %}{{ m() }}"), "");
  EXPECT_EQ(ok("{% macro box(t) %}[{{ t }}:{{ caller() }}]{% endmacro %}{% call box('x') %}in{% endcall %}"), "[x:in]");
  EXPECT_EQ(ok("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
}

TEST(JinjaTest, UndefinedBehavesAsJinja2s) {
  EXPECT_EQ(ok("{{ none.x }}|{{ [1,2][5] }}|{{ 'ab'[5] }}|{{ 'a' in undef }}|{{ loop }}"), "|||False|");
  EXPECT_EQ(error_of("{{ d.x.y }}", [] {
              Value ctx{Value::Dict{}};
              ctx.set("d", Value(Value::Dict{}));
              return ctx;
            }()),
            "line 1, column 7: 'dict object' has no attribute 'x'");
  EXPECT_THAT(error_of("{{ undefined_thing + 1 }}"), testing::HasSubstr("'undefined_thing' is undefined"));
  EXPECT_THAT(error_of("{% for x in none %}{% endfor %}"), testing::HasSubstr("'NoneType' object is not iterable"));
}

TEST(JinjaTest, ErrorsNameWhatAndWhere) {
  EXPECT_EQ(error_of("{% if x %}\n{{ x | nosuch }}{% endif %}"), "line 2, column 8: unknown filter 'nosuch'");
  // An index past int64 after '.' or in an attribute path is an error, not an exception (the fuzz target found both
  // through `x.888...8type`).
  EXPECT_THAT(error_of("{{ x.99999999999999999999999 }}"), testing::HasSubstr("out of range"));
  EXPECT_THAT(error_of("{{ [[1]] | map(attribute='0.99999999999999999999999') | list }}"),
              testing::HasSubstr("out of range"));
  EXPECT_EQ(error_of("{{ x is nosuch }}"), "line 1, column 9: unknown test 'nosuch'");
  EXPECT_THAT(error_of("{% for x in y %}"), testing::HasSubstr("expected 'endfor'"));
  EXPECT_THAT(error_of("{{ 'abc }}"), testing::HasSubstr("line 1, column 4: string literal is not terminated"));
  EXPECT_THAT(error_of("\n\n  {% endif %}"), testing::HasSubstr("line 3, column 6: unexpected 'endif'"));
  EXPECT_EQ(error_of("{{ raise_exception('Roles must alternate') }}"), "Roles must alternate");
  EXPECT_THAT(error_of("{% break %}"), testing::HasSubstr("'break' outside of a loop"));
  EXPECT_THAT(error_of("{{ [].append(1) }}"), testing::HasSubstr("immutable sandbox"));
  EXPECT_THAT(error_of("{{ 1 // 0 }}"), testing::HasSubstr("by zero"));
}

TEST(JinjaTest, LimitsStopRunawayTemplates) {
  EXPECT_THAT(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), testing::HasSubstr("nested more than"));
  Result<Template> loops = Template::parse(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}{% endfor %}{% endfor %}"
      "{% endfor %}");
  ASSERT_TRUE(loops.ok());
  Result<std::string> spun = loops->render(Value(), {.max_steps = 100'000});
  ASSERT_FALSE(spun.ok());
  EXPECT_THAT(spun.status().message(), testing::HasSubstr("more than 100000 steps"));
  Result<Template> t = Template::parse("{% for i in range(100000) %}{{ 'xxxxxxxxxx' }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  Result<std::string> r = t->render(Value(), {.max_output_bytes = 1000});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), testing::HasSubstr("more than 1000 bytes"));
  EXPECT_THAT(error_of("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}"), testing::HasSubstr("nested more than"));
}

TEST(JinjaTest, StrftimeNowFormatsTheGivenClock) {
  EXPECT_EQ(ok("{{ strftime_now('%d %b %Y %H:%M:%S') }}"), "15 Jan 2026 09:05:07");
}

// --- the differential goldens ---

struct GoldenCase {
  std::string name;
  nlohmann::ordered_json json;
};

std::string golden_dir() { return std::string(HXRT_SOURCE_DIR) + "/tests/llm/goldens/chat_templates"; }

std::vector<GoldenCase> golden_cases() {
  std::vector<GoldenCase> cases;
  std::ifstream in(golden_dir() + "/goldens.json");
  if (!in) return cases;
  const auto all = nlohmann::ordered_json::parse(in);
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& c = all[i];
    if (c["template"].get<std::string>().starts_with("@model:")) continue;  // needs the model: tokenizer tests
    std::string name = c["template"].get<std::string>() + "_" + c["conversation"].get<std::string>() +
                       (c["add_generation_prompt"].get<bool>() ? "_gen" : "");
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    }
    cases.push_back({name + "_" + std::to_string(i), c});
  }
  return cases;
}

// "line N: got '...' / want '...'" for the first line where two renderings differ.
std::string first_difference(const std::string& got, const std::string& want) {
  std::istringstream a(got);
  std::istringstream b(want);
  std::string x;
  std::string y;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(a, x));
    const bool more_b = static_cast<bool>(std::getline(b, y));
    if (!more_a && !more_b) return "identical lines";
    if (!more_a || !more_b || x != y) {
      return fmt::format("line {}:\n  got  '{}'\n  want '{}'", line, more_a ? x : "<end>", more_b ? y : "<end>");
    }
  }
}

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

class JinjaGoldenTest : public testing::TestWithParam<GoldenCase> {};

TEST_P(JinjaGoldenTest, RendersAsJinja2) {
  const nlohmann::ordered_json& c = GetParam().json;
  static const nlohmann::ordered_json conversations =
      nlohmann::ordered_json::parse(read_file(golden_dir() + "/conversations.json"));
  const std::string source = read_file(std::string(HXRT_SOURCE_DIR) + "/" + c["template"].get<std::string>());
  ASSERT_FALSE(source.empty()) << c["template"];
  Result<Template> t = Template::parse(source);
  ASSERT_TRUE(t.ok()) << t.status().to_string();

  Result<Value> context = value_from_json(conversations.at(c["conversation"].get<std::string>()).dump());
  ASSERT_TRUE(context.ok());
  context->set("add_generation_prompt", Value(c["add_generation_prompt"].get<bool>()));
  context->set("bos_token", Value(c["bos_token"].get<std::string>()));
  context->set("eos_token", Value(c["eos_token"].get<std::string>()));
  Result<std::string> rendered = t->render(*context, {.now = fixed_now()});
  if (c.contains("error")) {
    ASSERT_FALSE(rendered.ok()) << "rendered: " << *rendered;
    EXPECT_EQ(rendered.status().message(), c["error"].get<std::string>());
  } else {
    ASSERT_TRUE(rendered.ok()) << rendered.status().to_string();
    const std::string expected = c["output"].get<std::string>();
    EXPECT_EQ(*rendered, expected) << first_difference(*rendered, expected);
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, JinjaGoldenTest, testing::ValuesIn(golden_cases()),
                         [](const testing::TestParamInfo<GoldenCase>& p) { return p.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(JinjaGoldenTest);

}  // namespace
}  // namespace hxrt::llm::jinja
