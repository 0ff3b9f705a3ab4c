// Tokenizer tests on small hand-built vocabularies: pre-tokenizer splits, byte-level BPE against a naive reference,
// SentencePiece merges and byte fallback, special tokens, decoding, streaming, chat templates and errors. The
// real-model tests against llama.cpp's goldens are in tokenizer_smollm2_test.cc.
#include "hxrt/llm/tokenizer.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "llm/bpe.h"
#include "llm/pretokenize.h"
#include "llm/tokenizer_utf8.h"

namespace hxrt::llm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// ---- Helpers ------------------------------------------------------------------------------------------------

// The GPT-2 byte-level form of raw text.
std::string byte_level(std::string_view raw) {
  std::string out;
  detail::append_byte_level(raw, &out);
  return out;
}

std::vector<std::string> split(std::string_view pre, std::string_view text) {
  const detail::PreTokenizerConfig* config = detail::find_pre_tokenizer_config(pre);
  EXPECT_NE(config, nullptr) << pre;
  auto pre_tokenizer = detail::PreTokenizer::create(config->regexes);
  EXPECT_TRUE(pre_tokenizer.ok()) << pre_tokenizer.status().to_string();
  detail::Words words;
  EXPECT_TRUE((*pre_tokenizer)->split(text, &words).ok());
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) out.emplace_back(words[i]);
  return out;
}

// A byte-level BPE vocabulary: four specials, the 256 byte tokens (ids 4..259, in byte order), then one token per
// merge (raw-text pairs, converted to the byte-level alphabet) in merge order.
constexpr TokenId kEndOfText = 0;
constexpr TokenId kImStart = 1;
constexpr TokenId kImEnd = 2;
constexpr TokenId kUser = 3;
constexpr TokenId kFirstByte = 4;
constexpr TokenId kFirstMerge = kFirstByte + 256;

TokenId byte_id(char byte) {
  return kFirstByte + static_cast<uint8_t>(byte);
}

TokenizerSpec toy_bpe_spec(const std::vector<std::pair<std::string, std::string>>& merges, std::string pre = "gpt-2") {
  TokenizerSpec spec;
  spec.model = TokenizerModel::kBpe;
  spec.pre = std::move(pre);
  spec.tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<user>"};
  spec.token_types = {TokenType::kControl, TokenType::kControl, TokenType::kControl, TokenType::kUserDefined};
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(byte_level(std::string(1, static_cast<char>(b))));
    spec.token_types.push_back(TokenType::kNormal);
  }
  for (const auto& [left, right] : merges) {
    spec.merges.push_back(byte_level(left) + " " + byte_level(right));
    if (std::find(spec.tokens.begin(), spec.tokens.end(), byte_level(left + right)) == spec.tokens.end()) {
      spec.tokens.push_back(byte_level(left + right));
      spec.token_types.push_back(TokenType::kNormal);
    }
  }
  spec.bos = kEndOfText;
  spec.eos = kEndOfText;
  return spec;
}

std::unique_ptr<Tokenizer> make(TokenizerSpec spec) {
  auto tokenizer = Tokenizer::create(std::move(spec));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  return std::move(tokenizer).value();
}

