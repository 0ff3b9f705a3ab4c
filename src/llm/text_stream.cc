#include "hxrt/llm/text_stream.h"

#include <algorithm>

namespace hxrt::llm {
namespace {

// The length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t held_back(std::string_view text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& stop : stops) {
    for (size_t n = std::min(stop.size() - 1, text.size()); n > hold; --n) {
      if (text.substr(text.size() - n) == std::string_view(stop).substr(0, n)) {
        hold = n;
        break;
      }
    }
  }
  return hold;
}

}  // namespace

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops)
    : decoder_(tokenizer), stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

Result<std::string> TextStream::push(int32_t token) {
  if (stopped_) return std::string();
  HXRT_ASSIGN_OR_RETURN(std::string piece, decoder_.push(token));
  const size_t before = text_.size();
  text_ += piece;
  // The earliest stop string that ends in the new text (a stop string ending before it was found earlier).
  size_t cut = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
    cut = std::min(cut, text_.find(stop, from));
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
  }
  const size_t end = stopped_ ? text_.size() : text_.size() - held_back(text_, stops_);
  if (end <= emitted_) return std::string();
  std::string out = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return out;
}

std::string TextStream::finish() {
  if (!stopped_) text_ += decoder_.finish();
  std::string out = text_.substr(std::min(emitted_, text_.size()));
  emitted_ = text_.size();
  return out;
}

}  // namespace hxrt::llm
