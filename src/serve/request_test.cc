// The server's request parser: OpenAI's fields read with their types and ranges, errors naming the field.
#include "serve/request.h"

#include <gtest/gtest.h>

namespace hxrt::serve {
namespace {

CompletionRequest ok(std::string_view body, bool chat) {
  auto parsed = parse_request(body, chat, 256, 1000);
  if (const auto* e = std::get_if<HttpError>(&parsed)) ADD_FAILURE() << body << ": " << e->message;
  return std::holds_alternative<CompletionRequest>(parsed) ? std::get<CompletionRequest>(parsed) : CompletionRequest{};
}

HttpError bad(std::string_view body, bool chat) {
  auto parsed = parse_request(body, chat, 256, 1000);
  EXPECT_TRUE(std::holds_alternative<HttpError>(parsed)) << body;
  return std::holds_alternative<HttpError>(parsed) ? std::get<HttpError>(parsed) : HttpError{};
}

TEST(RequestTest, ReadsTheFieldsOfAChatRequest) {
  const CompletionRequest r = ok(R"({"model": "x", "messages": [{"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
      "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 4, "min_p": 0.1, "seed": 42,
      "stop": ["x", ""], "stream": true, "stream_options": {"include_usage": true}, "user": "ignored"})", true);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 4);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stops, std::vector<std::string>{"x"}) << "empty stop strings are dropped";
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.sampling.validate().ok());
  EXPECT_EQ(ok(R"({"messages": [{"role": "user", "content": "hi"}]})", true).max_tokens, 256) << "the default";
  EXPECT_FLOAT_EQ(ok(R"({"messages": [{"role": "user", "content": "hi"}]})", true).sampling.temperature, 1.0f);
}

TEST(RequestTest, ReadsCompletionPromptsAsTextOrTokens) {
  EXPECT_EQ(ok(R"({"prompt": "once"})", false).prompt, "once");
  EXPECT_EQ(ok(R"({"prompt": ["once"]})", false).prompt, "once");
  const CompletionRequest tokens = ok(R"({"prompt": [1, 2, 999], "ignore_eos": true})", false);
  ASSERT_TRUE(tokens.prompt_tokens.has_value());
  EXPECT_EQ(*tokens.prompt_tokens, (std::vector<int32_t>{1, 2, 999}));
  EXPECT_TRUE(tokens.ignore_eos);
  EXPECT_EQ(bad(R"({"prompt": [1, 1000]})", false).param, "prompt") << "outside the vocabulary";
  EXPECT_EQ(bad(R"({"prompt": ""})", false).param, "prompt");
  EXPECT_EQ(bad(R"({"max_tokens": 3})", false).param, "prompt");
}

TEST(RequestTest, BadFieldsAreNamed) {
  EXPECT_NE(bad("{not json", true).message.find("not valid JSON"), std::string::npos);
  EXPECT_EQ(bad("[1]", true).message, "the body must be a JSON object");
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const auto& [field, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("temperature": 2.5)", "temperature"}, {R"("temperature": "hot")", "temperature"},
           {R"("top_p": 0)", "top_p"}, {R"("top_k": -1)", "top_k"}, {R"("max_tokens": -1)", "max_tokens"},
           {R"("max_tokens": 1.5)", "max_tokens"}, {R"("n": 0)", "n"}, {R"("n": 17)", "n"},
           {R"("n": 1.5)", "n"}, {R"("presence_penalty": 2.5)", "presence_penalty"},
           {R"("frequency_penalty": -3)", "frequency_penalty"},
           {R"("stop": 3)", "stop"}, {R"("stop": [1])", "stop"}, {R"("stream": "yes")", "stream"},
           {R"("seed": "x")", "seed"}, {R"("stream_options": 1)", "stream_options"}}) {
    const HttpError e = bad("{" + std::string(user) + ", " + field + "}", true);
    EXPECT_EQ(e.param, param) << field << ": " << e.message;
    EXPECT_EQ(e.status, 400);
  }
  EXPECT_EQ(bad(R"({"messages": []})", true).param, "messages");
  EXPECT_EQ(bad(R"({"messages": [{"content": "no role"}]})", true).param, "messages[0]");
  EXPECT_EQ(bad(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true).param, "messages[0]");
  const std::string json = error_json(HttpError{.message = "m", .param = "p"});
  EXPECT_EQ(json, R"({"error":{"message":"m","type":"invalid_request_error","param":"p","code":null}})");
}

