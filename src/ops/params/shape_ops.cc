#include "hxrt/ops/params/shape_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace hxrt::ops {

// ---- Pad ----

std::string PadParams::to_string() const {
  switch (mode) {
    case PadMode::kConstant: return "mode=constant";
    case PadMode::kReflect: return "mode=reflect";
    case PadMode::kEdge: return "mode=edge";
  }
  return "mode=?";
}

Result<PadParams> parse_pad_params(const graph::Node& node) {
  Result<std::string> mode = node.attrs.get_string("mode", "constant");
  if (!mode.ok()) return attr_read_error(node, "mode", mode.status());
  PadParams params;
  if (*mode == "constant") {
    params.mode = PadMode::kConstant;
  } else if (*mode == "reflect") {
    params.mode = PadMode::kReflect;
  } else if (*mode == "edge") {
    params.mode = PadMode::kEdge;
  } else {
    return attr_error(node, "mode", fmt::format("= \"{}\" must be \"constant\", \"reflect\" or \"edge\"", *mode));
  }
  return params;
}

int64_t pad_source_index(PadMode mode, int64_t o, int64_t before, int64_t after, int64_t dim) {
  if (mode == PadMode::kConstant) {
    const int64_t i = o - before;
    return i >= 0 && i < dim ? i : -1;
  }
  // Crop first: the kept source range is [lo, lo + length), padded by max(before, 0) in front.
  const int64_t lo = std::max<int64_t>(0, -before);
  const int64_t length = dim - lo - std::max<int64_t>(0, -after);
  int64_t i = o - std::max<int64_t>(0, before);
  if (i >= 0 && i < length) return lo + i;
  if (mode == PadMode::kEdge || length == 1) return lo + std::clamp<int64_t>(i, 0, length - 1);
  const int64_t period = 2 * (length - 1);  // reflect without repeating the edge, as numpy's "reflect"
  i %= period;
  if (i < 0) i += period;
  return lo + (i < length ? i : period - i);
}

Result<int64_t> padded_dim(PadMode mode, int64_t dim, int64_t before, int64_t after, int axis) {
  const int64_t out = dim + before + after;
  if (out < 0) {
    return invalid_argument("Pad: axis {} of {} elements padded by {} and {} has a negative length", axis, dim, before,
                            after);
  }
  const int64_t kept = dim - std::max<int64_t>(0, -before) - std::max<int64_t>(0, -after);
  if (mode != PadMode::kConstant && (before > 0 || after > 0) && kept <= 0) {
    return invalid_argument("Pad: axis {} has no elements to pad from in mode {}", axis,
                            mode == PadMode::kEdge ? "edge" : "reflect");
  }
  return out;
}

// ---- Split ----

Result<std::vector<int64_t>> split_sizes(int64_t dim, std::span<const int64_t> split, size_t outputs) {
  if (outputs == 0 || outputs > kMaxSplitOutputs) {
    return invalid_argument("Split: {} outputs (1 to {} are supported)", outputs, kMaxSplitOutputs);
  }
  if (!split.empty()) {
    if (split.size() != outputs) {
      return invalid_argument("Split: 'split' [{}] has {} sizes for {} outputs", fmt::join(split, ", "), split.size(),
                              outputs);
    }
    int64_t total = 0;
    for (int64_t s : split) {
      if (s < 0) return invalid_argument("Split: 'split' [{}] has a negative size", fmt::join(split, ", "));
      total += s;
    }
    if (total != dim) {
      return invalid_argument("Split: 'split' [{}] sums to {}, the axis has {}", fmt::join(split, ", "), total, dim);
    }
    return std::vector<int64_t>(split.begin(), split.end());
  }
  const auto n = static_cast<int64_t>(outputs);
  if (dim % n != 0) return invalid_argument("Split: an axis of {} does not split into {} equal parts", dim, n);
  return std::vector<int64_t>(outputs, dim / n);
}

// ---- DepthToSpace, SpaceToDepth ----

std::string BlockParams::to_string() const {
  return fmt::format("blocksize={},mode={}", blocksize, crd ? "CRD" : "DCR");
}

Result<BlockParams> parse_block_params(const graph::Node& node, bool has_mode) {
  Result<int64_t> blocksize = node.attrs.get_int("blocksize");
  if (!blocksize.ok()) return attr_read_error(node, "blocksize", blocksize.status());
  if (*blocksize < 1) return attr_error(node, "blocksize", fmt::format("= {} must be >= 1", *blocksize));
  BlockParams params;
  params.blocksize = *blocksize;
  if (has_mode) {
    Result<std::string> mode = node.attrs.get_string("mode", "DCR");
    if (!mode.ok()) return attr_read_error(node, "mode", mode.status());
    if (*mode != "DCR" && *mode != "CRD") {
      return attr_error(node, "mode", fmt::format("= \"{}\" must be \"DCR\" or \"CRD\"", *mode));
    }
    params.crd = *mode == "CRD";
  }
  return params;
}