std::vector<TokenId> encode(const Tokenizer& tokenizer, std::string_view text, bool parse_special = false) {
  auto ids = tokenizer.encode(text, {.add_special = true, .parse_special = parse_special});
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

std::string decode(const Tokenizer& tokenizer, std::span<const TokenId> ids, DecodeOptions options = {}) {
  auto text = tokenizer.decode(ids, options);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : std::string();
}

// llama.cpp's BPE merge order, done the slow obvious way: repeatedly merge the adjacent pair of lowest rank,
// leftmost first, rescanning the whole word after every merge.
std::vector<std::string> reference_bpe(std::string_view word,
                                       const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> symbols;
  for (const char c : word) symbols.push_back(byte_level(std::string(1, c)));
  while (true) {
    int best_rank = -1;
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = ranks.find({symbols[i], symbols[i + 1]});
      if (it != ranks.end() && (best_rank < 0 || it->second < best_rank)) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank < 0) return symbols;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

// ---- Pre-tokenizer --------------------------------------------------------------------------------------------

TEST(PreTokenizer, Gpt2SplitsWordsSpacesAndContractions) {
  EXPECT_THAT(split("gpt-2", "Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(split("gpt-2", "it's they'll"), ElementsAre("it", "'s", " they", "'ll"));
  // Contractions are case-sensitive in the GPT-2 regex.
  EXPECT_THAT(split("gpt-2", "I'M"), ElementsAre("I", "'", "M"));
  EXPECT_THAT(split("gpt-2", "abc 123 x1"), ElementsAre("abc", " 123", " x", "1"));
  EXPECT_THAT(split("gpt-2", "Wait... what?!"), ElementsAre("Wait", "...", " what", "?!"));
}

TEST(PreTokenizer, Gpt2WhitespaceRunsLeaveOneSpaceForTheNextWord) {
  EXPECT_THAT(split("gpt-2", "a  b"), ElementsAre("a", " ", " b"));
  EXPECT_THAT(split("gpt-2", "a   \n b"), ElementsAre("a", "   \n", " b"));
  EXPECT_THAT(split("gpt-2", "a\n\nb"), ElementsAre("a", "\n", "\n", "b"));
  EXPECT_THAT(split("gpt-2", "end   "), ElementsAre("end", "   "));
  EXPECT_THAT(split("gpt-2", " "), ElementsAre(" "));
  EXPECT_THAT(split("gpt-2", ""), IsEmpty());
}

TEST(PreTokenizer, WhitespaceIsTheUnicodePropertyNotIcuBackslashS) {
  // U+000B and U+0085 are White_Space (llama.cpp's \s) but not in ICU's \s; as "other" they would stick together.
  EXPECT_THAT(split("gpt-2", "a\v\vb"), ElementsAre("a", "\v", "\v", "b"));
  EXPECT_THAT(split("gpt-2", "a\u0085\u0085b"), ElementsAre("a", "\u0085", "\u0085", "b"));
  EXPECT_THAT(split("gpt-2", "a\u3000\u3000b"), ElementsAre("a", "\u3000", "\u3000", "b"));
}

TEST(PreTokenizer, UnicodeLettersAndNumbers) {
  EXPECT_THAT(split("gpt-2", "caf\u00e9 \u65e5\u672c\u8a9e"), ElementsAre("caf\u00e9", " \u65e5\u672c\u8a9e"));
  // Arabic-Indic digits and U+00BD (No) are \p{N}; combining marks (Mn) are not letters.
  EXPECT_THAT(split("gpt-2", "x \u0663\u0664 \u00bd"), ElementsAre("x", " \u0663\u0664", " \u00bd"));
  EXPECT_THAT(split("gpt-2", "e\u0301t"), ElementsAre("e", "\u0301", "t"));
  EXPECT_THAT(split("gpt-2", "hi \U0001F600!"), ElementsAre("hi", " \U0001F600!"));
}

TEST(PreTokenizer, SmollmIsolatesEveryDigitFirst) {
  // The digit pass runs first, so the GPT-2 pass never sees " 123" together: the space ends its own piece.
  EXPECT_THAT(split("smollm", "abc 123"), ElementsAre("abc", " ", "1", "2", "3"));
  EXPECT_THAT(split("smollm", "v1.2"), ElementsAre("v", "1", ".", "2"));
  EXPECT_THAT(split("smollm", "a  42b"), ElementsAre("a", "  ", "4", "2", "b"));
  EXPECT_THAT(split("smollm", "\u0663\u0664"), ElementsAre("\u0663", "\u0664"));
}

TEST(PreTokenizer, DefaultSplitsPunctuationAndDigitTriples) {
  EXPECT_THAT(split("default", "a+b=12345"), ElementsAre("a", "+", "b", "=", "123", "45"));
}

TEST(PreTokenizer, Llama3AndQwen2Regexes) {
  EXPECT_THAT(split("llama3", "I'M 12345 ok\n\n x"), ElementsAre("I", "'M", " ", "123", "45", " ok", "\n\n", " x"));
  EXPECT_THAT(split("qwen2", "ab 123"), ElementsAre("ab", " ", "1", "2", "3"));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  // Each byte that starts no complete sequence is one U+FFFD (a symbol: "other" for the regex).
  EXPECT_THAT(split("gpt-2",
                    "a\xff"
                    "b"),
              ElementsAre("a", "\xEF\xBF\xBD", "b"));
  EXPECT_THAT(split("gpt-2", "\xe2\x82 x"), ElementsAre("\xEF\xBF\xBD\xEF\xBF\xBD", " x"));
  EXPECT_THAT(split("gpt-2", "x\xc3"), ElementsAre("x", "\xEF\xBF\xBD"));
}

TEST(PreTokenizer, UnknownNamesAreNotFound) {
  EXPECT_EQ(detail::find_pre_tokenizer_config("no-such-pre"), nullptr);
  EXPECT_EQ(detail::find_pre_tokenizer_config("")->canonical_name, "default");
}

// ---- Byte-level BPE -------------------------------------------------------------------------------------------

TEST(BpeTokenizer, MergesByRankThenLeftmost) {
  // "b c" outranks "a b", so "abc" → a + bc even though "ab" is further left.
  auto tokenizer = make(toy_bpe_spec({{"b", "c"}, {"a", "b"}}));
  const TokenId bc = tokenizer->find_token(byte_level("bc"));
  EXPECT_THAT(encode(*tokenizer, "abc"), ElementsAre(byte_id('a'), bc));
  // Equal ranks (the same pair twice): the leftmost merges first.
  auto aa = make(toy_bpe_spec({{"a", "a"}}));
  const TokenId aa_id = aa->find_token(byte_level("aa"));
  EXPECT_THAT(encode(*aa, "aaa"), ElementsAre(aa_id, byte_id('a')));
  EXPECT_THAT(encode(*aa, "aaaa"), ElementsAre(aa_id, aa_id));
}

TEST(BpeTokenizer, WordsAreMergedSeparately) {
  auto tokenizer = make(toy_bpe_spec({{"h", "e"},
                                      {"l", "l"},
                                      {"he", "ll"},
                                      {"hell", "o"},
                                      {" ", "w"},
                                      {"o", "r"},
                                      {" w", "or"},
                                      {"l", "d"},
                                      {" wor", "ld"}}));
  const TokenId hello = tokenizer->find_token(byte_level("hello"));
  const TokenId world = tokenizer->find_token(byte_level(" world"));
  ASSERT_NE(hello, kNoToken);
  ASSERT_NE(world, kNoToken);
  EXPECT_THAT(encode(*tokenizer, "hello world"), ElementsAre(hello, world));
  // "o w" spans two words, so " w" + "or"... never merges across the boundary.
  EXPECT_THAT(encode(*tokenizer, "helloworld"),
              ElementsAre(hello, tokenizer->find_token(byte_level("w")), tokenizer->find_token(byte_level("or")),
                          tokenizer->find_token(byte_level("ld"))));
  EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, "hello world")), "hello world");
}

TEST(BpeTokenizer, MatchesNaiveReferenceOnRandomWords) {
  // Random merge tables over a three-letter alphabet, random words: the heap-and-list merger must agree with the
  // rescanning reference token for token.
  std::mt19937 rng(1234);
  for (int table = 0; table < 20; ++table) {
    std::vector<std::string> pieces = {"a", "b", "c"};
    std::vector<std::pair<std::string, std::string>> merges;
    std::map<std::pair<std::string, std::string>, int> ranks;
    while (merges.size() < 40) {
      const std::string& l = pieces[rng() % pieces.size()];
      const std::string& r = pieces[rng() % pieces.size()];
      if (l.size() + r.size() > 8 || ranks.count({byte_level(l), byte_level(r)}) != 0) continue;
      ranks[{byte_level(l), byte_level(r)}] = static_cast<int>(merges.size());
      merges.emplace_back(l, r);
      pieces.push_back(l + r);
    }
    auto tokenizer = make(toy_bpe_spec(merges));
    for (int w = 0; w < 50; ++w) {
      std::string word;
      const size_t length = 1 + rng() % 40;
      for (size_t i = 0; i < length; ++i) word.push_back(static_cast<char>('a' + rng() % 3));
      std::vector<TokenId> expected;
      for (const std::string& symbol : reference_bpe(word, ranks)) expected.push_back(tokenizer->find_token(symbol));
      EXPECT_EQ(encode(*tokenizer, word), expected) << "table " << table << " word " << word;
    }
  }
}

TEST(BpeTokenizer, LongWordsAreFast) {
  // One 200k-byte word with a doubling merge chain: O(n log n), not O(n^2) rescans.
  std::vector<std::pair<std::string, std::string>> merges;
  std::string piece = "a";
  for (int i = 0; i < 10; ++i) {
    merges.emplace_back(piece, piece);
    piece += piece;
  }
  auto tokenizer = make(toy_bpe_spec(merges));
  const std::string word(200000, 'a');
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TokenId> ids = encode(*tokenizer, word);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(ids.size(), 400u);  // at most one 1024-byte token per 1024 bytes, plus the odd remainders
  EXPECT_LT(seconds, 2.0);
  EXPECT_EQ(decode(*tokenizer, ids), word);
}

TEST(BpeTokenizer, AddSpecialAddsBosOnlyWhenTheModelAsks) {
  TokenizerSpec spec = toy_bpe_spec({});
  spec.add_bos = true;
  auto tokenizer = make(std::move(spec));
  EXPECT_THAT(encode(*tokenizer, "a"), ElementsAre(kEndOfText, byte_id('a')));
  EXPECT_THAT(*tokenizer->encode("a", {.add_special = false}), ElementsAre(byte_id('a')));
  EXPECT_THAT(encode(*tokenizer, ""), ElementsAre(kEndOfText));
  // remove_special drops the BOS it would add.
  EXPECT_EQ(decode(*tokenizer, std::vector<TokenId>{kEndOfText, byte_id('a')},
                   {.remove_special = true, .unparse_special = true}),
            "a");
  EXPECT_EQ(decode(*tokenizer, std::vector<TokenId>{kEndOfText, byte_id('a')}, {.unparse_special = true}),
            "<|endoftext|>a");
}

TEST(BpeTokenizer, EncodeChatKeepsOneBosWhenTheTemplateWritesIt) {
  TokenizerSpec spec = toy_bpe_spec({});
  spec.add_bos = true;
  auto tokenizer = make(std::move(spec));
  EXPECT_THAT(*tokenizer->encode_chat("<|endoftext|>a"), ElementsAre(kEndOfText, byte_id('a')));
  EXPECT_THAT(*tokenizer->encode_chat("a"), ElementsAre(kEndOfText, byte_id('a')));
  EXPECT_THAT(*tokenizer->encode_chat("<|endoftext|><|endoftext|>a"),  // the template's own two stay two
              ElementsAre(kEndOfText, kEndOfText, byte_id('a')));
}

// ---- Special tokens -------------------------------------------------------------------------------------------

TEST(SpecialTokens, ControlTokensNeedParseSpecial) {
  auto tokenizer = make(toy_bpe_spec({}));
  EXPECT_THAT(encode(*tokenizer, "a<|im_end|>b", /*parse_special=*/true),
              ElementsAre(byte_id('a'), kImEnd, byte_id('b')));
  const std::vector<TokenId> plain = encode(*tokenizer, "a<|im_end|>b");
  EXPECT_EQ(plain.size(), 12u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kImEnd), 0);
  EXPECT_EQ(decode(*tokenizer, plain), "a<|im_end|>b");
}

