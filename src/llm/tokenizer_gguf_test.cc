// Tokenizer from GGUF metadata: the spec reader on small files made with GgufWriter, then SmolLM2-135M-Instruct
// itself, compared with llama.cpp's goldens (tests/llm/goldens/smollm2-135m-q4_1.json, written by
// scripts/make_llm_goldens.py). The real-model tests skip when the model or the goldens are absent.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "hxrt/formats/gguf.h"
#include "hxrt/llm/jinja.h"
#include "hxrt/llm/tokenizer.h"
#include "llm/tokenizer_utf8.h"
#include "testing/default_model.h"

namespace hxrt::llm {
namespace {

using formats::GgufArray;
using formats::GgufFile;
using formats::GgufValue;
using formats::GgufWriter;

// ---- Spec from small GGUF files -------------------------------------------------------------------------------

// A GGUF file held in memory together with its bytes.
struct MemoryGguf {
  std::shared_ptr<std::vector<std::byte>> bytes;
  std::unique_ptr<GgufFile> file;
};

MemoryGguf to_file(const GgufWriter& writer) {
  MemoryGguf out;
  auto bytes = writer.serialize();
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  out.bytes = std::make_shared<std::vector<std::byte>>(std::move(bytes).value());
  auto file = GgufFile::from_memory(*out.bytes, out.bytes);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  out.file = std::make_unique<GgufFile>(std::move(file).value());
  return out;
}

GgufWriter spm_writer() {
  GgufWriter w;
  EXPECT_TRUE(w.add("tokenizer.ggml.model", GgufValue("llama")).ok());
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>", "\u2581", "a", "\u2581a"};
  EXPECT_TRUE(w.add("tokenizer.ggml.tokens", GgufValue(GgufArray(tokens))).ok());
  EXPECT_TRUE(w.add("tokenizer.ggml.scores", GgufValue(GgufArray(std::vector<float>{0, 0, 0, -1, -1, -0.5f}))).ok());
  EXPECT_TRUE(w.add("tokenizer.ggml.token_type", GgufValue(GgufArray(std::vector<int32_t>{2, 3, 3, 1, 1, 1}))).ok());
  return w;
}

TEST(TokenizerSpecFromGguf, SpmDefaultsAreLlamaCpps) {
  const MemoryGguf gguf = to_file(spm_writer());
  auto spec = tokenizer_spec_from_gguf(*gguf.file);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->model, TokenizerModel::kSpm);
  EXPECT_EQ(spec->bos, 1);
  EXPECT_EQ(spec->eos, 2);
  EXPECT_EQ(spec->unk, 0);
  EXPECT_EQ(spec->pad, kNoToken);
  EXPECT_TRUE(spec->add_bos);
  EXPECT_FALSE(spec->add_eos);
  EXPECT_TRUE(spec->add_space_prefix);
  EXPECT_THAT(spec->token_types, ::testing::ElementsAre(TokenType::kUnknown, TokenType::kControl, TokenType::kControl,
                                                        TokenType::kNormal, TokenType::kNormal, TokenType::kNormal));
  auto tokenizer = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  EXPECT_THAT(*(*tokenizer)->encode("a"), ::testing::ElementsAre(1, 5));
}

TEST(TokenizerSpecFromGguf, KeysOverrideDefaults) {
  GgufWriter w = spm_writer();
  ASSERT_TRUE(w.add("tokenizer.ggml.add_bos_token", GgufValue(false)).ok());
  ASSERT_TRUE(w.add("tokenizer.ggml.add_space_prefix", GgufValue(false)).ok());
  ASSERT_TRUE(w.add("tokenizer.ggml.eos_token_id", GgufValue(uint32_t{1})).ok());
  ASSERT_TRUE(w.add("tokenizer.ggml.padding_token_id", GgufValue(uint32_t{99})).ok());  // out of range: ignored
  ASSERT_TRUE(w.add("tokenizer.chat_template", GgufValue("chatml")).ok());
  const MemoryGguf gguf = to_file(w);
  auto spec = tokenizer_spec_from_gguf(*gguf.file);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_FALSE(spec->add_bos);
  EXPECT_FALSE(spec->add_space_prefix);
  EXPECT_EQ(spec->eos, 1);
  EXPECT_EQ(spec->pad, kNoToken);
  EXPECT_EQ(spec->chat_template, "chatml");
}

TEST(TokenizerSpecFromGguf, IntegerScoresAreAccepted) {
  GgufWriter w;
  ASSERT_TRUE(w.add("tokenizer.ggml.model", GgufValue("llama")).ok());
  ASSERT_TRUE(
      w.add("tokenizer.ggml.tokens", GgufValue(GgufArray(std::vector<std::string>{"<unk>", "<s>", "</s>"}))).ok());
  ASSERT_TRUE(w.add("tokenizer.ggml.scores", GgufValue(GgufArray(std::vector<int32_t>{-3, 2, 7}))).ok());
  const MemoryGguf gguf = to_file(w);
  auto spec = tokenizer_spec_from_gguf(*gguf.file);
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_THAT(spec->scores, ::testing::ElementsAre(-3.0f, 2.0f, 7.0f));
  EXPECT_TRUE(spec->token_types.empty());
}

TEST(TokenizerSpecFromGguf, MissingOrUnsupportedKeysAreErrors) {
  {
    GgufWriter w;
    ASSERT_TRUE(w.add("general.architecture", GgufValue("llama")).ok());
    const MemoryGguf gguf = to_file(w);
    EXPECT_EQ(tokenizer_spec_from_gguf(*gguf.file).status().code(), StatusCode::kNotFound);
  }
  {
    GgufWriter w;
    ASSERT_TRUE(w.add("tokenizer.ggml.model", GgufValue("bert")).ok());
    const MemoryGguf gguf = to_file(w);
    const Status status = tokenizer_spec_from_gguf(*gguf.file).status();
    EXPECT_EQ(status.code(), StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("'bert'"));
  }
  {
    GgufWriter gpt2;
    ASSERT_TRUE(gpt2.add("tokenizer.ggml.model", GgufValue("gpt2")).ok());
    ASSERT_TRUE(gpt2.add("tokenizer.ggml.pre", GgufValue("smollm")).ok());
    ASSERT_TRUE(gpt2.add("tokenizer.ggml.tokens", GgufValue(GgufArray(std::vector<std::string>{"a", "b"}))).ok());
    const MemoryGguf gguf = to_file(gpt2);  // no merges
    const Status status = tokenizer_spec_from_gguf(*gguf.file).status();
    EXPECT_EQ(status.code(), StatusCode::kNotFound);
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr("tokenizer.ggml.merges"));
  }
  {
    GgufWriter w = spm_writer();
    ASSERT_TRUE(w.add("tokenizer.ggml.add_bos_token", GgufValue(uint32_t{1})).ok());  // not a bool
    const MemoryGguf gguf = to_file(w);
    EXPECT_EQ(tokenizer_spec_from_gguf(*gguf.file).status().code(), StatusCode::kInvalidArgument);
  }
}