TEST(RequestTest, ReadsLogprobsAsEachEndpointSpellsThem) {
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_EQ(ok("{" + std::string(user) + "}", true).logprobs, -1);
  EXPECT_EQ(ok("{" + std::string(user) + R"(, "logprobs": true})", true).logprobs, 0);
  EXPECT_EQ(ok("{" + std::string(user) + R"(, "logprobs": true, "top_logprobs": 5})", true).logprobs, 5);
  EXPECT_EQ(ok("{" + std::string(user) + R"(, "logprobs": false})", true).logprobs, -1);
  EXPECT_EQ(ok(R"({"prompt": "x", "logprobs": 3})", false).logprobs, 3);
  EXPECT_EQ(ok(R"({"prompt": "x", "logprobs": null})", false).logprobs, -1);
  EXPECT_EQ(bad("{" + std::string(user) + R"(, "top_logprobs": 2})", true).param, "top_logprobs") << "needs logprobs";
  EXPECT_EQ(bad("{" + std::string(user) + R"(, "logprobs": true, "top_logprobs": 21})", true).param, "top_logprobs");
  EXPECT_EQ(bad("{" + std::string(user) + R"(, "logprobs": 2})", true).param, "logprobs");
  EXPECT_EQ(bad(R"({"prompt": "x", "logprobs": true})", false).param, "logprobs");
}

TEST(RequestTest, ReadsLogitBiasAsTokenIdsAndBoundedValues) {
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  const CompletionRequest r = ok("{" + std::string(user) + R"(, "logit_bias": {"5": 10, "999": -100}})", true);
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{5, 10.0f}, {999, -100.0f}}));
  EXPECT_TRUE(r.sampling.validate().ok());
  for (const char* field : {R"("logit_bias": {"1000": 1})", R"("logit_bias": {"x": 1})", R"("logit_bias": {"-1": 1})",
                            R"("logit_bias": {"5": 101})", R"("logit_bias": {"5": "a"})", R"("logit_bias": [1])"}) {
    EXPECT_EQ(bad("{" + std::string(user) + ", " + field + "}", true).param, "logit_bias") << field;
  }
}

TEST(RequestTest, ReadsSpeculativeOptionsWithLlamaServersKey) {
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_FALSE(ok("{" + std::string(user) + "}", true).speculative.has_value());
  const CompletionRequest r = ok("{" + std::string(user) + R"(, "speculative.n_max": 12, "speculative.ngram_min": 2})", true);
  ASSERT_TRUE(r.speculative.has_value());
  EXPECT_EQ(r.speculative->draft_max, 12);
  EXPECT_EQ(r.speculative->ngram_min, 2);
  EXPECT_EQ(r.speculative->ngram_max, llm::SpeculativeOptions{}.ngram_max);
  EXPECT_TRUE(r.speculative->validate().ok());
  EXPECT_EQ(ok(R"({"prompt": "x", "speculative.n_max": 0})", false).speculative->draft_max, 0);
  for (const auto& [field, param] :
       {std::pair{R"("speculative.n_max": 65)", "speculative.n_max"}, std::pair{R"("speculative.n_max": "4")", "speculative.n_max"},
        std::pair{R"("speculative.n_max": -1)", "speculative.n_max"}, std::pair{R"("speculative.ngram_max": 0)", "speculative.ngram_max"},
        std::pair{R"("speculative.ngram_min": 4, "speculative.ngram_max": 2)", "speculative.ngram_min"}}) {
    EXPECT_EQ(bad("{" + std::string(user) + ", " + field + "}", true).param, param) << field;
  }
}