TEST(SpecialTokens, UserDefinedTokensAreAlwaysMatched) {
  auto tokenizer = make(toy_bpe_spec({}));
  EXPECT_THAT(encode(*tokenizer, "x<user>"), ElementsAre(byte_id('x'), kUser));
  EXPECT_THAT(encode(*tokenizer, "<user><user>", true), ElementsAre(kUser, kUser));
  // User-defined tokens render as their text even without unparse_special.
  EXPECT_EQ(decode(*tokenizer, std::vector<TokenId>{kUser}), "<user>");
}

TEST(SpecialTokens, LongestTokenSplitsFirstAsInLlamaCpp) {
  // "a><b" (4 bytes) is matched before "<a>" (3 bytes) even though "<a>" occurs further left.
  TokenizerSpec spec = toy_bpe_spec({});
  spec.tokens.push_back("<a>");
  spec.token_types.push_back(TokenType::kControl);
  spec.tokens.push_back("a><b");
  spec.token_types.push_back(TokenType::kControl);
  auto tokenizer = make(std::move(spec));
  const TokenId a = tokenizer->find_token("<a>");
  const TokenId ab = tokenizer->find_token("a><b");
  EXPECT_THAT(encode(*tokenizer, "<a><b>", true), ElementsAre(byte_id('<'), ab, byte_id('>')));
  EXPECT_THAT(encode(*tokenizer, "<a>x<a>", true), ElementsAre(a, byte_id('x'), a));
}

