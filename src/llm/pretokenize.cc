#include "llm/pretokenize.h"

#include <utility>

#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::detail {
namespace {

// Regexes as written in llama.cpp's src/llama-vocab.cpp (llm_tokenizer_bpe's constructor).
constexpr std::string_view kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr std::string_view kLlama3Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// GPT-4o's (o200k) split, as its tokenizer.json gives it: case-aware words with optional contractions, digits in
// threes, punctuation runs with trailing newlines or slashes.
constexpr std::string_view kGpt4oRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr std::string_view kQwen2Regex =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct NamedConfig {
  std::string_view name;
  PreTokenizerConfig config;
};

// llama.cpp's `tokenizer.ggml.pre` names, grouped by the LLAMA_VOCAB_PRE_TYPE_* they map to, with the
// clean_spaces / ignore_merges / add_bos flags llama_vocab::impl::load sets for each name.
const std::vector<NamedConfig>& named_configs() {
  static const std::vector<NamedConfig> kConfigs = [] {
    const PreTokenizerConfig kDefault{
        .canonical_name = "default",
        .regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"},
    };
    auto gpt2 = [](std::string_view canonical, bool clean_spaces) {
      return PreTokenizerConfig{.canonical_name = canonical, .regexes = {kGpt2Regex}, .clean_spaces = clean_spaces};
    };
    // LLAMA_VOCAB_PRE_TYPE_SMOLLM and the types sharing its regexes: every digit is its own word, then GPT-2.
    auto digits_gpt2 = [](std::string_view canonical, bool clean_spaces) {
      return PreTokenizerConfig{
          .canonical_name = canonical, .regexes = {"\\p{N}", kGpt2Regex}, .clean_spaces = clean_spaces};
    };
    const PreTokenizerConfig kLlama3{.canonical_name = "llama3",
                                     .regexes = {kLlama3Regex},
                                     .clean_spaces = true,
                                     .ignore_merges = true,
                                     .default_add_bos = true};
    auto qwen2 = [](std::string_view canonical, bool clean_spaces) {
      return PreTokenizerConfig{.canonical_name = canonical, .regexes = {kQwen2Regex}, .clean_spaces = clean_spaces};
    };
    const PreTokenizerConfig kGpt4o{.canonical_name = "gpt-4o", .regexes = {kGpt4oRegex}, .clean_spaces = false};
    std::vector<NamedConfig> configs = {
        {"default", kDefault},
        {"gpt-2", gpt2("gpt-2", true)},
        {"phi-2", gpt2("phi-2", true)},
        {"jina-es", gpt2("jina-es", true)},
        {"jina-de", gpt2("jina-de", true)},
        {"jina-v2-es", gpt2("jina-v2-es", true)},
        {"jina-v2-de", gpt2("jina-v2-de", true)},
        {"gigachat", gpt2("gigachat", true)},
        {"a.x-4.0", gpt2("a.x-4.0", true)},
        {"mellum", gpt2("mellum", true)},
        {"modern-bert", gpt2("modern-bert", true)},
        {"exaone4", gpt2("exaone4", true)},
        {"mpt", gpt2("mpt", true)},
        {"olmo", gpt2("olmo", true)},
        {"jais", gpt2("jais", true)},
        {"trillion", gpt2("trillion", false)},
        {"granite-docling", gpt2("granite-docling", false)},
        {"smollm", digits_gpt2("smollm", false)},
        {"starcoder", digits_gpt2("starcoder", true)},
        {"refact", digits_gpt2("refact", true)},
        {"command-r", digits_gpt2("command-r", false)},
        {"codeshell", digits_gpt2("codeshell", true)},
        {"exaone", digits_gpt2("exaone", true)},
        {"minerva-7b", digits_gpt2("minerva-7b", true)},
        {"mellum2", digits_gpt2("mellum2", true)},
        {"qwen2", qwen2("qwen2", false)},
        {"deepseek-r1-qwen", qwen2("deepseek-r1-qwen", false)},
        {"kormo", qwen2("kormo", false)},
        {"f2llmv2", qwen2("f2llmv2", false)},
        {"megrez", qwen2("megrez", true)},
        {"stablelm2", qwen2("stablelm2", true)},
        {"hunyuan", qwen2("hunyuan", false)},
        {"solar-open", qwen2("solar-open", false)},
    };
    for (std::string_view name : {"gpt-4o", "llama4", "kanana2", "talkie"}) configs.push_back({name, kGpt4o});
    for (std::string_view name :
         {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"}) {
      configs.push_back({name, kLlama3});
    }
    return configs;
  }();
  return kConfigs;
}

// llama.cpp's \s is the White_Space property; ICU's \s is narrower ([\t\n\f\r\p{Z}]).
std::string to_icu_syntax(std::string_view regex) {
  std::string out;
  out.reserve(regex.size() + 32);
  for (size_t i = 0; i < regex.size(); ++i) {
    if (regex[i] == '\\' && i + 1 < regex.size()) {
      const char next = regex[i + 1];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += regex[i];
        out += next;
      }
      ++i;
      continue;
    }
    out += regex[i];
  }
  return out;
}

}  // namespace