TEST(RequestTest, ReadsEmbeddingInputsInEveryOpenAiForm) {
  const auto ok_embedding = [](const std::string& body) {
    auto parsed = parse_embedding_request(body, 1000);
    EXPECT_TRUE(std::holds_alternative<EmbeddingRequest>(parsed)) << body;
    return std::holds_alternative<EmbeddingRequest>(parsed) ? std::get<EmbeddingRequest>(parsed) : EmbeddingRequest{};
  };
  using Input = std::variant<std::string, std::vector<int32_t>>;
  EXPECT_EQ(ok_embedding(R"({"input": "hello"})").inputs, (std::vector<Input>{std::string("hello")}));
  EXPECT_EQ(ok_embedding(R"({"input": ["a", "b"], "model": "x"})").inputs,
            (std::vector<Input>{std::string("a"), std::string("b")}));
  EXPECT_EQ(ok_embedding(R"({"input": [1, 2, 3]})").inputs, (std::vector<Input>{std::vector<int32_t>{1, 2, 3}}));
  EXPECT_EQ(ok_embedding(R"({"input": [[1], [2, 3]]})").inputs,
            (std::vector<Input>{std::vector<int32_t>{1}, std::vector<int32_t>{2, 3}}));
  EXPECT_TRUE(ok_embedding(R"({"input": "x", "encoding_format": "base64"})").base64);
  EXPECT_FALSE(ok_embedding(R"({"input": "x", "encoding_format": "float"})").base64);
  EXPECT_EQ(ok_embedding(R"({"input": "x", "dimensions": 64})").dimensions, 64);
  std::string too_many = R"({"input": [)";
  for (int i = 0; i <= kMaxEmbeddingInputs; ++i) too_many += (i ? ",\"x\"" : "\"x\"");
  too_many += "]}";
  for (const auto& [body, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({})", "input"}, {R"({"input": ""})", "input"}, {R"({"input": []})", "input"},
           {R"({"input": [1000]})", "input"}, {R"({"input": [[]]})", "input"}, {R"({"input": [{"a": 1}]})", "input"},
           {R"({"input": 3})", "input"}, {too_many, "input"}, {R"({"input": "x", "encoding_format": "hex"})", "encoding_format"},
           {R"({"input": "x", "dimensions": "8"})", "dimensions"}, {"[1]", ""}, {"{nope", ""}}) {
    auto parsed = parse_embedding_request(body, 1000);
    ASSERT_TRUE(std::holds_alternative<HttpError>(parsed)) << body;
    EXPECT_EQ(std::get<HttpError>(parsed).param, param) << body;
  }
}

TEST(RequestTest, Base64IsRfc4648) {
  // RFC 4648, section 10's test vectors, and bytes above 0x7f.
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe\x00\x80", 4)), "//4AgA==");
}

TEST(RequestTest, ReadsJsonObjectResponseFormatAndGbnfGrammars) {
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  const CompletionRequest json_mode = ok("{" + std::string(user) + R"(, "response_format": {"type": "json_object"}})", true);
  EXPECT_TRUE(json_mode.json_object);
  EXPECT_TRUE(json_mode.grammar.empty());
  const CompletionRequest gbnf = ok(R"({"prompt": "x", "grammar": "root ::= [a-z]+"})", false);
  EXPECT_FALSE(gbnf.json_object);
  EXPECT_EQ(gbnf.grammar, "root ::= [a-z]+");
  EXPECT_FALSE(ok("{" + std::string(user) + R"(, "response_format": {"type": "text"}})", true).json_object);
  const CompletionRequest schema = ok("{" + std::string(user) +
                                          R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n",
                                              "strict": true, "schema": {"type": "integer"}}}})",
                                      true);
  EXPECT_EQ(schema.json_schema, R"({"type":"integer"})");
  EXPECT_EQ(schema.json_schema_param, "response_format");
  EXPECT_EQ(ok(R"({"prompt": "x", "json_schema": {"type": "string"}})", false).json_schema_param, "json_schema");
}

