// Inference helpers shared by the op families' schemas (schemas.h).

#include <cstring>

#include <fmt/format.h>

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

const std::vector<DType>& float_types() {
  static const std::vector<DType> types = {DType::kF32};
  return types;
}

const std::vector<DType>& index_types() {
  static const std::vector<DType> types = {DType::kI32, DType::kI64};
  return types;
}

const std::vector<DType>& plain_types() {
  static const std::vector<DType> types = {DType::kF32, DType::kF16, DType::kBF16, DType::kI8,
                                           DType::kI32, DType::kI64, DType::kU8,   DType::kBool};
  return types;
}

Result<int> axis_value(InferenceContext& ctx, int64_t axis, int rank, std::string_view what) {
  if (axis < -rank || axis >= rank) {
    return ctx.error(fmt::format("{} = {} is out of range for rank {}", what, axis, rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Result<const graph::WeightData*> require_constant(InferenceContext& ctx, size_t i, std::string_view name) {
  const graph::WeightData* weight = ctx.constant_input(i);
  if (weight == nullptr) {
    return ctx.error(fmt::format("input '{}' must be a constant (an initializer) for shape inference", name));
  }
  return weight;
}

std::vector<int64_t> weight_ints(const graph::WeightData& weight, DType dtype, size_t count) {
  std::vector<int64_t> values(count);
  for (size_t k = 0; k < count; ++k) {
    if (dtype == DType::kI64) {
      std::memcpy(&values[k], weight.data + k * 8, 8);
    } else {
      int32_t v;
      std::memcpy(&v, weight.data + k * 4, 4);
      values[k] = v;
    }
  }
  return values;
}

}  // namespace hxrt::ops::schemas
