// Tokenizer: text ↔ token ids for the LLM engine, matching llama.cpp's llama_tokenize / llama_token_to_piece /
// llama_detokenize on the same GGUF vocabulary.
//
// Two vocabulary styles:
//   - kBpe ("gpt2" in GGUF): byte-level BPE. Text is split into words by the pre-tokenizer's regexes (chosen by
//     the GGUF `tokenizer.ggml.pre` name, e.g. "smollm", "gpt-2", "llama3"), each word's UTF-8 bytes are mapped to
//     the GPT-2 byte alphabet, then merged pairwise by merge rank.
//   - kSpm ("llama" in GGUF): SentencePiece BPE. Spaces become U+2581 "▁", an optional space is prefixed, symbols
//     (UTF-8 characters) merge by the score of the merged piece, and characters with no piece fall back to the
//     byte tokens "<0xNN>".
// docs/tokenizer.md lists the supported pre-tokenizers, their regexes and where each behaviour comes from.
//
// Special tokens: tokens of type kControl, kUserDefined and kUnknown are matched as whole strings in the input
// before any other processing, longest first. kUserDefined tokens always are; kControl and kUnknown tokens only
// when EncodeOptions::parse_special is set (as llama_tokenize's `parse_special`). Otherwise their text is
// tokenized as ordinary text.
//
// Invalid UTF-8 in the input never fails: like llama.cpp, each byte that does not start a well-formed sequence is
// replaced by U+FFFD before tokenization. Decoding checks every id and returns OutOfRange for ids outside the
// vocabulary.
//
// Thread-safety: a Tokenizer is immutable after create(); all const methods may be called concurrently from any
// number of threads. A StreamingDecoder is thread-compatible (one per generation stream).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"

namespace hxrt::formats {
class GgufFile;
}  // namespace hxrt::formats

namespace hxrt::llm {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

enum class TokenizerModel : uint8_t {
  kBpe,  // byte-level BPE (GGUF tokenizer.ggml.model = "gpt2")
  kSpm,  // SentencePiece BPE with scores and byte fallback (GGUF "llama")
};

// Token types as stored in GGUF `tokenizer.ggml.token_type` (the numbering is llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything needed to build a Tokenizer; plain data, usually read from GGUF metadata by
// tokenizer_spec_from_gguf().
struct TokenizerSpec {
  TokenizerModel model = TokenizerModel::kBpe;
  // Pre-tokenizer name (GGUF tokenizer.ggml.pre) for kBpe: "smollm", "gpt-2", "default", ... ; empty means
  // "default", as in llama.cpp. Ignored for kSpm.
  std::string pre;
  std::vector<std::string> tokens;     // token text by id; ids are indices
  std::vector<float> scores;           // empty, or one per token (kSpm merge priority)
  std::vector<TokenType> token_types;  // empty (all kNormal), or one per token
  std::vector<std::string> merges;     // kBpe: "left right" pairs, highest priority first
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId unk = kNoToken;
  TokenId pad = kNoToken;
  TokenId eot = kNoToken;  // kNoToken: detected from token text ("<|im_end|>", "<|eot_id|>", ...) as llama.cpp does
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // kSpm: prefix " " to text at the start and after each special token
  std::string chat_template;      // Jinja source (GGUF tokenizer.chat_template); may be empty
};

struct EncodeOptions {
  bool add_special = true;     // prepend BOS / append EOS when the model asks for them (add_bos / add_eos)
  bool parse_special = false;  // match control and unknown tokens' text in the input
};

struct DecodeOptions {
  bool remove_special = false;   // drop a leading BOS and a trailing EOS that the model's add_bos/add_eos would add
  bool unparse_special = false;  // render control and unknown tokens as their text (otherwise they render empty)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;
  // OpenAI's fields for tool use: an assistant turn's calls (the JSON array of {"id", "type": "function",
  // "function": {"name", "arguments"}}; "" for none), and for a "tool" turn the call it answers and the tool's name.
  std::string tool_calls_json;
  std::string tool_call_id;
  std::string name;
};

// What a chat template sees besides the messages.
struct ChatOptions {
  std::string tools_json;  // the request's tools (a JSON array of OpenAI tool definitions); "" for none
  // The time `strftime_now` formats; unset: now.
  std::optional<std::chrono::system_clock::time_point> now;
};

class Tokenizer {
 public:
  // Validates `spec` (InvalidArgument naming the problem: duplicate token text, a special id out of range, array
  // lengths that disagree, an unknown pre-tokenizer) and builds the lookup tables.
  static Result<std::unique_ptr<Tokenizer>> create(TokenizerSpec spec);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  Tokenizer(Tokenizer&&) = delete;
  Tokenizer& operator=(Tokenizer&&) = delete;
  ~Tokenizer();

  // Text → ids (llama_tokenize(text, add_special, parse_special)). Fails only on an internal ICU error.
  Result<std::vector<TokenId>> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // A rendered chat → ids: special tokens parsed, and BOS/EOS added as encode() adds them, except a BOS the
  // template already wrote (templates that print bos_token would otherwise start with two).
  Result<std::vector<TokenId>> encode_chat(std::string_view rendered) const;