TEST(SpecialTokens, ControlPiecesRenderOnlyWithSpecial) {
  auto tokenizer = make(toy_bpe_spec({}));
  EXPECT_EQ(*tokenizer->token_to_piece(kImStart, /*special=*/true), "<|im_start|>");
  EXPECT_EQ(*tokenizer->token_to_piece(kImStart, /*special=*/false), "");
  const std::vector<TokenId> ids = {kImStart, byte_id('h'), byte_id('i'), kImEnd};
  EXPECT_EQ(decode(*tokenizer, ids), "hi");
  EXPECT_EQ(decode(*tokenizer, ids, {.unparse_special = true}), "<|im_start|>hi<|im_end|>");
}

TEST(SpecialTokens, EndOfGenerationDetectedByText) {
  TokenizerSpec spec = toy_bpe_spec({});
  spec.eos = kNoToken;
  spec.bos = kNoToken;
  auto tokenizer = make(std::move(spec));
  EXPECT_EQ(tokenizer->eot(), kImEnd);
  EXPECT_TRUE(tokenizer->is_eog(kImEnd));
  EXPECT_TRUE(tokenizer->is_eog(kEndOfText));
  EXPECT_FALSE(tokenizer->is_eog(kImStart));
  EXPECT_FALSE(tokenizer->is_eog(kNoToken));
  EXPECT_FALSE(tokenizer->is_eog(999999));
}

