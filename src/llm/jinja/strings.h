// Python's string and number formatting rules, as templates observe them. Strings are UTF-8; "characters" are code
// points, as Python's str counts them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hxrt::llm::jinja {

// repr(float): the shortest text that reads back to `d`; fixed notation for 1e-4 <= |d| < 1e16 (with ".0" when
// integral), otherwise "1e+16" / "1.5e-05".
std::string python_float_repr(double d);
// repr(str): single quotes unless the text holds ' and no ", escapes for \\, the quote, \n \r \t and other
// control characters.
std::string python_string_repr(std::string_view s);

// Byte offsets of each code point start in `s`, plus s.size() at the end (invalid bytes count as one each).
std::vector<size_t> code_point_offsets(std::string_view s);
size_t code_point_count(std::string_view s);

// Python's whitespace (str.isspace) at the start of `s`: its length in bytes, 0 when none.
size_t whitespace_prefix(std::string_view s);
size_t whitespace_suffix(std::string_view s);
std::string_view strip(std::string_view s, bool left, bool right);
std::string_view strip_chars(std::string_view s, std::string_view chars, bool left, bool right);
// str.split(): on runs of whitespace, no empty parts; str.split(sep): on every sep (maxsplit < 0: all).
std::vector<std::string> split_whitespace(std::string_view s, int64_t maxsplit);
std::vector<std::string> split_on(std::string_view s, std::string_view sep, int64_t maxsplit);
std::string replace_all(std::string_view s, std::string_view from, std::string_view to, int64_t count);

// Full Unicode case mapping (ICU, root locale), as str.upper/lower/title/capitalize.
std::string to_upper(std::string_view s);
std::string to_lower(std::string_view s);
std::string to_title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);     // str.capitalize()
std::string jinja_title(std::string_view s);    // jinja2's |title: words start after whitespace, - ( { [ <

}  // namespace hxrt::llm::jinja
