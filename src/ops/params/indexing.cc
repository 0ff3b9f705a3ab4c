#include "hxrt/ops/params/indexing.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "hxrt/base/float16.h"

namespace hxrt::ops {

namespace {

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Optional int attribute: nullopt when absent.
Result<std::optional<int64_t>> optional_int(const graph::Node& node, std::string_view name) {
  if (!node.attrs.has(name)) return std::optional<int64_t>();
  Result<int64_t> v = node.attrs.get_int(name);
  if (!v.ok()) return attr_read_error(node, name, v.status());
  return std::optional<int64_t>(*v);
}

}  // namespace

// ---- GatherND ----

std::string GatherNDParams::to_string() const {
  return fmt::format("batch_dims={}", batch_dims);
}

Result<GatherNDParams> parse_gather_nd_params(const graph::Node& node) {
  Result<int64_t> batch_dims = node.attrs.get_int("batch_dims", 0);
  if (!batch_dims.ok()) return attr_read_error(node, "batch_dims", batch_dims.status());
  if (*batch_dims < 0) return attr_error(node, "batch_dims", fmt::format("= {} must be >= 0", *batch_dims));
  GatherNDParams params;
  params.batch_dims = *batch_dims;
  return params;
}

// ---- ScatterElements, ScatterND ----

std::string_view scatter_reduction_name(ScatterReduction reduction) {
  switch (reduction) {
    case ScatterReduction::kNone: return "none";
    case ScatterReduction::kAdd: return "add";
    case ScatterReduction::kMul: return "mul";
  }
  return "?";
}

std::string ScatterParams::to_string() const {
  return fmt::format("axis={},reduction={}", axis, scatter_reduction_name(reduction));
}

Result<ScatterParams> parse_scatter_params(const graph::Node& node, bool with_axis) {
  ScatterParams params;
  if (with_axis) {
    Result<int64_t> axis = node.attrs.get_int("axis", 0);
    if (!axis.ok()) return attr_read_error(node, "axis", axis.status());
    params.axis = *axis;
  }
  Result<std::string> reduction = node.attrs.get_string("reduction", "none");
  if (!reduction.ok()) return attr_read_error(node, "reduction", reduction.status());
  if (*reduction == "none") {
    params.reduction = ScatterReduction::kNone;
  } else if (*reduction == "add") {
    params.reduction = ScatterReduction::kAdd;
  } else if (*reduction == "mul") {
    params.reduction = ScatterReduction::kMul;
  } else {
    return attr_error(node, "reduction", fmt::format("= \"{}\" must be \"none\", \"add\" or \"mul\"", *reduction));
  }
  return params;
}

// ---- Compress ----

std::string CompressParams::to_string() const {
  return axis ? fmt::format("axis={}", *axis) : "axis=flatten";
}

Result<CompressParams> parse_compress_params(const graph::Node& node) {
  CompressParams params;
  HXRT_ASSIGN_OR_RETURN(params.axis, optional_int(node, "axis"));
  return params;
}

Result<std::vector<int64_t>> compress_selection(std::span<const std::byte> condition, int64_t length) {
  std::vector<int64_t> selected;
  for (size_t i = 0; i < condition.size(); ++i) {
    if (condition[i] == std::byte{0}) continue;
    const auto position = static_cast<int64_t>(i);
    if (position >= length) {
      return invalid_argument("condition[{}] is true but the axis has only {} elements", position, length);
    }
    selected.push_back(position);
  }
  return selected;
}

// ---- NonZero ----

bool element_is_nonzero(DType dtype, const std::byte* element) {
  switch (dtype) {
    case DType::kF32: return load<float>(element) != 0.0f;
    case DType::kF16: return f16_to_f32(load<uint16_t>(element)) != 0.0f;
    case DType::kBF16: return bf16_to_f32(load<uint16_t>(element)) != 0.0f;
    default: break;
  }
  const uint32_t bytes = dtype_info(dtype).block_bytes;
  for (uint32_t b = 0; b < bytes; ++b) {
    if (element[b] != std::byte{0}) return true;
  }
  return false;
}

std::vector<int64_t> nonzero_positions(DType dtype, const std::byte* data, int64_t n) {
  const auto bytes = static_cast<int64_t>(dtype_info(dtype).block_bytes);
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < n; ++i) {
    if (element_is_nonzero(dtype, data + i * bytes)) positions.push_back(i);
  }
  return positions;
}

// ---- Unique ----

std::string UniqueParams::to_string() const {
  return fmt::format("axis={},sorted={}", axis ? fmt::format("{}", *axis) : "flatten", sorted ? 1 : 0);
}

Result<UniqueParams> parse_unique_params(const graph::Node& node) {
  UniqueParams params;
  HXRT_ASSIGN_OR_RETURN(params.axis, optional_int(node, "axis"));
  Result<int64_t> sorted = node.attrs.get_int("sorted", 1);
  if (!sorted.ok()) return attr_read_error(node, "sorted", sorted.status());
  if (*sorted != 0 && *sorted != 1) return attr_error(node, "sorted", fmt::format("= {} must be 0 or 1", *sorted));
  params.sorted = *sorted == 1;
  return params;
}