Result<BlockView> depth_to_space_view(std::span<const int64_t> x, const BlockParams& params) {
  if (x.size() != 4) return invalid_argument("DepthToSpace: input must have rank 4, got {}", x.size());
  const int64_t b = params.blocksize;
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  if (c % (b * b) != 0) {
    return invalid_argument("DepthToSpace: {} channels are not a multiple of blocksize² = {}", c, b * b);
  }
  const int64_t c_out = c / (b * b);
  BlockView v;
  if (params.crd) {
    v.view = {n, c_out, b, b, h, w};
    v.perm = {0, 1, 4, 2, 5, 3};
  } else {
    v.view = {n, b, b, c_out, h, w};
    v.perm = {0, 3, 4, 1, 5, 2};
  }
  v.out = {n, c_out, h * b, w * b};
  return v;
}

Result<BlockView> space_to_depth_view(std::span<const int64_t> x, const BlockParams& params) {
  if (x.size() != 4) return invalid_argument("SpaceToDepth: input must have rank 4, got {}", x.size());
  const int64_t b = params.blocksize;
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  if (h % b != 0 || w % b != 0) {
    return invalid_argument("SpaceToDepth: spatial dims {} x {} are not multiples of blocksize {}", h, w, b);
  }
  BlockView v;
  v.view = {n, c, h / b, b, w / b, b};
  v.perm = {0, 3, 5, 1, 2, 4};
  v.out = {n, c * b * b, h / b, w / b};
  return v;
}

// ---- Trilu ----

std::string TriluParams::to_string() const {
  return fmt::format("upper={}", upper ? 1 : 0);
}

Result<TriluParams> parse_trilu_params(const graph::Node& node) {
  Result<int64_t> upper = node.attrs.get_int("upper", 1);
  if (!upper.ok()) return attr_read_error(node, "upper", upper.status());
  if (*upper != 0 && *upper != 1) return attr_error(node, "upper", fmt::format("= {} must be 0 or 1", *upper));
  TriluParams params;
  params.upper = *upper == 1;
  return params;
}

// ---- Range ----

Result<int64_t> range_count(double start, double limit, double delta) {
  if (delta == 0.0) return invalid_argument("Range: delta is 0");
  const double count = std::ceil((limit - start) / delta);
  if (!std::isfinite(count) || count > static_cast<double>(std::numeric_limits<int32_t>::max())) {
    return invalid_argument("Range: start {}, limit {}, delta {} give {} values", start, limit, delta, count);
  }
  return std::max<int64_t>(0, static_cast<int64_t>(count));
}

Result<int64_t> range_count(int64_t start, int64_t limit, int64_t delta) {
  if (delta == 0) return invalid_argument("Range: delta is 0");
  // ceil((limit - start) / delta) in integers, for either sign of delta.
  const int64_t span = limit - start;
  int64_t count = span / delta;
  if (span % delta != 0 && ((span < 0) == (delta < 0))) ++count;
  return std::max<int64_t>(0, count);
}

// ---- ConstantOfShape ----

std::string ConstantOfShapeParams::to_string() const {
  const auto bytes = std::span<const std::byte>(value.data);
  std::string hex;
  for (std::byte b : bytes) hex += fmt::format("{:02x}", static_cast<unsigned>(b));
  return fmt::format("value={}:0x{}", dtype_name(value.dtype), hex);
}

Result<ConstantOfShapeParams> parse_constant_of_shape_params(const graph::Node& node) {
  ConstantOfShapeParams params;
  if (!node.attrs.has("value")) {
    params.value = graph::TensorValue{.dtype = DType::kF32, .shape = Shape({1})};
    params.value.data.assign(sizeof(float), std::byte{0});
    return params;
  }
  Result<graph::TensorValue> value = node.attrs.get_tensor("value");
  if (!value.ok()) return attr_read_error(node, "value", value.status());
  const DTypeInfo& info = dtype_info(value->dtype);
  if (info.block_elements != 1) {
    return attr_error(node, "value", fmt::format("has the block-quantized dtype {}", value->dtype));
  }
  if (value->shape.num_elements() != 1 || value->data.size() != info.block_bytes) {
    return attr_error(node, "value", fmt::format("must hold one element, holds {} {}", value->dtype, value->shape));
  }
  params.value = std::move(value).value();
  return params;
}

// ---- OneHot ----

int64_t onehot_position(int64_t index, int64_t depth) {
  if (index < 0) index += depth;
  return index >= 0 && index < depth ? index : -1;
}

// ---- Shape ----

std::string ShapeParams::to_string() const {
  return end ? fmt::format("start={},end={}", start, *end) : fmt::format("start={}", start);
}

Result<ShapeParams> parse_shape_params(const graph::Node& node) {
  ShapeParams params;
  Result<int64_t> start = node.attrs.get_int("start", 0);
  if (!start.ok()) return attr_read_error(node, "start", start.status());
  params.start = *start;
  if (node.attrs.has("end")) {
    Result<int64_t> end = node.attrs.get_int("end");
    if (!end.ok()) return attr_read_error(node, "end", end.status());
    params.end = *end;
  }
  return params;
}

std::pair<int, int> shape_slice(const ShapeParams& params, int rank) {
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return static_cast<int>(std::clamp<int64_t>(v, 0, rank));
  };
  const int first = clamp(params.start);
  const int last = params.end ? clamp(*params.end) : rank;
  return {first, std::max(first, last)};
}

}  // namespace hxrt::ops
