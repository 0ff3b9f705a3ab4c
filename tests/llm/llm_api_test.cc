// llm::Llm, the one-step text API, on the real model: streamed text equals the result, stop strings are never
// streamed, callbacks and cancellation stop it, timeouts bound it, the default model is found through the model
// cache, and what it generates is the engine's own greedy continuation.
#include "hxrt/llm/llm.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "testing/default_model.h"

namespace hxrt::llm {
namespace {

constexpr const char* kPrompt = "The capital of France is";

class LlmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = hxrt::testing::find_default_model();
    if (path.empty()) return;
    Result<std::unique_ptr<Llm>> llm = Llm::load({.model = path, .engine = EngineOptions{.kv_budget_tokens = 1024}});
    ASSERT_TRUE(llm.ok()) << llm.status().to_string();
    llm_ = std::move(llm).value().release();
  }
  static void TearDownTestSuite() {
    delete llm_;
    llm_ = nullptr;
  }
  void SetUp() override {
    if (llm_ == nullptr) GTEST_SKIP() << hxrt::testing::kDefaultModelMissing;
  }

  // Generates with the pieces collected.
  static Result<Generation> streamed(GenerateOptions options, std::string* pieces, int stop_after = 0) {
    int calls = 0;
    options.on_text = [&](std::string_view piece) {
      pieces->append(piece);
      return stop_after == 0 || ++calls < stop_after;
    };
    return llm_->generate(kPrompt, options);
  }

  static inline Llm* llm_ = nullptr;
};

TEST_F(LlmTest, StreamsTheEnginesGreedyContinuation) {
  std::string pieces;
  Result<Generation> g = streamed({.max_tokens = 16}, &pieces);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->text, pieces);
  EXPECT_NE(g->text.find("Paris"), std::string::npos) << g->text;

  // The same tokens through the engine directly, decoded.
  Result<std::vector<int32_t>> prompt = llm_->tokenizer().encode(kPrompt, EncodeOptions{.add_special = true});
  ASSERT_TRUE(prompt.ok());
  EXPECT_EQ(g->prompt_tokens, static_cast<int>(prompt->size()));
  Request request;
  request.prompt = *prompt;
  request.max_new_tokens = 16;
  Result<RequestResult> direct = llm_->engine().generate(std::move(request));
  ASSERT_TRUE(direct.ok()) << direct.status().to_string();
  std::vector<int32_t> tokens = direct->tokens;
  std::erase_if(tokens, [](int32_t t) { return llm_->tokenizer().is_eog(t); });
  Result<std::string> text = llm_->tokenizer().decode(tokens);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(g->text, *text);
  EXPECT_EQ(g->completion_tokens, static_cast<int>(direct->tokens.size()));
}

TEST_F(LlmTest, StopStringsEndTheTextAndAreNeverStreamed) {
  Result<Generation> full = llm_->generate(kPrompt, {.max_tokens = 24});
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  ASSERT_GT(full->text.size(), 12u) << full->text;
  // Every stop string cut from the text, of every length from 1 to 6 and at several places, some spanning pieces.
  for (size_t at : {1u, 9u}) {
    for (size_t length = 1; length <= 6 && at + length <= full->text.size(); ++length) {
      const std::string stop = full->text.substr(at, length);
      std::string pieces;
      Result<Generation> g = streamed({.max_tokens = 24, .stop = {stop, "\x01never"}}, &pieces);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      EXPECT_EQ(g->finish, FinishReason::kStopToken) << "stop '" << stop << "'";
      EXPECT_EQ(g->text, full->text.substr(0, full->text.find(stop))) << "stop '" << stop << "'";
      EXPECT_EQ(pieces, g->text) << "stop '" << stop << "': streamed text the stop string cut";
    }
  }
  // A stop string that never forms holds nothing back at the end.
  std::string pieces;
  Result<Generation> g = streamed({.max_tokens = 24, .stop = {"\x01\x02"}}, &pieces);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->text, full->text);
  EXPECT_EQ(pieces, full->text);
  EXPECT_EQ(llm_->generate(kPrompt, {.stop = {""}}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(LlmTest, CallbacksCancellationAndTimeoutsStopIt) {
  std::string pieces;
  Result<Generation> stopped = streamed({.max_tokens = 24}, &pieces, 2);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish, FinishReason::kCallback);
  EXPECT_EQ(stopped->text, pieces);

  std::atomic<bool> cancel{false};
  GenerateOptions options{.max_tokens = 24, .cancel = &cancel};
  int calls = 0;
  std::string cancelled_pieces;
  options.on_text = [&](std::string_view piece) {
    cancelled_pieces.append(piece);
    if (++calls == 3) cancel = true;
    return true;
  };
  Result<Generation> cancelled = llm_->generate(kPrompt, options);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->finish, FinishReason::kCancelled);
  EXPECT_EQ(cancelled->text, cancelled_pieces);

  Result<Generation> late = llm_->generate(kPrompt, {.timeout = hal::Duration::zero()});
  EXPECT_EQ(late.status().code(), StatusCode::kDeadlineExceeded) << late.status().to_string();
  EXPECT_TRUE(llm_->engine().idle()) << "the timed-out request is gone";
}

TEST_F(LlmTest, ChatRepliesThroughTheTemplate) {
  const std::vector<ChatMessage> messages = {{"system", "You are a helpful assistant."},
                                             {"user", "Why is the sky blue?"}};
  Result<Generation> reply = llm_->chat(messages, {.max_tokens = 24});
  ASSERT_TRUE(reply.ok()) << reply.status().to_string();
  EXPECT_GE(reply->completion_tokens, 1);
  EXPECT_NE(reply->text.find("light"), std::string::npos) << reply->text;
  EXPECT_EQ(reply->text.find("<|im_"), std::string::npos) << "control tokens are not text";
  // The template's prompt is the tokenizer's rendering of the messages.
  Result<std::string> rendered = llm_->tokenizer().apply_chat_template(messages, true);
  ASSERT_TRUE(rendered.ok());
  Result<std::vector<int32_t>> tokens =
      llm_->tokenizer().encode(*rendered, EncodeOptions{.add_special = true, .parse_special = true});
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(reply->prompt_tokens, static_cast<int>(tokens->size()));
}

TEST(LlmCacheTest, TheDefaultModelIsFoundInTheModelCacheOrNamed) {
  const char* saved = std::getenv("HXRT_MODEL_DIR");
  const std::string restore = saved != nullptr ? saved : "";
  const std::filesystem::path empty = std::filesystem::temp_directory_path() / "hxrt_llm_test_empty_cache";
  std::filesystem::create_directories(empty);
  setenv("HXRT_MODEL_DIR", empty.c_str(), 1);
  EXPECT_EQ(model_cache_dir(), empty);
  Result<std::string> missing = default_model_path(/*fetch=*/false);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(empty.string()), std::string::npos) << missing.status().to_string();
  Result<std::unique_ptr<Llm>> none = Llm::load({.fetch_default_model = false});
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  if (saved != nullptr) {
    setenv("HXRT_MODEL_DIR", restore.c_str(), 1);
  } else {
    unsetenv("HXRT_MODEL_DIR");
  }
  std::filesystem::remove_all(empty);

  Result<std::unique_ptr<Llm>> bad = Llm::load({.model = "/nonexistent/model.gguf"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace hxrt::llm