// ---- SmolLM2-135M-Instruct ------------------------------------------------------------------------------------

std::string golden_path() {
  if (const char* env = std::getenv("HXRT_LLM_GOLDENS"); env != nullptr && *env != '\0') return env;
  return std::string(HXRT_SOURCE_DIR) + "/tests/llm/goldens/smollm2-135m-q4_1.json";
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return out;
}

// One tokenizer for the whole suite: building it reads 49152 tokens and 48900 merges.
class SmolLm2Tokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = hxrt::testing::find_default_model();
    if (path.empty()) return;
    auto file = GgufFile::open(path);
    ASSERT_TRUE(file.ok()) << file.status().to_string();
    auto spec = tokenizer_spec_from_gguf(*file);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    auto tokenizer = Tokenizer::create(std::move(spec).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    tokenizer_ = std::move(tokenizer).value().release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (tokenizer_ == nullptr) GTEST_SKIP() << hxrt::testing::kDefaultModelMissing;
  }
  static nlohmann::json load_goldens() {
    std::ifstream in(golden_path());
    if (!in) return nullptr;
    return nlohmann::json::parse(in);
  }

  static inline const Tokenizer* tokenizer_ = nullptr;
};

TEST_F(SmolLm2Tokenizer, MetadataMatchesTheFile) {
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.model(), TokenizerModel::kBpe);
  EXPECT_EQ(t.pre(), "smollm");
  EXPECT_EQ(t.vocab_size(), 49152);
  EXPECT_EQ(t.bos(), 1);
  EXPECT_EQ(t.eos(), 2);
  EXPECT_EQ(t.unk(), 0);
  EXPECT_EQ(t.pad(), 2);
  EXPECT_EQ(t.eot(), 2);
  EXPECT_FALSE(t.add_bos());
  EXPECT_TRUE(t.is_eog(0));  // <|endoftext|>
  EXPECT_TRUE(t.is_eog(2));  // <|im_end|>
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_EQ(*t.token_text(1), "<|im_start|>");
  EXPECT_EQ(*t.token_type(16), TokenType::kControl);
  EXPECT_EQ(*t.token_type(17), TokenType::kNormal);
  EXPECT_THAT(t.chat_template(), ::testing::HasSubstr("<|im_start|>"));
}

