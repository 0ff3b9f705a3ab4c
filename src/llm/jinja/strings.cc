#include "llm/jinja/strings.h"

#include <unicode/uchar.h>
#include <unicode/locid.h>
#include <unicode/unistr.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "llm/tokenizer_utf8.h"

namespace hxrt::llm::jinja {

std::string python_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, e.g. "1.5e-05" → digits "15", exponent -5.
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  if (ec != std::errc()) return "nan";
  std::string_view sci(buf, static_cast<size_t>(end - buf));
  const bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  const size_t e_at = sci.find('e');
  std::string digits;
  for (const char c : sci.substr(0, e_at)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  std::from_chars(sci.data() + e_at + 1 + (sci[e_at + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = negative ? "-" : "";
  if (exponent >= -5 + 1 && exponent < 16) {  // Python's repr switches to exponent form outside 1e-4 <= |d| < 1e16
    const int point = exponent + 1;           // digits before the decimal point
    if (point <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-point), '0');
      out += digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(point) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point));
      out += '.';
      out += digits.substr(static_cast<size_t>(point));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += '.';
    out += digits.substr(1);
  }
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

std::string python_string_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

namespace {

// Decodes the code point at s[i]; sets *len to its byte length (1 for an invalid byte, returned as U+FFFD).
char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const auto lead = static_cast<uint8_t>(s[i]);
  const size_t n = detail::utf8_sequence_length(lead);
  if (n <= 1 || i + n > s.size()) {
    *len = 1;
    return lead < 0x80 ? lead : 0xFFFD;
  }
  char32_t cp = lead & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      *len = 1;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  *len = n;
  return cp;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string icu_to_utf8(const icu::UnicodeString& u) {
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace

std::vector<size_t> code_point_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    size_t len = 1;
    decode_at(s, i, &len);
    i += len;
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    size_t len = 1;
    decode_at(s, i, &len);
    i += len;
  }
  return n;
}

size_t whitespace_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 1;
    if (!is_python_space(decode_at(s, i, &len))) break;
    i += len;
  }
  return i;
}

size_t whitespace_suffix(std::string_view s) {
  const std::vector<size_t> offsets = code_point_offsets(s);
  size_t k = offsets.size() - 1;  // offsets[k] is the end of the kept part
  while (k > 0) {
    size_t len = 1;
    if (!is_python_space(decode_at(s, offsets[k - 1], &len))) break;
    --k;
  }
  return s.size() - offsets[k];
}

std::string_view strip(std::string_view s, bool left, bool right) {
  if (left) s.remove_prefix(whitespace_prefix(s));
  if (right) s.remove_suffix(whitespace_suffix(s));
  return s;
}

std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right) {
  // Compared by code point, as Python's str.strip(chars) does.
  const std::vector<size_t> set_offsets = code_point_offsets(chars);
  auto in_set = [&](std::string_view cp) {
    for (size_t k = 0; k + 1 < set_offsets.size(); ++k) {
      if (chars.substr(set_offsets[k], set_offsets[k + 1] - set_offsets[k]) == cp) return true;
    }
    return false;
  };
  const std::vector<size_t> offsets = code_point_offsets(s);
  size_t first = 0;
  size_t last = offsets.size() - 1;
  if (left) {
    while (first < last && in_set(s.substr(offsets[first], offsets[first + 1] - offsets[first]))) ++first;
  }
  if (right) {
    while (last > first && in_set(s.substr(offsets[last - 1], offsets[last] - offsets[last - 1]))) --last;
  }
  return s.substr(offsets[first], offsets[last] - offsets[first]);
}

std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t i = whitespace_prefix(s);
  while (i < s.size()) {
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      std::string_view rest = strip(s.substr(i), false, true);
      parts.emplace_back(rest);
      return parts;
    }
    size_t j = i;
    while (j < s.size()) {
      size_t len = 1;
      if (is_python_space(decode_at(s, j, &len))) break;
      j += len;
    }
    parts.emplace_back(s.substr(i, j - i));
    i = j + whitespace_prefix(s.substr(j));
  }
  return parts;
}

std::vector<std::string> split_on(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t from = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t at = s.find(sep, from);
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(from, at - from));
    from = at + sep.size();
  }
  parts.emplace_back(s.substr(from));
  return parts;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` between every character and at both ends
    const std::vector<size_t> offsets = code_point_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += s.substr(offsets[k], offsets[k + 1] - offsets[k]);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, pos);
    if (at == std::string_view::npos) break;
    out += s.substr(pos, at - pos);
    out += to;
    pos = at + from.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

std::string to_upper(std::string_view s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  return icu_to_utf8(u.toUpper(icu::Locale::getRoot()));
}

std::string to_lower(std::string_view s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
  return icu_to_utf8(u.toLower(icu::Locale::getRoot()));
}

std::string to_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    size_t len = 1;
    const char32_t cp = decode_at(s, i, &len);
    const std::string_view piece = s.substr(i, len);
    const bool cased = u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_CASED) != 0;
    if (cased) {
      out += previous_cased ? to_lower(piece) : icu_to_utf8(icu::UnicodeString(static_cast<UChar32>(
                                                    u_totitle(static_cast<UChar32>(cp)))));
    } else {
      out += piece;
    }
    previous_cased = cased;  // CPython's title(): only cased characters continue a word
    i += len;
  }
  return out;
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t len = 1;
  const char32_t cp = decode_at(s, 0, &len);
  return icu_to_utf8(icu::UnicodeString(static_cast<UChar32>(u_totitle(static_cast<UChar32>(cp))))) +
         to_lower(s.substr(len));
}

std::string jinja_title(std::string_view s) {
  // Words are split off by runs of whitespace and - ( { [ <; each word's first character is upper-cased and the
  // rest lower-cased.
  auto is_break = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' || c == '(' ||
           c == '{' || c == '[' || c == '<';
  };
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (is_break(s[i])) {
      while (j < s.size() && is_break(s[j])) ++j;
      out += s.substr(i, j - i);
    } else {
      while (j < s.size() && !is_break(s[j])) ++j;
      size_t len = 1;
      decode_at(s, i, &len);
      out += to_upper(s.substr(i, len));
      out += to_lower(s.substr(i + len, j - i - len));
    }
    i = j;
  }
  return out;
}

}  // namespace hxrt::llm::jinja
