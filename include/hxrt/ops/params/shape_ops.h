// Params and shared algorithms of the shape and layout ops (docs/onnx_ops/shape_ops.md): Expand, Tile, Pad, Split,
// DepthToSpace, SpaceToDepth, Trilu, Range, ConstantOfShape, OneHot, Shape and Size. Squeeze, Unsqueeze, Flatten and
// Identity have no hxrt op: the ONNX importer turns them into Reshape (or a rename).
//
// The functions here are the one definition of each op's arithmetic that shape inference (src/ops/schemas/) and the
// kernels (src/kernels/<device>/) share: output counts of Range and Split, Pad's source index, Shape's slice, the
// six-dim view behind DepthToSpace and SpaceToDepth.
//
// Thread-safety: params are immutable after parsing; the functions are reentrant.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/params/common.h"

namespace hxrt::ops {

// ---- Pad (13) ----
// pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (negative values crop) and constant_value are inputs.
enum class PadMode : uint8_t { kConstant, kReflect, kEdge };
struct PadParams final : TypedParams<PadParams> {
  static constexpr std::string_view kName = "PadParams";
  PadMode mode = PadMode::kConstant;
  std::string to_string() const override;  // "mode=reflect"
};
// Attribute mode: "constant" (default), "reflect" or "edge".
Result<PadParams> parse_pad_params(const graph::Node& node);
// Output index `o` of an axis of `dim` elements padded by `before` and `after` reads source index
// pad_source_index(...), or -1 for the constant value. Negative pads crop first; reflect and edge then pad the cropped
// range (as the ONNX reference does). Requires a non-empty cropped range unless the mode is constant.
int64_t pad_source_index(PadMode mode, int64_t o, int64_t before, int64_t after, int64_t dim);
// The padded length of an axis; InvalidArgument when it is negative or when reflect/edge must pad an empty range.
Result<int64_t> padded_dim(PadMode mode, int64_t dim, int64_t before, int64_t after, int axis);

// ---- Split (13) ----
// Sizes of the `outputs` parts of an axis of `dim` elements: `split` when given (must sum to dim), else equal parts
// (dim must divide evenly). InvalidArgument otherwise.
Result<std::vector<int64_t>> split_sizes(int64_t dim, std::span<const int64_t> split, size_t outputs);
// The most outputs a Split node may have (the schema declares this many optional outputs).
inline constexpr size_t kMaxSplitOutputs = 64;

// ---- DepthToSpace (13), SpaceToDepth (13) ----
struct BlockParams final : TypedParams<BlockParams> {
  static constexpr std::string_view kName = "BlockParams";
  int64_t blocksize = 1;  // >= 1
  bool crd = false;       // DepthToSpace's mode: "DCR" (default) or "CRD"; SpaceToDepth has no mode
  std::string to_string() const override;  // "blocksize=2,mode=DCR"
};
// Attributes blocksize (required, >= 1) and, when `has_mode`, mode ("DCR" or "CRD").
Result<BlockParams> parse_block_params(const graph::Node& node, bool has_mode);
// Both ops are a transpose of a six-dim view of the input: output = transpose(x.reshape(view), perm) reshaped to
// the output. `x` is [N, C, H, W]; InvalidArgument when C (DepthToSpace) or H, W (SpaceToDepth) do not divide.
struct BlockView {
  std::array<int64_t, 6> view{};
  std::array<int64_t, 6> perm{};
  std::array<int64_t, 4> out{};  // [N, C', H', W']
};
Result<BlockView> depth_to_space_view(std::span<const int64_t> x, const BlockParams& params);
Result<BlockView> space_to_depth_view(std::span<const int64_t> x, const BlockParams& params);

// ---- Trilu (14) ----
// Keeps the elements of the last two dims with j - i >= k (upper) or j - i <= k (lower); k is an optional input.
struct TriluParams final : TypedParams<TriluParams> {
  static constexpr std::string_view kName = "TriluParams";
  bool upper = true;
  std::string to_string() const override;  // "upper=1"
};
Result<TriluParams> parse_trilu_params(const graph::Node& node);

// ---- Range (11) ----
// max(ceil((limit - start) / delta), 0) values; InvalidArgument for delta 0 or a non-finite count.
Result<int64_t> range_count(double start, double limit, double delta);
Result<int64_t> range_count(int64_t start, int64_t limit, int64_t delta);

// ---- ConstantOfShape (9) ----
struct ConstantOfShapeParams final : TypedParams<ConstantOfShapeParams> {
  static constexpr std::string_view kName = "ConstantOfShapeParams";
  graph::TensorValue value;  // one element; f32 0 by default
  std::string to_string() const override;  // "value=f32:0"
};
// Attribute value: a one-element tensor of a plain dtype (f32 0 when absent).
Result<ConstantOfShapeParams> parse_constant_of_shape_params(const graph::Node& node);

// ---- OneHot (11) ----
// AxisParams (attribute axis, default -1, counted in the output's rank). An index i of depth d addresses
// i (0 <= i < d) or i + d (-d <= i < 0); any other index yields a row of off values.
int64_t onehot_position(int64_t index, int64_t depth);

// ---- Shape (15) ----
struct ShapeParams final : TypedParams<ShapeParams> {
  static constexpr std::string_view kName = "ShapeParams";
  int64_t start = 0;
  std::optional<int64_t> end;  // none = the rank
  std::string to_string() const override;  // "start=1,end=-1"
};
Result<ShapeParams> parse_shape_params(const graph::Node& node);
// The dims [first, last) Shape returns for an input of `rank` (negative bounds count from the end, then clamp).
std::pair<int, int> shape_slice(const ShapeParams& params, int rank);

}  // namespace hxrt::ops