TEST_F(SmolLm2Tokenizer, EveryVocabularyPieceRoundTrips) {
  // Encoding each token's own text: the decoded text always comes back, and nearly always as that one token (BPE
  // cannot reach a few tokens from their own text). Also a speed check over 49k short texts.
  const Tokenizer& t = *tokenizer_;
  size_t single = 0;
  size_t normal = 0;
  const auto start = std::chrono::steady_clock::now();
  for (TokenId id = 0; id < t.vocab_size(); ++id) {
    if (*t.token_type(id) != TokenType::kNormal) continue;
    const std::string piece(*t.token_to_piece(id));
    if (detail::valid_utf8_prefix(piece) != piece.size()) continue;  // a piece of a character
    ++normal;
    const auto ids = t.encode(piece, {.add_special = false});
    ASSERT_TRUE(ids.ok());
    if (ids->size() == 1 && ids->front() == id) ++single;
    EXPECT_EQ(*t.decode(*ids), piece) << "token " << id;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(normal, 48000u);
  EXPECT_GT(single, normal * 99 / 100);
  EXPECT_LT(seconds, 30.0);
  RecordProperty("vocab_roundtrip_seconds", fmt::format("{:.3f}", seconds));
}

// SmolLM2's own template, read from the model file, renders every conversation of the chat-template goldens as
// Python's jinja2 renders it (scripts/make_chat_template_goldens.py, cases "@model:smollm2").
TEST_F(SmolLm2Tokenizer, OwnTemplateRendersAsJinja2) {
  const std::string dir = std::string(HXRT_SOURCE_DIR) + "/tests/llm/goldens/chat_templates/";
  std::ifstream goldens_file(dir + "goldens.json");
  std::ifstream conversations_file(dir + "conversations.json");
  ASSERT_TRUE(goldens_file && conversations_file);
  const auto goldens = nlohmann::ordered_json::parse(goldens_file);
  const auto conversations = nlohmann::ordered_json::parse(conversations_file);
  Result<jinja::Template> own = jinja::Template::parse(tokenizer_->chat_template());
  ASSERT_TRUE(own.ok()) << own.status().to_string();
  int checked = 0;
  for (const auto& c : goldens) {
    if (c["template"] != "@model:smollm2") continue;
    const std::string conversation = c["conversation"].get<std::string>();
    Result<jinja::Value> context = jinja::value_from_json(conversations.at(conversation).dump());
    ASSERT_TRUE(context.ok());
    context->set("add_generation_prompt", jinja::Value(c["add_generation_prompt"].get<bool>()));
    context->set("bos_token", jinja::Value(c["bos_token"].get<std::string>()));
    context->set("eos_token", jinja::Value(c["eos_token"].get<std::string>()));
    Result<std::string> rendered = own->render(*context);
    if (c.contains("error")) {
      EXPECT_FALSE(rendered.ok()) << conversation;
    } else {
      ASSERT_TRUE(rendered.ok()) << conversation << ": " << rendered.status().to_string();
      EXPECT_EQ(*rendered, c["output"].get<std::string>()) << conversation << " (did the model file change?)";
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

TEST_F(SmolLm2Tokenizer, ChatTemplateIsTheModelsChatMl) {
  const std::vector<ChatMessage> chat = {{"user", "What is 2+2?"}};
  const auto prompt = tokenizer_->apply_chat_template(chat, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<TokenId> ids = *tokenizer_->encode(*prompt, {.add_special = true, .parse_special = true});
  EXPECT_EQ(ids.front(), 1);  // no BOS: the file says add_bos_token = false
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 3);
  EXPECT_EQ(*tokenizer_->decode(ids, {.unparse_special = true}), *prompt);
}

TEST_F(SmolLm2Tokenizer, MatchesLlamaCppGoldens) {
  const nlohmann::json goldens = load_goldens();
  if (goldens.is_null()) GTEST_SKIP() << "goldens not found at " << golden_path() << " (scripts/make_llm_goldens.py)";
  ASSERT_TRUE(goldens.contains("tokenizer"));
  const auto& cases = goldens["tokenizer"];
  EXPECT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    const std::string name = c["name"];
    const std::string text = c["text"];
    SCOPED_TRACE(name);
    const auto ids = tokenizer_->encode(text, {.add_special = false, .parse_special = true});
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, c["ids"].get<std::vector<TokenId>>());
    const auto plain = tokenizer_->encode(text, {.add_special = false, .parse_special = false});
    ASSERT_TRUE(plain.ok());
    EXPECT_EQ(*plain, c["ids_parse_special_false"].get<std::vector<TokenId>>());
    // Pieces (bytes, possibly partial characters) and detokenized text, both ways of rendering specials.
    const std::vector<TokenId> golden_ids = c["ids"].get<std::vector<TokenId>>();
    const auto& pieces = c["pieces_hex"];
    ASSERT_EQ(pieces.size(), golden_ids.size());
    for (size_t i = 0; i < golden_ids.size(); ++i) {
      EXPECT_EQ(hex(*tokenizer_->token_to_piece(golden_ids[i], /*special=*/true)), pieces[i].get<std::string>());
    }
    EXPECT_EQ(*tokenizer_->decode(golden_ids, {.unparse_special = true}), c["detokenized"].get<std::string>());
    EXPECT_EQ(*tokenizer_->decode(golden_ids), c["detokenized_unparse_special_false"].get<std::string>());
  }
}

// Every byte-level BPE pre-tokenizer llama.cpp selects by tokenizer.ggml.pre, on SmolLM2's vocabulary and merges,
// against llama.cpp's ids for the corpus (tests/llm/goldens/pretokenizers.json, scripts/make_pretokenizer_goldens.py).
TEST_F(SmolLm2Tokenizer, EveryPreTokenizerMatchesLlamaCppOnTheCorpus) {
  std::ifstream in(std::filesystem::path(HXRT_SOURCE_DIR) / "tests" / "llm" / "goldens" / "pretokenizers.json");
  ASSERT_TRUE(in);
  const nlohmann::json golden = nlohmann::json::parse(in);
  auto file = GgufFile::open(hxrt::testing::find_default_model());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  int compared = 0;
  for (const auto& [pre, ids] : golden["ids"].items()) {
    SCOPED_TRACE(pre);
    auto spec = tokenizer_spec_from_gguf(*file);
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    spec->pre = pre;
    auto tokenizer = Tokenizer::create(std::move(spec).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
    const nlohmann::json& texts = golden["texts"];
    ASSERT_EQ(ids.size(), texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      auto got = (*tokenizer)->encode(texts[i]["text"].get<std::string>(),
                                      EncodeOptions{.add_special = false, .parse_special = true});
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(*got, ids[i].get<std::vector<int32_t>>()) << texts[i]["name"];
      ++compared;
    }
  }
  EXPECT_EQ(compared, 6 * 48);
}

TEST_F(SmolLm2Tokenizer, ChatPromptsMatchLlamaCppGoldens) {
  const nlohmann::json goldens = load_goldens();
  if (goldens.is_null()) GTEST_SKIP() << "goldens not found at " << golden_path();
  for (const auto& c : goldens["generation"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::string prompt = c["prompt"];
    if (c["kind"] == "chat") {
      const std::vector<ChatMessage> chat = {{"user", c["message"].get<std::string>()}};
      const auto rendered = tokenizer_->apply_chat_template(chat, true);
      ASSERT_TRUE(rendered.ok()) << rendered.status().to_string();
      EXPECT_EQ(*rendered, prompt);
    }
    EXPECT_EQ(*tokenizer_->encode(prompt, {.add_special = false, .parse_special = true}),
              c["prompt_ids"].get<std::vector<TokenId>>());
  }
}

TEST_F(SmolLm2Tokenizer, StreamingGeneratedTextMatchesGoldens) {
  const nlohmann::json goldens = load_goldens();
  if (goldens.is_null()) GTEST_SKIP() << "goldens not found at " << golden_path();
  for (const auto& c : goldens["generation"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    StreamingDecoder stream(*tokenizer_, /*special=*/true);
    std::string printed;
    for (const TokenId id : c["generated_ids"].get<std::vector<TokenId>>()) {
      const auto text = stream.push(id);
      ASSERT_TRUE(text.ok());
      printed += *text;
    }
    printed += stream.finish();
    // llama.cpp's bytes may end inside a character (the generation stops at a fixed count); the stream prints the
    // complete characters and one U+FFFD for the cut-off one.
    const std::string golden_hex = c["generated_text_hex"];
    std::string golden;
    for (size_t i = 0; i + 1 < golden_hex.size(); i += 2) {
      golden.push_back(static_cast<char>(std::stoi(golden_hex.substr(i, 2), nullptr, 16)));
    }
    const size_t valid = detail::valid_utf8_prefix(golden);
    if (valid == golden.size()) {
      EXPECT_EQ(printed, golden);
    } else {
      EXPECT_EQ(printed.substr(0, valid), golden.substr(0, valid));
    }
  }
}

}  // namespace
}  // namespace hxrt::llm