// ---- Decoding -------------------------------------------------------------------------------------------------

TEST(Decode, RoundTripsValidUtf8) {
  auto tokenizer = make(toy_bpe_spec({{"h", "e"}, {" ", "w"}}, "smollm"));  // smollm: no space clean-up
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a",  " ", "\n", "\t",     "1",      "\u00e9", "\u4e16", "\U0001F600",
                                             "'s", "<", "|",  "\u0301", "\u00a0", ".",      "he",     " w"};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const size_t length = rng() % 30;
    for (size_t k = 0; k < length; ++k) text += alphabet[rng() % alphabet.size()];
    EXPECT_EQ(decode(*tokenizer, encode(*tokenizer, text)), text);
  }
}

TEST(Decode, InvalidUtf8InputNeverFailsAndDecodesToItsRepair) {
  auto tokenizer = make(toy_bpe_spec({}, "smollm"));
  std::mt19937 rng(99);
  for (int i = 0; i < 500; ++i) {
    std::string bytes;
    const size_t length = rng() % 24;
    for (size_t k = 0; k < length; ++k) bytes.push_back(static_cast<char>(rng() % 256));
    std::string repaired;
    for (const char32_t cp : detail::decode_utf8_lenient(bytes)) detail::append_utf8(cp, &repaired);
    auto ids = tokenizer->encode(bytes);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(decode(*tokenizer, *ids), repaired);
  }
}

TEST(Decode, OutOfRangeIdsAreErrors) {
  auto tokenizer = make(toy_bpe_spec({}));
  const std::vector<TokenId> bad = {byte_id('a'), tokenizer->vocab_size()};
  const auto text = tokenizer->decode(bad);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(text.status().message()), ::testing::HasSubstr("position 1"));
  EXPECT_EQ(tokenizer->token_to_piece(-1).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(tokenizer->token_text(1 << 30).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(tokenizer->token_type(-7).status().code(), StatusCode::kOutOfRange);
}

TEST(Decode, CleanSpacesFollowsThePreTokenizer) {
  // gpt-2 cleans " ," and " 's" like llama.cpp's clean_spaces; smollm does not.
  const std::string text = "a , b 's c ' d";
  auto gpt2 = make(toy_bpe_spec({}, "gpt-2"));
  EXPECT_EQ(decode(*gpt2, encode(*gpt2, text)), "a, b's c'd");
  auto smollm = make(toy_bpe_spec({}, "smollm"));
  EXPECT_EQ(decode(*smollm, encode(*smollm, text)), text);
}

// ---- Streaming ------------------------------------------------------------------------------------------------

TEST(StreamingDecoder, HoldsBackIncompleteCharacters) {
  auto tokenizer = make(toy_bpe_spec({}));
  StreamingDecoder stream(*tokenizer);
  // "é" is C3 A9: two byte tokens.
  EXPECT_EQ(*stream.push(byte_id('\xC3')), "");
  EXPECT_EQ(stream.pending_bytes(), 1u);
  EXPECT_EQ(*stream.push(byte_id('\xA9')), "\u00e9");
  // A 4-byte emoji, one byte at a time.
  const std::string emoji = "\U0001F600";
  std::string printed;
  for (const char b : emoji) printed += *stream.push(byte_id(b));
  EXPECT_EQ(printed, emoji);
  EXPECT_EQ(stream.finish(), "");
}

TEST(StreamingDecoder, ReplacesBytesThatCanNeverBeValid) {
  auto tokenizer = make(toy_bpe_spec({}));
  StreamingDecoder stream(*tokenizer);
  EXPECT_EQ(*stream.push(byte_id('\xFF')), "\uFFFD");
  EXPECT_EQ(*stream.push(byte_id('\xE2')), "");
  EXPECT_EQ(*stream.push(byte_id('a')), "\uFFFDa");  // E2 cut short by 'a'
  EXPECT_EQ(*stream.push(byte_id('\xF0')), "");
  EXPECT_EQ(*stream.push(byte_id('\x9F')), "");
  EXPECT_EQ(stream.finish(), "\uFFFD");  // one replacement for the cut-short sequence
  EXPECT_EQ(stream.pending_bytes(), 0u);
}

TEST(StreamingDecoder, ConcatenationEqualsDecode) {
  auto tokenizer = make(toy_bpe_spec({{"\xC3", "\xA9"}, {"h", "e"}}));
  const std::string text = "h\u00e9llo <|im_end|> w\u00f6rld \U0001F600\u4e16";
  const std::vector<TokenId> ids = encode(*tokenizer, text, true);
  StreamingDecoder stream(*tokenizer, /*special=*/true);
  std::string printed;
  for (const TokenId id : ids) printed += *stream.push(id);
  printed += stream.finish();
  EXPECT_EQ(printed, decode(*tokenizer, ids, {.unparse_special = true}));
  EXPECT_EQ(stream.push(-3).status().code(), StatusCode::kOutOfRange);
}

// ---- SentencePiece --------------------------------------------------------------------------------------------

constexpr TokenId kSpmUnk = 0;
constexpr TokenId kSpmBos = 1;
constexpr TokenId kSpmEos = 2;
constexpr TokenId kSpmFirstByte = 3;

TokenizerSpec toy_spm_spec(bool add_space_prefix = true) {
  TokenizerSpec spec;
  spec.model = TokenizerModel::kSpm;
  spec.tokens = {"<unk>", "<s>", "</s>"};
  spec.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  spec.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(fmt::format("<0x{:02X}>", b));
    spec.token_types.push_back(TokenType::kByte);
    spec.scores.push_back(0);
  }
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\u2581", -1},
      {"h", -2},
      {"e", -2},
      {"l", -2},
      {"o", -2},
      {"w", -2},
      {"r", -2},
      {"d", -2},
      {"ll", -1.0f},
      {"llo", -1.5f},
      {"he", -2.0f},
      {"\u2581he", -3.0f},
      {"\u2581hello", -5.0f},
      {"\u2581w", -4.0f},
      {"or", -4.5f},
      {"\u2581wor", -6.0f},
      {"ld", -6.5f},
      {"\u2581world", -7.0f},
  };
  for (const auto& [text, score] : pieces) {
    spec.tokens.push_back(text);
    spec.token_types.push_back(TokenType::kNormal);
    spec.scores.push_back(score);
  }
  spec.bos = kSpmBos;
  spec.eos = kSpmEos;
  spec.unk = kSpmUnk;
  spec.add_bos = true;
  spec.add_space_prefix = add_space_prefix;
  return spec;
}

