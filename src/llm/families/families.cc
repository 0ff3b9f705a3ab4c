#include "llm/families/families.h"

namespace hxrt::llm {

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> all = {&families::kLlama,  &families::kQwen2,  &families::kQwen3,
                                                      &families::kQwen3Moe, &families::kGemma2, &families::kGemma3,
                                                      &families::kPhi3};
  return all;
}

}  // namespace hxrt::llm
