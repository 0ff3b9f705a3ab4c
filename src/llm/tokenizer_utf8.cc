#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::detail {
namespace {

bool is_continuation(uint8_t byte) {
  return (byte & 0xC0) == 0x80;
}

// Length of the well-formed sequence at the start of `bytes` (RFC 3629 table 3-7), or 0 when there is none.
// `*incomplete` is set when the bytes present are a valid start that is cut short.
size_t well_formed_length(std::string_view bytes, bool* incomplete) {
  *incomplete = false;
  const auto b0 = static_cast<uint8_t>(bytes[0]);
  if (b0 < 0x80) return 1;
  size_t length = 0;
  uint8_t lo = 0x80;
  uint8_t hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t i = 1; i < length; ++i) {
    if (i >= bytes.size()) {
      *incomplete = true;
      return 0;
    }
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (i == 1 ? (b < lo || b > hi) : !is_continuation(b)) return 0;
  }
  return length;
}

}  // namespace

std::vector<char32_t> decode_utf8_lenient(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  size_t i = 0;
  const size_t n = text.size();
  auto at = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  while (i < n) {
    const uint8_t b0 = at(i);
    if (b0 < 0x80) {
      cps.push_back(b0);
      ++i;
      continue;
    }
    char32_t cp = kReplacementChar;
    size_t length = 1;
    if ((b0 & 0x40) == 0) {
      // stray continuation byte
    } else if ((b0 & 0x20) == 0) {
      if (i + 1 < n && is_continuation(at(i + 1))) {
        cp = ((b0 & 0x1Fu) << 6) | (at(i + 1) & 0x3Fu);
        length = 2;
      }
    } else if ((b0 & 0x10) == 0) {
      if (i + 2 < n && is_continuation(at(i + 1)) && is_continuation(at(i + 2))) {
        cp = ((b0 & 0x0Fu) << 12) | ((at(i + 1) & 0x3Fu) << 6) | (at(i + 2) & 0x3Fu);
        length = 3;
      }
    } else if ((b0 & 0x08) == 0) {
      if (i + 3 < n && is_continuation(at(i + 1)) && is_continuation(at(i + 2)) && is_continuation(at(i + 3))) {
        const char32_t value =
            ((b0 & 0x07u) << 18) | ((at(i + 1) & 0x3Fu) << 12) | ((at(i + 2) & 0x3Fu) << 6) | (at(i + 3) & 0x3Fu);
        if (value <= 0x10FFFF) {
          cp = value;
          length = 4;
        }
      }
    }
    cps.push_back(cp);
    i += length;
  }
  return cps;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t valid_utf8_prefix(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    bool incomplete = false;
    const size_t length = well_formed_length(bytes.substr(i), &incomplete);
    if (length == 0) break;
    i += length;
  }
  return i;
}

bool is_incomplete_utf8(std::string_view tail) {
  if (tail.empty() || tail.size() > 3) return false;
  bool incomplete = false;
  return well_formed_length(tail, &incomplete) == 0 && incomplete;
}

}  // namespace hxrt::llm::detail