TEST(SpmTokenizer, MergesByScoreWithSpacePrefix) {
  auto tokenizer = make(toy_spm_spec());
  const TokenId hello = tokenizer->find_token("\u2581hello");
  const TokenId world = tokenizer->find_token("\u2581world");
  EXPECT_THAT(encode(*tokenizer, "hello world"), ElementsAre(kSpmBos, hello, world));
  EXPECT_THAT(*tokenizer->encode("hello", {.add_special = false}), ElementsAre(hello));
  // The leading space the model prefixed is dropped when decoding.
  EXPECT_EQ(decode(*tokenizer, *tokenizer->encode("hello world", {.add_special = false})), "hello world");
  // With a BOS that is removed, llama.cpp keeps the space; with a BOS kept, the BOS piece takes the removal.
  EXPECT_EQ(decode(*tokenizer, std::vector<TokenId>{kSpmBos, hello}, {.remove_special = true}), " hello");
  EXPECT_EQ(decode(*tokenizer, std::vector<TokenId>{kSpmBos, hello}), " hello");
}

TEST(SpmTokenizer, MergePriorityIsTheMergedPieceScore) {
  auto tokenizer = make(toy_spm_spec(false));
  // "llo": "ll" (-1) merges before "he" (-2), then "llo" (-1.5); "hello" is no piece, so he + llo.
  EXPECT_THAT(*tokenizer->encode("hello", {.add_special = false}),
              ElementsAre(tokenizer->find_token("he"), tokenizer->find_token("llo")));
}

TEST(SpmTokenizer, BytesFallBackToByteTokens) {
  auto tokenizer = make(toy_spm_spec());
  // "é" (C3 A9) has no piece: two byte tokens.
  const std::vector<TokenId> ids = *tokenizer->encode("h\u00e9", {.add_special = false});
  EXPECT_THAT(ids, ElementsAre(tokenizer->find_token("\u2581"), tokenizer->find_token("h"), kSpmFirstByte + 0xC3,
                               kSpmFirstByte + 0xA9));
  EXPECT_EQ(decode(*tokenizer, ids), "h\u00e9");
  EXPECT_EQ(*tokenizer->token_to_piece(kSpmFirstByte + 0x41), "A");
}

TEST(SpmTokenizer, SpacePrefixAfterEverySpecialToken) {
  auto tokenizer = make(toy_spm_spec());
  const TokenId hello = tokenizer->find_token("\u2581hello");
  EXPECT_THAT(*tokenizer->encode("hello</s>hello", {.add_special = false, .parse_special = true}),
              ElementsAre(hello, kSpmEos, hello));
  // Without parse_special the control token's text is ordinary text.
  const std::vector<TokenId> plain = *tokenizer->encode("</s>", {.add_special = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), kSpmEos), 0);
  EXPECT_EQ(decode(*tokenizer, plain), "</s>");
}

