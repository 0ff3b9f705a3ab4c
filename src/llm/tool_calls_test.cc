// Tool calls (tool_calls.h): the probe tells templates that render tools from those that do not, each format's
// calls are parsed (and what is not a call stays content), the stream gives out the same content as the whole answer,
// and the forcing grammar accepts the calls its tools allow and nothing else.
#include "hxrt/llm/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hxrt/llm/grammar.h"

namespace hxrt::llm {
namespace {

using nlohmann::json;

std::unique_ptr<Tokenizer> tokenizer_with(std::string chat_template) {
  TokenizerSpec spec;
  spec.tokens = {"<|endoftext|>", "a", "b"};
  spec.eos = 0;
  spec.chat_template = std::move(chat_template);
  Result<std::unique_ptr<Tokenizer>> t = Tokenizer::create(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? std::move(t).value() : nullptr;
}

const std::string kTools = json::array({
    json{{"type", "function"},
         {"function", {{"name", "get_weather"},
                       {"description", "The weather in a city"},
                       {"parameters", {{"type", "object"},
                                       {"properties", {{"city", {{"type", "string"}}},
                                                       {"unit", {{"enum", {"c", "f"}}}}}},
                                       {"required", {"city"}}}}}}},
    json{{"type", "function"}, {"function", {{"name", "now"}}}},
}).dump();

TEST(ToolCallsTest, TheProbeFindsWhichTemplatesRenderToolsAndTheirFormat) {
  struct Case {
    const char* name;
    bool renders;
    ToolCallFormat format;
  };
  for (const Case& c : {Case{"qwen", true, ToolCallFormat::kHermes}, Case{"llama3", true, ToolCallFormat::kLlama3},
                        Case{"mistral", true, ToolCallFormat::kMistral}, Case{"chatml", false, ToolCallFormat::kHermes},
                        Case{"gemma", false, ToolCallFormat::kHermes}, Case{"phi3", false, ToolCallFormat::kHermes}}) {
    SCOPED_TRACE(c.name);
    std::unique_ptr<Tokenizer> t = tokenizer_with(c.name);
    ASSERT_NE(t, nullptr);
    const ToolCallStyle style = tool_call_style(*t);
    EXPECT_EQ(style.template_renders_tools, c.renders);
    EXPECT_EQ(style.format, c.format);
  }
}

TEST(ToolCallsTest, TemplatesWithoutToolsGetTheToolsAndTheHistoryAsText) {
  for (const char* name : {"chatml", "gemma", "phi3"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Tokenizer> t = tokenizer_with(name);
    ASSERT_NE(t, nullptr);
    const ToolCallStyle style = tool_call_style(*t);
    const std::vector<ChatMessage> chat = {
        {.role = "system", .content = "Be brief."},
        {.role = "user", .content = "Weather in Oslo?"},
        {.role = "assistant",
         .tool_calls_json = R"([{"id": "call_1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}])"},
        {.role = "tool", .content = "-3 C", .tool_call_id = "call_1"},
        {.role = "tool", .content = "snow", .tool_call_id = "call_2"},
    };
    Result<std::string> text = apply_chat_template_with_tools(*t, style, chat, kTools);
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    EXPECT_NE(text->find("Be brief."), std::string::npos);
    EXPECT_NE(text->find(R"("name":"get_weather")"), std::string::npos) << *text;  // the tool list
    EXPECT_NE(text->find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"),
              std::string::npos)
        << *text;
    EXPECT_NE(text->find("<tool_response>\n-3 C\n</tool_response>\n<tool_response>\nsnow\n</tool_response>"),
              std::string::npos)
        << *text;
  }
}

TEST(ToolCallsTest, EachFormatsCallsAreParsedAndWhatIsNotACallStaysContent) {
  ToolCallAnswer a = parse_tool_calls(
      ToolCallFormat::kHermes,
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"now\", \"arguments\": \"{}\"}</tool_call>");
  EXPECT_EQ(a.content, "Let me look.");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(a.calls[0].arguments), json({{"city", "Oslo"}}));
  EXPECT_EQ(a.calls[1].name, "now");
  EXPECT_EQ(a.calls[1].arguments, "{}");