const PreTokenizerConfig* find_pre_tokenizer_config(std::string_view name) {
  if (name.empty()) name = "default";
  for (const NamedConfig& named : named_configs()) {
    if (named.name == name) return &named.config;
  }
  return nullptr;
}

PreTokenizer::PreTokenizer(std::vector<std::unique_ptr<icu::RegexPattern>> patterns) : patterns_(std::move(patterns)) {}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::span<const std::string_view> regexes) {
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
  for (std::string_view regex : regexes) {
    const std::string icu_regex = to_icu_syntax(regex);
    UErrorCode status = U_ZERO_ERROR;
    UParseError parse_error{};
    std::unique_ptr<icu::RegexPattern> pattern(
        icu::RegexPattern::compile(icu::UnicodeString::fromUTF8(icu_regex), 0, parse_error, status));
    if (U_FAILURE(status) || pattern == nullptr) {
      return invalid_argument("pre-tokenizer regex '{}' does not compile: {} at offset {}", regex, u_errorName(status),
                              parse_error.offset);
    }
    patterns.push_back(std::move(pattern));
  }
  return std::unique_ptr<PreTokenizer>(new PreTokenizer(std::move(patterns)));
}

Status PreTokenizer::split(std::string_view text, Words* words) const {
  const std::vector<char32_t> cps = decode_utf8_lenient(text);
  const uint32_t n = static_cast<uint32_t>(cps.size());

  // ICU works on UTF-16. Surrogate code points (which lenient decoding lets through) become U+FFFD so that two of
  // them cannot pair up into one character; both are "other" to every regex used here, so no split moves.
  icu::UnicodeString u16;
  std::vector<int32_t> cp_to_u16(n + 1);  // UTF-16 offset of each code point, and of the end
  for (uint32_t i = 0; i < n; ++i) {
    cp_to_u16[i] = u16.length();
    const char32_t cp = cps[i];
    u16.append(static_cast<UChar32>(cp >= 0xD800 && cp <= 0xDFFF ? kReplacementChar : cp));
  }
  cp_to_u16[n] = u16.length();
  std::vector<uint32_t> u16_to_cp(static_cast<size_t>(u16.length()) + 1, 0);
  for (uint32_t i = 0; i <= n; ++i) u16_to_cp[static_cast<size_t>(cp_to_u16[i])] = i;

  // Pieces as the code-point offsets of their ends; the whole text is the first piece.
  std::vector<uint32_t> ends;
  if (n > 0) ends.push_back(n);
  std::vector<uint32_t> next_ends;
  for (const auto& pattern : patterns_) {
    UErrorCode status = U_ZERO_ERROR;
    std::unique_ptr<icu::RegexMatcher> matcher(pattern->matcher(u16, status));
    if (U_FAILURE(status)) return internal_error("ICU regex matcher: {}", u_errorName(status));
    next_ends.clear();
    uint32_t begin = 0;
    for (const uint32_t end : ends) {
      const int32_t region_begin = cp_to_u16[begin];
      const int32_t region_end = cp_to_u16[end];
      matcher->region(region_begin, region_end, status);
      int32_t previous = region_begin;
      while (matcher->find(status)) {
        const int32_t match_begin = matcher->start(status);
        const int32_t match_end = matcher->end(status);
        if (match_end == match_begin) continue;
        if (match_begin > previous) next_ends.push_back(u16_to_cp[static_cast<size_t>(match_begin)]);
        next_ends.push_back(u16_to_cp[static_cast<size_t>(match_end)]);
        previous = match_end;
      }
      if (U_FAILURE(status)) return internal_error("ICU regex search: {}", u_errorName(status));
      if (previous < region_end) next_ends.push_back(end);
      begin = end;
    }
    std::swap(ends, next_ends);
  }

  uint32_t begin = 0;
  for (const uint32_t end : ends) {
    for (uint32_t i = begin; i < end; ++i) append_utf8(cps[i], &words->bytes);
    words->ends.push_back(static_cast<uint32_t>(words->bytes.size()));
    begin = end;
  }
  return ok_status();
}

}  // namespace hxrt::llm::detail