TEST(SpmTokenizer, UnknownPiecesWithoutByteTokensUseUnk) {
  TokenizerSpec spec;
  spec.model = TokenizerModel::kSpm;
  spec.tokens = {"<unk>", "\u2581", "a"};
  spec.token_types = {TokenType::kUnknown, TokenType::kNormal, TokenType::kNormal};
  spec.unk = 0;
  spec.add_space_prefix = true;
  auto tokenizer = make(std::move(spec));
  EXPECT_THAT(*tokenizer->encode("a\u00e9", {.add_special = false}), ElementsAre(1, 2, 0, 0));
}

// ---- Chat templates -------------------------------------------------------------------------------------------

// SmolLM2-135M-Instruct's tokenizer.chat_template, as stored in its GGUF file.
constexpr std::string_view kSmolLm2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
    "are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
    "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplate, SmolLm2InsertsItsDefaultSystemTurn) {
  const std::vector<ChatMessage> chat = {{"user", "What is 2+2?"}};
  EXPECT_EQ(*apply_chat_template(kSmolLm2Template, chat, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, SmolLm2KeepsAGivenSystemTurn) {
  const std::vector<ChatMessage> chat = {
      {"system", "Be brief."}, {"user", "hi"}, {"assistant", "Hello!"}, {"user", "bye"}};
  EXPECT_EQ(*apply_chat_template(kSmolLm2Template, chat, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nbye<|im_end|>\n");
}

TEST(ChatTemplate, EmptyConversationHasNoSystemTurn) {
  EXPECT_EQ(*apply_chat_template(kSmolLm2Template, {}, true), "<|im_start|>assistant\n");
  EXPECT_EQ(*apply_chat_template(kSmolLm2Template, {}, false), "");
}

TEST(ChatTemplate, PlainChatMl) {
  const std::vector<ChatMessage> chat = {{"user", "hi"}};
  EXPECT_EQ(*apply_chat_template("chatml", chat, true), "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*apply_chat_template("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + "
                                 "'<|im_end|>\\n'}}{% endfor %}",
                                 chat, false),
            "<|im_start|>user\nhi<|im_end|>\n");
}

TEST(ChatTemplate, AnyJinjaTemplateRenders) {
  const std::vector<ChatMessage> chat = {{"user", "hi"}, {"assistant", "hello"}};
  const auto llama2 = apply_chat_template(
      "{{ bos_token }}{% for m in messages %}{% if m.role == 'user' %}[INST] {{ m['content'] }} [/INST]"
      "{% else %} {{ m.content }}{{ eos_token }}{% endif %}{% endfor %}",
      chat, false, "<s>", "</s>");
  ASSERT_TRUE(llama2.ok()) << llama2.status().to_string();
  EXPECT_EQ(*llama2, "<s>[INST] hi [/INST] hello</s>");
}

TEST(ChatTemplate, BadTemplatesAreInvalidArguments) {
  const std::vector<ChatMessage> chat = {{"user", "hi"}};
  EXPECT_EQ(apply_chat_template("", chat, true).status().code(), StatusCode::kInvalidArgument);
  const auto unclosed = apply_chat_template("line one\n{% for m in messages %}", chat, true);
  EXPECT_EQ(unclosed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unclosed.status().message()), ::testing::HasSubstr("expected 'endfor'"));
  const auto refused = apply_chat_template("{{ raise_exception('no system role, please') }}", chat, true);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(refused.status().message()), "chat template: no system role, please");
}