// What would change the output and is not served is refused by name; what would not is accepted.
TEST(RequestTest, UnservedFieldsThatChangeTheOutputAreRefusedByName) {
  const char* user = R"("messages": [{"role": "user", "content": "hi"}])";
  for (const auto& [field, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("response_format": {"type": "json_schema", "json_schema": {}})", "response_format"},
           {R"("json_schema": 3)", "json_schema"},
           {R"("json_schema": {}, "response_format": {"type": "json_object"})", "json_schema"},
           {R"("response_format": {"type": "xml"})", "response_format"}, {R"("grammar": 3)", "grammar"},
           {R"("grammar": "root ::= \"a\"", "response_format": {"type": "json_object"})", "grammar"},
           {R"("tool_choice": "required")", "tool_choice"},
           {R"("tool_choice": {"type": "function", "function": {"name": "f"}})", "tool_choice"},
           {R"("tool_choice": "always")", "tool_choice"},
           {R"("tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required",
               "response_format": {"type": "json_object"})", "tool_choice"},
           {R"("parallel_tool_calls": "yes")", "parallel_tool_calls"}, {R"("tools": {})", "tools"},
           {R"("functions": [])", "functions"}, {R"("best_of": 2)", "best_of"},
           {R"("modalities": ["text", "audio"])", "modalities"}, {R"("audio": {"voice": "alloy"})", "audio"},
           {R"("web_search_options": {})", "web_search_options"}}) {
    const HttpError e = bad("{" + std::string(user) + ", " + field + "}", true);
    EXPECT_EQ(e.param, param) << field << ": " << e.message;
  }
  EXPECT_EQ(bad("{" + std::string(user) + R"(, "echo": true})", true).param, "echo");
  EXPECT_EQ(bad(R"({"prompt": "x", "echo": 1})", false).param, "echo");
  EXPECT_TRUE(ok(R"({"prompt": "x", "echo": true, "max_tokens": 0, "logprobs": 1})", false).echo);
  EXPECT_EQ(bad(R"({"prompt": "x", "suffix": "end"})", false).param, "suffix");
  ok("{" + std::string(user) +
         R"(, "response_format": {"type": "text"}, "tool_choice": "auto", "user": "u",
             "metadata": {"a": "b"}, "store": false, "parallel_tool_calls": true, "modalities": ["text"],
             "prediction": {"type": "content", "content": "x"}, "reasoning_effort": "low"})",
     true);
  ok(R"({"prompt": "x", "echo": false, "suffix": "", "best_of": 1})", false);
}

TEST(RequestTest, ToolChoiceIsReadWithItsFunctionAndToolsKeepTheirKeysOrder) {
  const char* chat = R"({"messages": [{"role": "user", "content": "hi"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                 "properties": {"zeta": {"type": "string"}, "alpha": {"type": "integer"}}}}}])";
  const std::string base(chat);
  EXPECT_EQ(bad(R"({"messages": [{"role": "wizard", "content": "hi"}]})", true).param, "messages[0].role");
  EXPECT_EQ(ok(R"({"messages": [{"role": "developer", "content": "be brief"}, {"role": "user", "content": "hi"}]})",
               true).messages[0].role,
            "system");
  EXPECT_EQ(ok(base + "}", true).tool_choice, ToolChoice::kAuto);
  EXPECT_EQ(ok(base + R"(, "tool_choice": "none"})", true).tool_choice, ToolChoice::kNone);
  const CompletionRequest required = ok(base + R"(, "tool_choice": "required", "parallel_tool_calls": false})", true);
  EXPECT_EQ(required.tool_choice, ToolChoice::kRequired);
  EXPECT_FALSE(required.parallel_tool_calls);
  const CompletionRequest named = ok(base + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})", true);
  EXPECT_EQ(named.tool_choice, ToolChoice::kFunction);
  EXPECT_EQ(named.tool_choice_function, "f");
  EXPECT_LT(named.tools_json.find("zeta"), named.tools_json.find("alpha"));  // the order the model is shown
  EXPECT_TRUE(ok(R"({"messages": [{"role": "user", "content": "hi"}], "tools": []})", true).tools_json.empty());
}

}  // namespace
}  // namespace hxrt::serve
