// The llama.cpp golden tests' shared step: every case of a golden file ({"prompt_ids", "generated_ids", ...}) as one
// request, submitted together to one engine and run to the end; the results in case order.
#pragma once

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "hxrt/llm/engine.h"

namespace hxrt::llm::testing {

// Each case's prompt, as many new tokens as llama.cpp generated (past EOS, as its goldens run), with logits.
inline Result<std::vector<RequestResult>> run_golden_cases(Engine& engine, const nlohmann::json& cases) {
  for (const auto& c : cases) {
    Request request;
    request.prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    request.max_new_tokens = static_cast<int>(c["generated_ids"].size());
    request.ignore_eos = true;
    request.return_logits = true;
    HXRT_RETURN_IF_ERROR(engine.submit(std::move(request)).status());
  }
  HXRT_RETURN_IF_ERROR(engine.run_until_idle());
  std::vector<RequestResult> results = engine.take_finished();
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  if (results.size() != cases.size()) {
    return internal_error("{} cases gave {} results", cases.size(), results.size());
  }
  return results;
}

}  // namespace hxrt::llm::testing
