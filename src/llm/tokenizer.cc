// Tokenizer: spec validation, special-token partitioning, and the encode/decode paths shared by both vocabulary
// styles. The word-level algorithms live in bpe.cc, spm.cc and pretokenize.cc.
#include "hxrt/llm/tokenizer.h"
#include "llm/chat_template.h"

#include <algorithm>
#include <array>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "hxrt/base/logging.h"
#include "llm/bpe.h"
#include "llm/pretokenize.h"
#include "llm/spm.h"
#include "llm/tokenizer_utf8.h"
#include "llm/tokenizer_vocab.h"

namespace hxrt::llm {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Token texts llama.cpp takes for the end-of-turn token when the file names none (llama_vocab::impl::load).
constexpr std::array<std::string_view, 11> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",         "<|endoftext|>",      "<|end_of_text|>",
    "<EOT>",      "_<EOT>",     "[EOT]",   "<｜end▁of▁sentence｜>", "<end_of_utterance>",
};

// Token texts llama.cpp treats as end of generation (besides EOS and EOT), forcing them to control type.
constexpr std::array<std::string_view, 17> kEogTexts = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
};

bool is_special_type(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUserDefined;
}

TokenType sanitize_type(TokenType type) {
  const auto value = static_cast<int32_t>(type);
  return value >= 0 && value <= static_cast<int32_t>(TokenType::kByte) ? type : TokenType::kUndefined;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a byte token "<0xNN>" (llama.cpp: strtol of the two characters after "<0x"; 0 when not hex).
char byte_token_value(std::string_view text) {
  int value = 0;
  for (size_t i = 3; i < 5 && i < text.size(); ++i) {
    const int digit = hex_value(text[i]);
    if (digit < 0) break;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

// llama.cpp's llama_decode_text: byte-level alphabet back to bytes; characters outside the alphabet become an
// "[UNK_BYTE_0x..]" marker exactly as llama.cpp writes it.
std::string decode_byte_level(std::string_view text) {
  std::string out;
  for (const char32_t cp : detail::decode_utf8_lenient(text)) {
    const int byte = detail::unicode_to_byte(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    std::string utf8;
    detail::append_utf8(cp, &utf8);
    out += "[UNK_BYTE_0x";
    for (const char c : utf8) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
    out += text;
    out += ']';
  }
  return out;
}

void replace_all(std::string* text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text->size());
  size_t pos = 0;
  for (size_t hit; (hit = text->find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(*text, pos, hit - pos);
    out += to;
  }
  out.append(*text, pos);
  *text = std::move(out);
}

// llama_detokenize's clean_spaces passes, in place: " ?" " !" " ." " ," lose the space; " ' " loses both; " 's",
// " 'm", " 're", " 've" lose the space.
void clean_up_spaces(std::string* s) {
  std::string& text = *s;
  size_t total = text.size();
  auto pass = [&](auto&& body) {
    const size_t n = total;
    total = n ? 1 : 0;
    for (size_t i = 1; i < n; ++i) body(i, n);
    text.resize(total);
  };
  pass([&](size_t i, size_t) {
    const char x = text[i];
    if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    text[total++] = x;
  });
  pass([&](size_t& i, size_t n) {
    const char x = text[i];
    if (x == '\'' && i + 1 < n && text[i - 1] == ' ' && text[i + 1] == ' ') {
      --total;
      text[++i] = '\0';
    }
    text[total++] = x;
  });
  pass([&](size_t i, size_t n) {
    const char x = text[i];
    if (text[i - 1] == ' ' && x == '\'' && i + 1 < n) {
      const char x1 = text[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < n) {
        const char x2 = text[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    text[total++] = x;
  });
}

// A piece of the input: either raw text [offset, offset + length) or a special token matched whole.
struct Fragment {
  TokenId token;  // kNoToken for raw text
  size_t offset;
  size_t length;
};

}  // namespace

struct Tokenizer::Impl {
  TokenizerModel model = TokenizerModel::kBpe;
  std::string pre_name;
  std::unique_ptr<detail::PreTokenizer> pre_tokenizer;  // kBpe only
  detail::Vocab vocab;
  detail::BpeMerger bpe;
  detail::SpmEncoder spm;
  std::vector<TokenId> special_tokens;  // control / user-defined / unknown, longest text first
  std::vector<std::string> pieces;      // token_to_piece(id, special = true)
  std::unordered_set<TokenId> eog;
  TokenId bos = kNoToken;
  TokenId eos = kNoToken;
  TokenId eot = kNoToken;
  TokenId unk = kNoToken;
  TokenId pad = kNoToken;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;
  bool clean_spaces = false;
  bool ignore_merges = false;
  std::string chat_template;
  std::optional<jinja::Template> parsed_template;  // parsed once at create(); empty: template_error says why
  Status template_error;

  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  std::string_view piece(TokenId id, bool special) const;
};

std::vector<Fragment> Tokenizer::Impl::partition(std::string_view text, bool parse_special) const {
  // llama.cpp's tokenizer_st_partition: each special token in turn (longest first) splits every raw fragment at
  // all its non-overlapping occurrences, left to right.
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({kNoToken, 0, text.size()});
  std::vector<Fragment> next;
  for (const TokenId id : special_tokens) {
    const TokenType type = vocab.types[static_cast<size_t>(id)];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string& special = vocab.texts[static_cast<size_t>(id)];
    next.clear();
    bool split = false;
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      const std::string_view raw = text.substr(fragment.offset, fragment.length);
      size_t pos = 0;
      for (size_t hit; (hit = raw.find(special, pos)) != std::string_view::npos; pos = hit + special.size()) {
        if (hit > pos) next.push_back({kNoToken, fragment.offset + pos, hit - pos});
        next.push_back({id, 0, 0});
        split = true;
      }
      if (pos < raw.size()) next.push_back({kNoToken, fragment.offset + pos, raw.size() - pos});
    }
    if (split) std::swap(fragments, next);
  }
  return fragments;
}

std::string_view Tokenizer::Impl::piece(TokenId id, bool special) const {
  const TokenType type = vocab.types[static_cast<size_t>(id)];
  if (!special && (type == TokenType::kControl || type == TokenType::kUnknown)) return {};
  return pieces[static_cast<size_t>(id)];
}

Tokenizer::Tokenizer(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(TokenizerSpec spec) {
  auto impl = std::make_unique<Impl>();
  const size_t n = spec.tokens.size();
  if (n == 0) return invalid_argument("tokenizer vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return invalid_argument("tokenizer vocabulary has {} tokens", n);
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return invalid_argument("tokenizer has {} scores for {} tokens", spec.scores.size(), n);
  }
  if (!spec.token_types.empty() && spec.token_types.size() != n) {
    return invalid_argument("tokenizer has {} token types for {} tokens", spec.token_types.size(), n);
  }
  const std::pair<const char*, TokenId> specials[] = {
      {"bos", spec.bos}, {"eos", spec.eos}, {"unk", spec.unk}, {"pad", spec.pad}, {"eot", spec.eot}};
  for (const auto& [name, id] : specials) {
    if (id != kNoToken && (id < 0 || static_cast<size_t>(id) >= n)) {
      return invalid_argument("{} token id {} is outside the vocabulary of {} tokens", name, id, n);
    }
  }
  if (spec.add_bos && spec.bos == kNoToken) return invalid_argument("add_bos is set but there is no bos token");
  if (spec.add_eos && spec.eos == kNoToken) return invalid_argument("add_eos is set but there is no eos token");

  detail::Vocab& vocab = impl->vocab;
  vocab.texts = std::move(spec.tokens);
  vocab.types.resize(n, TokenType::kNormal);
  vocab.scores.resize(n, 0.0f);
  vocab.ids.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    if (!spec.token_types.empty()) vocab.types[id] = sanitize_type(spec.token_types[id]);
    if (!spec.scores.empty()) vocab.scores[id] = spec.scores[id];
    std::string& text = vocab.texts[id];
    if (text.empty()) text = fmt::format("[EMPTY_{}]", id);  // as llama.cpp, so no special matches nothing
    const auto [it, inserted] = vocab.ids.emplace(text, static_cast<TokenId>(id));
    if (!inserted) return invalid_argument("duplicate token '{}' has ids {} and {}", text, it->second, id);
  }

  impl->model = spec.model;
  impl->bos = spec.bos;
  impl->eos = spec.eos;
  impl->unk = spec.unk;
  impl->pad = spec.pad;
  impl->add_bos = spec.add_bos;
  impl->add_eos = spec.add_eos;
  impl->add_space_prefix = spec.add_space_prefix;
  impl->chat_template = std::string(builtin_chat_template(spec.chat_template).value_or(spec.chat_template));
  if (Result<jinja::Template> parsed = detail::parse_chat_template(impl->chat_template); parsed.ok()) {
    impl->parsed_template = std::move(*parsed);
  } else {  // a model whose template hxrt cannot parse still tokenizes; chats fail with this error
    impl->template_error = parsed.status();
  }

  if (spec.model == TokenizerModel::kBpe) {
    const detail::PreTokenizerConfig* pre_config = detail::find_pre_tokenizer_config(spec.pre);
    if (pre_config == nullptr) {
      return invalid_argument("unknown pre-tokenizer '{}' (docs/tokenizer.md lists the supported ones)", spec.pre);
    }
    impl->pre_name = std::string(pre_config->canonical_name);
    HXRT_ASSIGN_OR_RETURN(impl->pre_tokenizer, detail::PreTokenizer::create(pre_config->regexes));
    impl->clean_spaces = pre_config->clean_spaces;
    impl->ignore_merges = pre_config->ignore_merges;
    detail::BpeMerger::Stats stats;
    impl->bpe = detail::BpeMerger::build(vocab, spec.merges, &stats);
    if (stats.merges_dropped > 0) {
      HXRT_LOG(kWarn, "tokenizer: {} of {} merges are malformed, repeated or name text that is not a token; ignored",
               stats.merges_dropped, spec.merges.size());
    }
  } else {
    impl->pre_name = "spm";
    impl->spm = detail::SpmEncoder::build(vocab);
  }

  // End of turn and end of generation, found by text where the file does not say (llama.cpp does the same and
  // forces such tokens to control type).
  impl->eot = spec.eot;
  if (impl->eot == kNoToken) {
    for (const std::string_view text : kEotTexts) {
      if (const TokenId id = vocab.find(text); id != kNoToken) {
        impl->eot = id;
        break;
      }
    }
    if (impl->eot != kNoToken) vocab.types[static_cast<size_t>(impl->eot)] = TokenType::kControl;
  }
  for (const std::string_view text : kEogTexts) {
    if (const TokenId id = vocab.find(text); id != kNoToken) {
      impl->eog.insert(id);
      vocab.types[static_cast<size_t>(id)] = TokenType::kControl;
    }
  }
  if (impl->eos != kNoToken) impl->eog.insert(impl->eos);
  if (impl->eot != kNoToken) impl->eog.insert(impl->eot);

  for (size_t id = 0; id < n; ++id) {
    if (is_special_type(vocab.types[id])) impl->special_tokens.push_back(static_cast<TokenId>(id));
  }
  std::stable_sort(impl->special_tokens.begin(), impl->special_tokens.end(), [&](TokenId a, TokenId b) {
    return vocab.texts[static_cast<size_t>(a)].size() > vocab.texts[static_cast<size_t>(b)].size();
  });

  // Pieces as llama.cpp's token_to_piece(special = true) renders them.
  impl->pieces.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = vocab.texts[id];
    std::string& piece = impl->pieces[id];
    switch (vocab.types[id]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined: piece = text; break;
      case TokenType::kNormal:
        if (spec.model == TokenizerModel::kBpe) {
          piece = decode_byte_level(text);
        } else {
          piece = text;
          replace_all(&piece, kSpmSpace, " ");
        }
        break;
      case TokenType::kByte: piece.assign(1, byte_token_value(text)); break;
      case TokenType::kUnused:
      case TokenType::kUndefined: break;
    }
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::vector<TokenId>> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  const Impl& impl = *impl_;
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  const std::vector<Fragment> fragments = impl.partition(text, options.parse_special);
  if (options.add_special && impl.add_bos) out.push_back(impl.bos);

  if (impl.model == TokenizerModel::kBpe) {
    detail::Words words;
    detail::BpeScratch scratch;
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        out.push_back(fragment.token);
        continue;
      }
      words.clear();
      HXRT_RETURN_IF_ERROR(impl.pre_tokenizer->split(text.substr(fragment.offset, fragment.length), &words));
      for (size_t w = 0; w < words.size(); ++w) {
        impl.bpe.encode_word(words[w], impl.ignore_merges, impl.vocab, &scratch, &out);
      }
    }
  } else {
    // A space is prefixed to the text at the start and after every special token (llama.cpp's is_prev_special).
    detail::SpmScratch scratch;
    bool after_special = true;
    std::string escaped;
    for (const Fragment& fragment : fragments) {
      if (fragment.token != kNoToken) {
        out.push_back(fragment.token);
        after_special = true;
        continue;
      }
      escaped.clear();
      if (impl.add_space_prefix && after_special) escaped += kSpmSpace;
      for (const char c : text.substr(fragment.offset, fragment.length)) {
        if (c == ' ') {
          escaped += kSpmSpace;
        } else {
          escaped += c;
        }
      }
      impl.spm.encode(escaped, impl.vocab, impl.unk, &scratch, &out);
      after_special = false;
    }
  }

  if (options.add_special && impl.add_eos) out.push_back(impl.eos);
  return out;
}

Result<std::string_view> Tokenizer::token_to_piece(TokenId id, bool special) const {
  if (!impl_->vocab.contains(id)) {
    return out_of_range("token id {} is outside the vocabulary of {} tokens", id, impl_->vocab.size());
  }
  return impl_->piece(id, special);
}

Result<std::string> Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& options) const {
  const Impl& impl = *impl_;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!impl.vocab.contains(ids[i])) {
      return out_of_range("token id {} at position {} is outside the vocabulary of {} tokens", ids[i], i,
                          impl.vocab.size());
    }
  }
  // llama_detokenize: the first piece loses one leading space when the model prefixes one, unless a removed BOS
  // came first.
  bool remove_space = impl.add_space_prefix;
  if (options.remove_special && impl.add_bos && !ids.empty() && ids.front() == impl.bos) {
    remove_space = false;
    ids = ids.subspan(1);
  }
  if (options.remove_special && impl.add_eos && !ids.empty() && ids.back() == impl.eos) {
    ids = ids.first(ids.size() - 1);
  }
  std::string text;
  for (const TokenId id : ids) {
    std::string_view piece = impl.piece(id, options.unparse_special);
    if (remove_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    remove_space = false;
    text += piece;
  }
  if (impl.clean_spaces) clean_up_spaces(&text);
  return text;
}

Result<std::vector<TokenId>> Tokenizer::encode_chat(std::string_view rendered) const {
  const bool has_bos = impl_->bos != kNoToken && impl_->add_bos &&
                       rendered.starts_with(impl_->vocab.texts[static_cast<size_t>(impl_->bos)]);
  HXRT_ASSIGN_OR_RETURN(std::vector<TokenId> ids, encode(rendered, {.add_special = true, .parse_special = true}));
  if (has_bos && ids.size() >= 2 && ids[0] == impl_->bos && ids[1] == impl_->bos) ids.erase(ids.begin());
  return ids;
}

Result<std::string> Tokenizer::apply_chat_template(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                                   const ChatOptions& options) const {
  if (!impl_->parsed_template.has_value()) return impl_->template_error;
  auto text_of = [&](TokenId id) {
    return id == kNoToken ? std::string_view() : std::string_view(impl_->vocab.texts[static_cast<size_t>(id)]);
  };
  return detail::render_chat(*impl_->parsed_template, messages, add_generation_prompt, text_of(impl_->bos),
                             text_of(impl_->eos), options);
}

TokenizerModel Tokenizer::model() const {
  return impl_->model;
}
const std::string& Tokenizer::pre() const {
  return impl_->pre_name;
}
int32_t Tokenizer::vocab_size() const {
  return impl_->vocab.size();
}
TokenId Tokenizer::bos() const {
  return impl_->bos;
}
TokenId Tokenizer::eos() const {
  return impl_->eos;
}
TokenId Tokenizer::eot() const {
  return impl_->eot;
}
TokenId Tokenizer::unk() const {
  return impl_->unk;
}
TokenId Tokenizer::pad() const {
  return impl_->pad;
}
bool Tokenizer::add_bos() const {
  return impl_->add_bos;
}
bool Tokenizer::add_eos() const {
  return impl_->add_eos;
}
bool Tokenizer::is_eog(TokenId id) const {
  return id != kNoToken && impl_->eog.contains(id);
}
const std::string& Tokenizer::chat_template() const {
  return impl_->chat_template;
}
Status Tokenizer::chat_template_status() const {
  return impl_->parsed_template.has_value() ? ok_status() : impl_->template_error;
}
TokenId Tokenizer::find_token(std::string_view text) const {
  return impl_->vocab.find(text);
}

Result<std::string_view> Tokenizer::token_text(TokenId id) const {
  if (!impl_->vocab.contains(id)) {
    return out_of_range("token id {} is outside the vocabulary of {} tokens", id, impl_->vocab.size());
  }
  return std::string_view(impl_->vocab.texts[static_cast<size_t>(id)]);
}

Result<TokenType> Tokenizer::token_type(TokenId id) const {
  if (!impl_->vocab.contains(id)) {
    return out_of_range("token id {} is outside the vocabulary of {} tokens", id, impl_->vocab.size());
  }
  return impl_->vocab.types[static_cast<size_t>(id)];
}

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool special)
    : tokenizer_(tokenizer), special_(special) {}

Result<std::string> StreamingDecoder::push(TokenId id) {
  HXRT_ASSIGN_OR_RETURN(const std::string_view piece, tokenizer_.token_to_piece(id, special_));
  pending_ += piece;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const std::string_view rest = std::string_view(pending_).substr(i);
    const size_t valid = detail::valid_utf8_prefix(rest);
    out.append(rest.substr(0, valid));
    i += valid;
    if (i == pending_.size() || detail::is_incomplete_utf8(rest.substr(valid))) break;
    out += kReplacementUtf8;  // a byte that cannot start or continue a valid sequence
    ++i;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamingDecoder::finish() {
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const std::string_view rest = std::string_view(pending_).substr(i);
    const size_t valid = detail::valid_utf8_prefix(rest);
    out.append(rest.substr(0, valid));
    i += valid;
    if (i == pending_.size()) break;
    out += kReplacementUtf8;
    // An incomplete sequence at the end is one character cut short: one replacement for all of it.
    i = detail::is_incomplete_utf8(rest.substr(valid)) ? pending_.size() : i + 1;
  }
  pending_.clear();
  return out;
}

}  // namespace hxrt::llm