  // The bytes one token stands for (llama_token_to_piece without lstrip). Control and unknown tokens render as
  // their text when `special`, else empty; kUnused/kUndefined tokens render empty. A BPE piece may end inside a
  // UTF-8 sequence (use StreamingDecoder to print pieces as they come). OutOfRange for a bad id.
  Result<std::string_view> token_to_piece(TokenId id, bool special = false) const;

  // Ids → text (llama_detokenize): concatenated pieces, with the model's space clean-up rules applied (kSpm drops
  // the space it prefixed; some BPE pre-tokenizers clean " ," and " 's"). OutOfRange naming the first bad id.
  Result<std::string> decode(std::span<const TokenId> ids, const DecodeOptions& options = {}) const;

  // Renders `messages` with this model's chat template (parsed once, when the tokenizer is created), with the
  // model's BOS and EOS texts as `bos_token` / `eos_token`. InvalidArgument when the template does not parse
  // (naming line and column) or refuses the conversation (the template's raise_exception message).
  Result<std::string> apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                          const ChatOptions& options = {}) const;

  TokenizerModel model() const;
  const std::string& pre() const;  // canonical pre-tokenizer name actually used ("default" for empty)
  int32_t vocab_size() const;
  TokenId bos() const;
  TokenId eos() const;
  TokenId eot() const;
  TokenId unk() const;
  TokenId pad() const;
  bool add_bos() const;
  bool add_eos() const;
  // End of generation: EOS, EOT and tokens llama.cpp treats as such by their text ("<|im_end|>", "<|endoftext|>",
  // "<|eot_id|>", ...). False for kNoToken and ids out of range.
  bool is_eog(TokenId id) const;
  // Raw vocabulary entry (byte-level alphabet for kBpe, "▁" for kSpm); OutOfRange for a bad id.
  Result<std::string_view> token_text(TokenId id) const;
  Result<TokenType> token_type(TokenId id) const;
  // The id whose text is exactly `text`, or kNoToken.
  TokenId find_token(std::string_view text) const;
  // The chat template's Jinja source: the model file's own, or its family's default (see default_chat_template).
  const std::string& chat_template() const;
  // OK, or why chat_template() did not parse (a model with such a template still tokenizes; chats fail with this).
  Status chat_template_status() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;
};

// Reads a TokenizerSpec from GGUF metadata (tokenizer.ggml.*, tokenizer.chat_template), with llama.cpp's defaults
// for missing keys (kSpm: bos 1, eos 2, unk 0, add_bos and add_space_prefix true; a special id outside the
// vocabulary falls back to the default with a warning). Unimplemented for a tokenizer.ggml.model or .pre hxrt does
// not support; NotFound for a missing required key (model, tokens, merges for kBpe); InvalidArgument for a key of
// the wrong type or per-token arrays shorter than the vocabulary.
Result<TokenizerSpec> tokenizer_spec_from_gguf(const formats::GgufFile& file);

// The chat template hxrt uses for a model file that carries none, chosen as llama.cpp chooses: by architecture
// (qwen2/qwen3 → "qwen", gemma2/gemma3 → "gemma", phi3 → "phi3") and for llama by the vocabulary (Llama 3's
// "<|start_header_id|>" → "llama3", "<|im_start|>" → "chatml", otherwise "llama2"'s [INST] format); "chatml" for
// anything else. Returns a built-in template's name.
std::string_view default_chat_template(std::string_view architecture, std::span<const std::string> tokens);

// The Jinja source of a built-in template ("chatml", "qwen", "llama3", "llama2", "mistral", "gemma", "phi3";
// src/llm/chat_templates/), or nullopt.
std::optional<std::string_view> builtin_chat_template(std::string_view name);

// Renders a chat with a chat template: Jinja source, or the name of a built-in template. As
// Tokenizer::apply_chat_template, with the given BOS/EOS texts; the template is parsed on every call.
Result<std::string> apply_chat_template(std::string_view chat_template, std::span<const ChatMessage> messages,
                                        bool add_generation_prompt, std::string_view bos_token = {},
                                        std::string_view eos_token = {}, const ChatOptions& options = {});

// Turns a stream of token ids into printable UTF-8 text: pieces are appended to a buffer and only complete UTF-8
// sequences are returned, so a character split across tokens is printed once whole. Bytes that can never become
// valid UTF-8 are returned as U+FFFD. The concatenation of everything push() and finish() return equals decode()
// of the same ids (without kSpm's first-space removal or clean-up rules) whenever that is valid UTF-8.
class StreamingDecoder {
 public:
  // `tokenizer` must outlive the decoder. `special`: render control tokens as text (token_to_piece's flag).
  explicit StreamingDecoder(const Tokenizer& tokenizer, bool special = false);

  StreamingDecoder(const StreamingDecoder&) = delete;
  StreamingDecoder& operator=(const StreamingDecoder&) = delete;

  // Appends the piece of `id`; returns the text that became complete (possibly empty). OutOfRange for a bad id,
  // leaving the buffer unchanged.
  Result<std::string> push(TokenId id);
  // Returns what is still buffered (an incomplete sequence becomes U+FFFD) and empties the buffer.
  std::string finish();
  // Bytes held back waiting for the rest of a UTF-8 sequence (0 to 3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool special_;
  std::string pending_;
};

}  // namespace hxrt::llm
