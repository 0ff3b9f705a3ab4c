// Chat templates: arbitrary bytes in, split at NUL bytes into a template (Jinja source or a built-in name), then
// role/content pairs; the first byte says whether to add the generation prompt. Parsing and rendering return text
// or a Status, never crash, and stay within the renderer's output limit; the built-in ChatML template holds every
// message's content, in order.
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "hxrt/llm/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool add_generation_prompt = (data[0] & 1) != 0;
  std::vector<std::string> parts(1);
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  std::vector<hxrt::llm::ChatMessage> messages;
  for (size_t i = 1; i + 1 < parts.size(); i += 2) messages.push_back({parts[i], parts[i + 1]});
  hxrt::Result<std::string> rendered =
      hxrt::llm::apply_chat_template(parts[0], messages, add_generation_prompt, "<s>", "</s>");
  if (!rendered.ok()) {
    HXRT_FUZZ_ASSERT(!rendered.status().message().empty(), "a failed render says nothing");
    return 0;
  }
  if (parts[0] != "chatml") return 0;
  size_t from = 0;
  for (const hxrt::llm::ChatMessage& message : messages) {
    const size_t at = rendered->find(message.content, from);
    HXRT_FUZZ_ASSERT(at != std::string::npos, "a message's content is missing from the rendered ChatML chat");
    from = at + message.content.size();
  }
  return 0;
}
