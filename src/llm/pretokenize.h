// Pre-tokenization for byte-level BPE: splitting text into words with the regexes llama.cpp uses for each
// `tokenizer.ggml.pre` name (src/llama-vocab.cpp, llm_tokenizer_bpe), evaluated with ICU.
//
// llama.cpp applies the regexes of a pre-tokenizer one after another: the first splits the whole text; each later
// one splits every piece the previous one produced, seeing only that piece (a lookahead at a piece's end sees the
// end of input). Both the matches and the text between matches become pieces. This is reproduced here with ICU
// matchers restricted to each piece's region (ICU's default opaque region bounds).
//
// `\s` and `\S` in the table are llama.cpp's: the Unicode White_Space property (which includes U+000B and U+0085,
// unlike ICU's own `\s`), so they are rewritten to \p{White_Space} / \P{White_Space} before compiling.
//
// Thread-safety: a PreTokenizer is immutable after create(); split() may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/regex.h>

#include "hxrt/base/status.h"

namespace hxrt::llm::detail {

// One llama.cpp pre-tokenizer type (LLAMA_VOCAB_PRE_TYPE_*) and the vocabulary flags it sets.
struct PreTokenizerConfig {
  std::string_view canonical_name;  // the name reported by Tokenizer::pre()
  std::vector<std::string_view> regexes;
  bool clean_spaces = true;    // detokenize removes " ," " ." " 's" ... (llama.cpp's clean_spaces)
  bool ignore_merges = false;  // a word that is itself a token is emitted whole, without merging
  bool default_add_bos = false;
};

// The configuration for a GGUF `tokenizer.ggml.pre` value ("" means "default"), or nullptr when unknown.
const PreTokenizerConfig* find_pre_tokenizer_config(std::string_view name);

// Words produced by a split: their bytes back to back and the end offset of each.
struct Words {
  std::string bytes;
  std::vector<uint32_t> ends;

  size_t size() const { return ends.size(); }
  std::string_view operator[](size_t i) const {
    const uint32_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(bytes).substr(begin, ends[i] - begin);
  }
  void clear() {
    bytes.clear();
    ends.clear();
  }
};

class PreTokenizer {
 public:
  // Compiles `regexes` (llama.cpp syntax); InvalidArgument naming the regex and ICU's error.
  static Result<std::unique_ptr<PreTokenizer>> create(std::span<const std::string_view> regexes);

  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text` into words, appended to `words`. Invalid UTF-8 is replaced first (decode_utf8_lenient) and each
  // word holds the UTF-8 of its code points. Internal on an ICU failure.
  Status split(std::string_view text, Words* words) const;

 private:
  explicit PreTokenizer(std::vector<std::unique_ptr<icu::RegexPattern>> patterns);
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns_;
};

}  // namespace hxrt::llm::detail
