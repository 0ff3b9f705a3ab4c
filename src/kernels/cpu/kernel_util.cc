#include "kernels/cpu/kernel_util.h"

#include <algorithm>
#include <cstring>

#include "hxrt/ops/params/tensor_ops.h"
#include "kernels/cpu/elementwise.h"

namespace hxrt::kernels::cpu {

int64_t copy_units_per_chunk(const ops::Tiling& tiling, int64_t unit_bytes) {
  return std::max<int64_t>(1, tiling_grain(tiling, "grain_bytes", kCopyGrainBytes) / std::max<int64_t>(unit_bytes, 1));
}

ops::TilingFn copy_tiling() {
  return [](const ops::TilingQuery& q) -> Result<ops::Tiling> {
    int64_t bytes = 0;
    if (!q.outputs.empty()) {
      const size_t eb = std::max<size_t>(1, ops::element_bytes(q.outputs[0].dtype));
      bytes = q.outputs[0].num_elements() * static_cast<int64_t>(eb);
    }
    return chunk_tiling("grain_bytes", kCopyGrainBytes, bytes);
  };
}

Result<size_t> plain_element_bytes(DType dtype, std::string_view op) {
  const size_t bytes = ops::element_bytes(dtype);
  if (bytes == 0) return invalid_argument("{}: block-quantized dtype {} is not supported", op, dtype);
  return bytes;
}

Result<std::vector<int64_t>> read_int_values(const ops::TensorRef& t, std::string_view op, std::string_view name) {
  std::vector<int64_t> values(static_cast<size_t>(t.num_elements()));
  if (t.dtype == DType::kI64) {
    if (!values.empty()) std::memcpy(values.data(), t.data<const int64_t>(), values.size() * sizeof(int64_t));
  } else if (t.dtype == DType::kI32) {
    const auto* p = t.data<const int32_t>();
    for (size_t i = 0; i < values.size(); ++i) values[i] = p[i];
  } else {
    return invalid_argument("{}: input '{}' must be i32 or i64, got {}", op, name, t.dtype);
  }
  return values;
}

}  // namespace hxrt::kernels::cpu