  a = parse_tool_calls(ToolCallFormat::kHermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}");  // cut short
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.content, "");

  const std::string broken = "<tool_call>\n{\"name\": \"now\", \"arguments\": [1]}\n</tool_call> and <tool_call>x";
  a = parse_tool_calls(ToolCallFormat::kHermes, broken);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, broken);

  a = parse_tool_calls(ToolCallFormat::kLlama3, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(json::parse(a.calls[0].arguments), json({{"city", "Rome"}}));
  a = parse_tool_calls(ToolCallFormat::kLlama3, "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}");
  ASSERT_EQ(a.calls.size(), 1u);
  a = parse_tool_calls(ToolCallFormat::kLlama3, "{\"answer\": 4}");
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(a.content, "{\"answer\": 4}");

  a = parse_tool_calls(ToolCallFormat::kMistral,
                       "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"get_weather\", "
                       "\"arguments\": {\"city\": \"Lima\"}}]");
  ASSERT_EQ(a.calls.size(), 2u);
  EXPECT_EQ(a.calls[1].name, "get_weather");
  a = parse_tool_calls(ToolCallFormat::kMistral, "[{\"name\": \"now\", \"arguments\": {}}, {\"x\": 1}]");
  EXPECT_TRUE(a.calls.empty());  // all or nothing
  a = parse_tool_calls(ToolCallFormat::kMistral, "[1, 2] is a list");
  EXPECT_EQ(a.content, "[1, 2] is a list");
}

// Fed in pieces of every size, the stream gives out content that, with finish()'s, is the whole answer's content
// (up to the whitespace the whole answer trims), and finish() gives its calls.
TEST(ToolCallsTest, StreamedPiecesGiveTheWholeAnswersContentAndCalls) {
  struct Case {
    ToolCallFormat format;
    std::string text;
  };
  const std::vector<Case> cases = {
      {ToolCallFormat::kHermes, "Checking <tool_c the map.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"},
      {ToolCallFormat::kHermes, "No call here, only <tool_ and <tool_call without its end"},
      {ToolCallFormat::kHermes, "plain text <"},
      {ToolCallFormat::kLlama3, "  {\"name\": \"now\", \"parameters\": {}}"},
      {ToolCallFormat::kLlama3, "The answer is 4."},
      {ToolCallFormat::kLlama3, "<|python_tag|>{\"name\": \"now\", \"parameters\": {}}"},
      {ToolCallFormat::kMistral, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}]"},
      {ToolCallFormat::kMistral, "[TOOL_ is not a tag"},
  };
  for (const Case& c : cases) {
    const ToolCallAnswer whole = parse_tool_calls(c.format, c.text);
    for (size_t piece = 1; piece <= 7; ++piece) {
      SCOPED_TRACE(c.text + " in pieces of " + std::to_string(piece));
      ToolCallStream stream(c.format);
      std::string content;
      for (size_t at = 0; at < c.text.size(); at += piece) content += stream.push(std::string_view(c.text).substr(at, piece));
      const ToolCallAnswer end = stream.finish();
      content += end.content;
      const auto trimmed = [](std::string s) {
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
        while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
        return s;
      };
      EXPECT_EQ(trimmed(content), whole.content);
      ASSERT_EQ(end.calls.size(), whole.calls.size());
      for (size_t i = 0; i < whole.calls.size(); ++i) {
        EXPECT_EQ(end.calls[i].name, whole.calls[i].name);
        EXPECT_EQ(end.calls[i].arguments, whole.calls[i].arguments);
      }
    }
  }
}

bool grammar_accepts(const std::string& gbnf, const std::string& text) {
  Result<std::shared_ptr<const Grammar>> grammar = parse_gbnf(gbnf);
  EXPECT_TRUE(grammar.ok()) << grammar.status().to_string() << "\n" << gbnf;
  if (!grammar.ok()) return false;
  GrammarMatcher matcher(*grammar);
  return matcher.accept(text) && matcher.is_complete();
}