TEST(ChatTemplate, FilesWithoutATemplateGetTheirFamilysFormat) {
  const std::vector<std::string> llama3 = {"a", "<|start_header_id|>"};
  const std::vector<std::string> chatml = {"<|im_start|>"};
  const std::vector<std::string> plain = {"a"};
  EXPECT_EQ(default_chat_template("llama", llama3), "llama3");
  EXPECT_EQ(default_chat_template("llama", chatml), "chatml");
  EXPECT_EQ(default_chat_template("llama", plain), "llama2");
  EXPECT_EQ(default_chat_template("gemma3", plain), "gemma");
  EXPECT_EQ(default_chat_template("qwen2", plain), "qwen");
  EXPECT_EQ(default_chat_template("phi3", plain), "phi3");
  EXPECT_EQ(default_chat_template("mamba", plain), "chatml");
  for (const char* name : {"chatml", "qwen", "llama3", "llama2", "mistral", "gemma", "phi3"}) {
    ASSERT_TRUE(builtin_chat_template(name).has_value()) << name;
  }
  const std::vector<ChatMessage> chat = {{"system", "Be brief."}, {"user", "hi"}};
  const auto gemma = apply_chat_template("gemma", chat, true, "<bos>", "<eos>");
  ASSERT_TRUE(gemma.ok()) << gemma.status().to_string();
  EXPECT_EQ(*gemma, "<bos><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplate, ToolCallsAndToolsReachTheTemplate) {
  std::vector<ChatMessage> chat = {{"user", "weather?"}};
  chat.push_back({.role = "assistant",
                  .tool_calls_json = R"([{"id": "c1", "type": "function", "function": {"name": "w",
                                          "arguments": "{\"city\": \"Paris\"}"}}])"});
  chat.push_back({.role = "tool", .content = "sunny", .tool_call_id = "c1", .name = "w"});
  const auto rendered = apply_chat_template(
      "{% for t in tools %}{{ t.function.name }};{% endfor %}{% for m in messages %}{{ m.role }}:"
      "{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.city }}{% else %}{{ m.content }}{% endif %}"
      "{% if m.tool_call_id is defined %}({{ m.tool_call_id }}/{{ m.name }}){% endif %}|{% endfor %}",
      chat, false, "", "", {.tools_json = R"([{"type": "function", "function": {"name": "w"}}])"});
  ASSERT_TRUE(rendered.ok()) << rendered.status().to_string();
  EXPECT_EQ(*rendered, "w;user:weather?|assistant:Paris|tool:sunny(c1/w)|");
  EXPECT_FALSE(apply_chat_template("x", chat, false, "", "", {.tools_json = "{not json"}).ok());
}

TEST(ChatTemplate, TokenizerUsesItsOwnTemplate) {
  TokenizerSpec spec = toy_bpe_spec({});
  spec.chat_template = std::string(kSmolLm2Template);
  auto tokenizer = make(std::move(spec));
  const std::vector<ChatMessage> chat = {{"user", "hi"}};
  const std::string prompt = *tokenizer->apply_chat_template(chat, true);
  const std::vector<TokenId> ids = encode(*tokenizer, prompt, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImStart), 3);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kImEnd), 2);
}

// ---- Spec validation and concurrency ---------------------------------------------------------------------------

TEST(TokenizerSpec, InvalidSpecsAreRejected) {
  auto expect_invalid = [](TokenizerSpec spec, std::string_view what) {
    const auto tokenizer = Tokenizer::create(std::move(spec));
    ASSERT_FALSE(tokenizer.ok()) << what;
    EXPECT_EQ(tokenizer.status().code(), StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(std::string(tokenizer.status().message()), ::testing::HasSubstr(std::string(what)));
  };
  expect_invalid(TokenizerSpec{}, "empty");
  TokenizerSpec duplicate = toy_bpe_spec({});
  duplicate.tokens[kUser] = "<|im_end|>";
  expect_invalid(std::move(duplicate), "duplicate token '<|im_end|>'");
  TokenizerSpec bad_bos = toy_bpe_spec({});
  bad_bos.bos = 100000;
  expect_invalid(std::move(bad_bos), "bos token id 100000");
  TokenizerSpec bad_types = toy_bpe_spec({});
  bad_types.token_types.pop_back();
  expect_invalid(std::move(bad_types), "token types");
  TokenizerSpec bad_pre = toy_bpe_spec({}, "klingon");
  expect_invalid(std::move(bad_pre), "unknown pre-tokenizer 'klingon'");
  TokenizerSpec no_bos = toy_bpe_spec({});
  no_bos.bos = kNoToken;
  no_bos.add_bos = true;
  expect_invalid(std::move(no_bos), "add_bos");
}

TEST(TokenizerSpec, MalformedMergesAreDroppedNotFatal) {
  TokenizerSpec spec = toy_bpe_spec({{"a", "b"}});
  spec.merges.push_back("nospace");
  spec.merges.push_back(byte_level("x") + " " + byte_level("y"));  // "xy" is not a token
  auto tokenizer = make(std::move(spec));
  EXPECT_THAT(encode(*tokenizer, "abxy"),
              ElementsAre(tokenizer->find_token(byte_level("ab")), byte_id('x'), byte_id('y')));
}

TEST(Tokenizer, ConcurrentEncodesAgree) {
  auto tokenizer = make(toy_bpe_spec({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {" ", "w"}}, "smollm"));
  const std::string text = "hello world 123 <|im_end|> caf\u00e9 \U0001F600 hello\n\n";
  const std::vector<TokenId> expected = encode(*tokenizer, text, true);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto ids = tokenizer->encode(text, {.parse_special = true});
        if (!ids.ok() || *ids != expected) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

}  // namespace
}  // namespace hxrt::llm
