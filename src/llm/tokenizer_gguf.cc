// TokenizerSpec from GGUF metadata, with the defaults llama.cpp's llama_vocab::impl::load applies.
#include <string>
#include <string_view>

#include "hxrt/base/logging.h"
#include "hxrt/formats/gguf.h"
#include "hxrt/llm/tokenizer.h"
#include "llm/pretokenize.h"

namespace hxrt::llm {
namespace {

constexpr std::string_view kModelKey = "tokenizer.ggml.model";
constexpr std::string_view kPreKey = "tokenizer.ggml.pre";
constexpr std::string_view kTokensKey = "tokenizer.ggml.tokens";
constexpr std::string_view kScoresKey = "tokenizer.ggml.scores";
constexpr std::string_view kTokenTypeKey = "tokenizer.ggml.token_type";
constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";
constexpr std::string_view kAddBosKey = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kAddEosKey = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kAddSpacePrefixKey = "tokenizer.ggml.add_space_prefix";
constexpr std::string_view kChatTemplateKey = "tokenizer.chat_template";

// A special-token id key: the file's value when it names a token, else `fallback` (llama.cpp warns and keeps its
// default for an id past the vocabulary, and disables a default that is itself past it).
Result<TokenId> special_id(const formats::GgufFile& file, std::string_view key, TokenId fallback, size_t n_tokens) {
  if (fallback != kNoToken && static_cast<size_t>(fallback) >= n_tokens) fallback = kNoToken;
  const formats::GgufValue* value = file.find(key);
  if (value == nullptr) return fallback;
  const std::optional<int64_t> id = value->as_i64();
  if (!id.has_value()) return invalid_argument("GGUF metadata '{}' must be an integer token id", key);
  if (*id < 0 || static_cast<uint64_t>(*id) >= n_tokens) {
    HXRT_LOG(kWarn, "GGUF metadata '{}' = {} is outside the vocabulary of {} tokens; using {}", key, *id, n_tokens,
             fallback);
    return fallback;
  }
  return static_cast<TokenId>(*id);
}

Result<bool> optional_bool(const formats::GgufFile& file, std::string_view key, bool fallback) {
  if (file.find(key) == nullptr) return fallback;
  return file.get_bool(key);
}

}  // namespace

Result<TokenizerSpec> tokenizer_spec_from_gguf(const formats::GgufFile& file) {
  TokenizerSpec spec;
  HXRT_ASSIGN_OR_RETURN(const std::string_view model, file.get_string(kModelKey));
  TokenId default_bos = kNoToken;
  TokenId default_eos = kNoToken;
  TokenId default_unk = kNoToken;
  bool default_add_bos = false;
  bool default_add_space_prefix = false;
  if (model == "gpt2") {
    spec.model = TokenizerModel::kBpe;
    if (file.find(kPreKey) != nullptr) {
      HXRT_ASSIGN_OR_RETURN(const std::string_view pre, file.get_string(kPreKey));
      spec.pre = std::string(pre);
    }
    const detail::PreTokenizerConfig* config = detail::find_pre_tokenizer_config(spec.pre);
    if (config == nullptr) return unimplemented("tokenizer pre-tokenizer '{}' is not supported", spec.pre);
    default_add_bos = config->default_add_bos;
    default_bos = 11;  // llama.cpp's (odd) defaults for BPE vocabularies without the keys
    default_eos = 11;
  } else if (model == "llama") {
    spec.model = TokenizerModel::kSpm;
    default_bos = 1;
    default_eos = 2;
    default_unk = 0;
    default_add_bos = true;
    default_add_space_prefix = true;
  } else {
    return unimplemented("tokenizer model '{}' is not supported (only 'gpt2' and 'llama' are)", model);
  }

  HXRT_ASSIGN_OR_RETURN(const std::vector<std::string_view> tokens, file.get_string_array(kTokensKey));
  const size_t n = tokens.size();
  spec.tokens.assign(tokens.begin(), tokens.end());

  if (const formats::GgufValue* scores = file.find(kScoresKey); scores != nullptr) {
    const auto* array = scores->get_if<formats::GgufArray>();
    if (array != nullptr && array->get_if<int32_t>() != nullptr) {
      for (const int32_t score : *array->get_if<int32_t>()) spec.scores.push_back(static_cast<float>(score));
    } else {
      HXRT_ASSIGN_OR_RETURN(const std::span<const float> values, file.get_f32_array(kScoresKey));
      spec.scores.assign(values.begin(), values.end());
    }
    if (spec.scores.size() < n) {
      return invalid_argument("GGUF metadata '{}' has {} entries for {} tokens", kScoresKey, spec.scores.size(), n);
    }
    spec.scores.resize(n);
  }
  if (file.find(kTokenTypeKey) != nullptr) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> types, file.get_int_array(kTokenTypeKey));
    if (types.size() < n) {
      return invalid_argument("GGUF metadata '{}' has {} entries for {} tokens", kTokenTypeKey, types.size(), n);
    }
    spec.token_types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t type = types[i];
      spec.token_types.push_back(type >= 0 && type <= static_cast<int64_t>(TokenType::kByte)
                                     ? static_cast<TokenType>(type)
                                     : TokenType::kUndefined);
    }
  }
  if (spec.model == TokenizerModel::kBpe) {
    HXRT_ASSIGN_OR_RETURN(const std::vector<std::string_view> merges, file.get_string_array(kMergesKey));
    spec.merges.assign(merges.begin(), merges.end());
  }

  HXRT_ASSIGN_OR_RETURN(spec.bos, special_id(file, "tokenizer.ggml.bos_token_id", default_bos, n));
  HXRT_ASSIGN_OR_RETURN(spec.eos, special_id(file, "tokenizer.ggml.eos_token_id", default_eos, n));
  HXRT_ASSIGN_OR_RETURN(spec.unk, special_id(file, "tokenizer.ggml.unknown_token_id", default_unk, n));
  HXRT_ASSIGN_OR_RETURN(spec.pad, special_id(file, "tokenizer.ggml.padding_token_id", kNoToken, n));
  HXRT_ASSIGN_OR_RETURN(spec.eot, special_id(file, "tokenizer.ggml.eot_token_id", kNoToken, n));
  HXRT_ASSIGN_OR_RETURN(spec.add_bos, optional_bool(file, kAddBosKey, default_add_bos));
  HXRT_ASSIGN_OR_RETURN(spec.add_eos, optional_bool(file, kAddEosKey, false));
  HXRT_ASSIGN_OR_RETURN(spec.add_space_prefix, optional_bool(file, kAddSpacePrefixKey, default_add_space_prefix));
  if (file.find(kChatTemplateKey) != nullptr) {
    HXRT_ASSIGN_OR_RETURN(const std::string_view chat_template, file.get_string(kChatTemplateKey));
    spec.chat_template = std::string(chat_template);
  } else {  // the family's format, as llama.cpp falls back to one (docs/llm.md, "Chat templates")
    const Result<std::string_view> architecture = file.get_string("general.architecture");
    spec.chat_template = std::string(default_chat_template(architecture.ok() ? *architecture : "", spec.tokens));
  }
  return spec;
}

}  // namespace hxrt::llm