TEST(ToolCallsTest, TheForcingGrammarAcceptsTheAllowedCallsOnly) {
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c"}})";
  const std::string now = R"({"name": "now", "arguments": {}})";
  Result<std::string> any = tool_call_grammar(ToolCallFormat::kHermes, kTools, "", /*parallel=*/false);
  ASSERT_TRUE(any.ok()) << any.status().to_string();
  EXPECT_TRUE(grammar_accepts(*any, "<tool_call>\n" + weather + "\n</tool_call>"));
  EXPECT_TRUE(grammar_accepts(*any, "<tool_call>\n" + now + "\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(*any, "<tool_call>\n" + weather + "\n</tool_call>\n<tool_call>\n" + now + "\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(*any, R"(<tool_call>
{"name": "get_weather", "arguments": {"unit": "c"}}
</tool_call>)"));  // city is required
  EXPECT_FALSE(grammar_accepts(*any, R"(<tool_call>
{"name": "delete_all", "arguments": {}}
</tool_call>)"));
  EXPECT_FALSE(grammar_accepts(*any, "Sure! <tool_call>\n" + now + "\n</tool_call>"));

  Result<std::string> parallel = tool_call_grammar(ToolCallFormat::kHermes, kTools, "", /*parallel=*/true);
  ASSERT_TRUE(parallel.ok());
  EXPECT_TRUE(grammar_accepts(*parallel, "<tool_call>\n" + weather + "\n</tool_call>\n<tool_call>\n" + now + "\n</tool_call>"));

  Result<std::string> named = tool_call_grammar(ToolCallFormat::kHermes, kTools, "now", false);
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(grammar_accepts(*named, "<tool_call>\n" + now + "\n</tool_call>"));
  EXPECT_FALSE(grammar_accepts(*named, "<tool_call>\n" + weather + "\n</tool_call>"));

  Result<std::string> llama = tool_call_grammar(ToolCallFormat::kLlama3, kTools, "get_weather", true);
  ASSERT_TRUE(llama.ok());
  EXPECT_TRUE(grammar_accepts(*llama, R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"));
  EXPECT_FALSE(grammar_accepts(*llama, R"({"name": "get_weather", "arguments": {"city": "Oslo"}})"));

  Result<std::string> mistral = tool_call_grammar(ToolCallFormat::kMistral, kTools, "", true);
  ASSERT_TRUE(mistral.ok());
  EXPECT_TRUE(grammar_accepts(*mistral, "[" + now + "," + weather + "]"));

  // What the grammar accepts, the parser reads back as the same calls.
  const ToolCallAnswer back = parse_tool_calls(ToolCallFormat::kHermes, "<tool_call>\n" + weather + "\n</tool_call>");
  ASSERT_EQ(back.calls.size(), 1u);
  EXPECT_EQ(json::parse(back.calls[0].arguments), json({{"city", "Oslo"}, {"unit", "c"}}));
}

TEST(ToolCallsTest, BadToolsAndChoicesAreErrorsNamingThem) {
  EXPECT_EQ(validate_tools("{}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_tools(R"([{"type": "function", "function": {"name": "has space"}}])").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(validate_tools(R"([{"type": "retrieval"}])").code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(validate_tools(kTools).ok());
  Result<std::string> unknown = tool_call_grammar(ToolCallFormat::kHermes, kTools, "fly", false);
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("fly"), std::string::npos);
  const std::string pattern =
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"id": {"type": "string", "pattern": "^[0-9]+$"}}}}}])";
  Result<std::string> unholdable = tool_call_grammar(ToolCallFormat::kHermes, pattern, "", false);
  EXPECT_EQ(unholdable.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unholdable.status().message().find("tools[0]"), std::string::npos);
}

}  // namespace
}  // namespace hxrt::llm