namespace {

// Note [Unique over slices]
// Slice s of a [outer, count, inner] tensor is the outer x inner elements (o, s, i). Slices are ordered
// lexicographically by their elements in row-major order (numpy.unique(axis=...) orders them so), and equal when
// every element compares equal. A stable sort of the slice indices keeps equal slices in order of occurrence, so
// the first of each run is the first occurrence.
template <typename T>
UniqueResult unique_typed(const std::byte* data, int64_t outer, int64_t count, int64_t inner, bool sorted) {
  // Element (o, s, i) as a comparable value.
  auto at = [&](int64_t o, int64_t s, int64_t i) -> T {
    return load<T>(data + ((o * count + s) * inner + i) * static_cast<int64_t>(sizeof(T)));
  };
  // -1, 0, 1 as slice a orders before, equal to, after slice b.
  auto compare = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T x = at(o, a, i);
        const T y = at(o, b, i);
        if (x < y) return -1;
        if (y < x) return 1;
      }
    }
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(count));  // (count) slice indices, equal slices adjacent
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return compare(a, b) < 0; });

  // Runs of equal slices, in sorted order: their first occurrence and size.
  std::vector<int64_t> run_first;
  std::vector<int64_t> run_count;
  std::vector<int64_t> run_of(static_cast<size_t>(count));  // (count) run of each input slice
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compare(order[k - 1], order[k]) != 0) {
      run_first.push_back(order[k]);
      run_count.push_back(0);
    }
    run_of[static_cast<size_t>(order[k])] = static_cast<int64_t>(run_first.size()) - 1;
    ++run_count.back();
  }

  // Output position of each run: the sorted order, or the order of first occurrence.
  std::vector<int64_t> position(run_first.size());
  std::iota(position.begin(), position.end(), int64_t{0});
  if (!sorted) {
    std::vector<int64_t> by_first(run_first.size());
    std::iota(by_first.begin(), by_first.end(), int64_t{0});
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
      return run_first[static_cast<size_t>(a)] < run_first[static_cast<size_t>(b)];
    });
    for (size_t p = 0; p < by_first.size(); ++p) position[static_cast<size_t>(by_first[p])] = static_cast<int64_t>(p);
  }

  UniqueResult result;
  result.first.resize(run_first.size());
  result.counts.resize(run_first.size());
  for (size_t r = 0; r < run_first.size(); ++r) {
    const auto p = static_cast<size_t>(position[r]);
    result.first[p] = run_first[r];
    result.counts[p] = run_count[r];
  }
  result.inverse.resize(static_cast<size_t>(count));
  for (size_t s = 0; s < result.inverse.size(); ++s) {
    result.inverse[s] = position[static_cast<size_t>(run_of[s])];
  }
  return result;
}

// f16 and bf16 compare through their float values.
struct F16Value {
  uint16_t bits;
  bool operator<(const F16Value& other) const { return f16_to_f32(bits) < f16_to_f32(other.bits); }
};
struct BF16Value {
  uint16_t bits;
  bool operator<(const BF16Value& other) const { return bf16_to_f32(bits) < bf16_to_f32(other.bits); }
};

}  // namespace

Result<UniqueResult> unique_slices(DType dtype, const std::byte* data, int64_t outer, int64_t count, int64_t inner,
                                   bool sorted) {
  switch (dtype) {
    case DType::kF32: return unique_typed<float>(data, outer, count, inner, sorted);
    case DType::kF16: return unique_typed<F16Value>(data, outer, count, inner, sorted);
    case DType::kBF16: return unique_typed<BF16Value>(data, outer, count, inner, sorted);
    case DType::kI8: return unique_typed<int8_t>(data, outer, count, inner, sorted);
    case DType::kU8:
    case DType::kBool: return unique_typed<uint8_t>(data, outer, count, inner, sorted);
    case DType::kI32: return unique_typed<int32_t>(data, outer, count, inner, sorted);
    case DType::kI64: return unique_typed<int64_t>(data, outer, count, inner, sorted);
    default: return invalid_argument("Unique: dtype {} is not supported", dtype);
  }
}

// ---- ReverseSequence ----

std::string ReverseSequenceParams::to_string() const {
  return fmt::format("batch_axis={},time_axis={}", batch_axis, time_axis);
}

Result<ReverseSequenceParams> parse_reverse_sequence_params(const graph::Node& node) {
  ReverseSequenceParams params;
  Result<int64_t> batch_axis = node.attrs.get_int("batch_axis", 1);
  if (!batch_axis.ok()) return attr_read_error(node, "batch_axis", batch_axis.status());
  Result<int64_t> time_axis = node.attrs.get_int("time_axis", 0);
  if (!time_axis.ok()) return attr_read_error(node, "time_axis", time_axis.status());
  if (*batch_axis != 0 && *batch_axis != 1) {
    return attr_error(node, "batch_axis", fmt::format("= {} must be 0 or 1", *batch_axis));
  }
  if (*time_axis != 0 && *time_axis != 1) {
    return attr_error(node, "time_axis", fmt::format("= {} must be 0 or 1", *time_axis));
  }
  if (*batch_axis == *time_axis) {
    return attr_error(node, "time_axis", fmt::format("= {} must differ from batch_axis", *time_axis));
  }
  params.batch_axis = *batch_axis;
  params.time_axis = *time_axis;
  return params;
}

}  // namespace hxrt::ops
