#include "kernels/launch_util.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <vector>

#include <fmt/format.h>

namespace hxrt::kernels {

std::string tiling_defines(const ops::Tiling& tiling, std::initializer_list<std::string_view> names) {
  std::string out;
  for (std::string_view name : names) {
    std::string upper(name);
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    out += fmt::format(" -D {}={}", upper, tiling.get(name, 0));
  }
  return out;
}

hal::LaunchConfig launch_1d(int64_t items, uint32_t group) {
  hal::LaunchConfig config;
  const int64_t groups = std::max<int64_t>(1, (items + group - 1) / group);
  config.grid = {static_cast<uint32_t>(groups), 1, 1};
  config.block = {group, 1, 1};
  return config;
}

int64_t next_power_of_two(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

Status check_int32(int64_t value, std::string_view what) {
  if (value < 0 || value > INT_MAX) return invalid_argument("{} = {} does not fit the kernels' 32-bit indices", what, value);
  return ok_status();
}

Result<ops::Tiling> copy_bytes_tiling(const ops::TilingQuery& query) {
  ops::Tiling tiling;
  HXRT_ASSIGN_OR_RETURN(const uint64_t bytes,
                        storage_bytes(query.inputs[0].dtype, static_cast<uint64_t>(query.inputs[0].num_elements())));
  tiling.values = {{"copy_bytes", static_cast<int64_t>(bytes)}};
  return tiling;
}

MergedBroadcast merge_broadcast_dims(std::span<const int64_t> a_dims, std::span<const int64_t> b_dims, int64_t a_inner,
                                     int64_t b_inner) {
  struct Dim {
    int64_t size, sa, sb;
  };
  std::vector<Dim> merged;  // innermost first
  int64_t a_step = a_inner, b_step = b_inner;
  const int rank = static_cast<int>(std::max(a_dims.size(), b_dims.size()));
  for (int d = rank - 1; d >= 0; --d) {
    const int da = d - (rank - static_cast<int>(a_dims.size()));
    const int db = d - (rank - static_cast<int>(b_dims.size()));
    const int64_t a_dim = da >= 0 ? a_dims[static_cast<size_t>(da)] : 1;
    const int64_t b_dim = db >= 0 ? b_dims[static_cast<size_t>(db)] : 1;
    const int64_t size = a_dim == 1 ? b_dim : a_dim;
    const Dim dim{size, a_dim == 1 ? 0 : a_step, b_dim == 1 ? 0 : b_step};
    a_step *= a_dim;
    b_step *= b_dim;
    if (size == 1) continue;
    if (!merged.empty() && dim.sa == merged.back().sa * merged.back().size &&
        dim.sb == merged.back().sb * merged.back().size) {
      merged.back().size *= size;
      continue;
    }
    merged.push_back(dim);
  }
  MergedBroadcast result;
  result.merged_rank = static_cast<int>(merged.size());
  if (result.merged_rank > kMaxMergedDims) return result;
  for (size_t i = 0; i < merged.size(); ++i) {
    const size_t slot = kMaxMergedDims - 1 - i;
    result.dims[slot] = static_cast<int32_t>(merged[i].size);
    result.a_strides[slot] = static_cast<int32_t>(merged[i].sa);
    result.b_strides[slot] = static_cast<int32_t>(merged[i].sb);
  }
  return result;
}

}  // namespace hxrt::kernels
