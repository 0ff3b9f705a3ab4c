// TextStream: generated tokens → text pieces that are final, for streaming to a user.
//
// Two things make a piece final: it holds no partial UTF-8 character (StreamingDecoder), and it cannot turn out to
// be part of a stop string. The text after the last point that could still begin a stop string is held back until
// the next tokens decide; when a stop string completes, the text ends before it and the stream stops. So the pieces
// given out always add up to the final text, and no client ever sees text that a stop string later cut.
//
// Thread-safety: thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/llm/tokenizer.h"

namespace hxrt::llm {

class TextStream {
 public:
  // `tokenizer` must outlive the stream. Empty stop strings are ignored.
  TextStream(const Tokenizer& tokenizer, std::vector<std::string> stops);
  TextStream(const TextStream&) = delete;
  TextStream& operator=(const TextStream&) = delete;

  // Appends the text of `token` (control tokens render as nothing) and returns what became final, possibly "".
  // Once stopped() is true, push() returns "" and changes nothing. OutOfRange for a token outside the vocabulary.
  Result<std::string> push(int32_t token);
  // Ends the stream when generation ended for another reason than a stop string: returns the rest (bytes of an
  // incomplete character become U+FFFD; held-back text is given out).
  std::string finish();

  bool stopped() const { return stopped_; }
  // Everything given out so far (by push and finish).
  std::string_view emitted() const { return std::string_view(text_).substr(0, emitted_); }

 private:
  StreamingDecoder decoder_;
  std::vector<std::string> stops_;
  std::string text_;    // decoded so far, cut before a stop string once one is found
  size_t emitted_ = 0;  // leading bytes of text_ given out
  bool stopped_ = false;
};

}  // namespace hxrt::llm
