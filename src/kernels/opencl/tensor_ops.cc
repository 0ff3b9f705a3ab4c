// OpenCL tensor ops: Reshape (a device-to-device copy on the stream, none when the planner made input and output one
// view) and Gather (a row copy by words: one work-item per word of a gathered row, any plain dtype or whole
// quantized rows).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr uint32_t kGroup = 256;

constexpr std::string_view kSource = R"CLC(
#ifndef WORD_BYTES
#define WORD_BYTES 4
#endif
#ifndef IDX_I64
#define IDX_I64 0
#endif
#if WORD_BYTES == 4
typedef uint word_t;
#elif WORD_BYTES == 2
typedef ushort word_t;
#else
typedef uchar word_t;
#endif

// y[o, k, :] = data[o, indices[k], :] for units u = o * n_indices + k, copied as words_per_row words per row.
__kernel void gather(__global const uchar* d_buf, ulong d_off, __global const uchar* i_buf, ulong i_off,
                     __global uchar* y_buf, ulong y_off, int n_units, int n_indices, int axis_dim, int words_per_row,
                     __global volatile int* ctl) {
  const int gid = get_global_id(0);
  if (gid >= n_units * words_per_row) return;
  const int unit = gid / words_per_row;
  const int word = gid % words_per_row;
  const int o = unit / n_indices;
  const int k = unit % n_indices;
#if IDX_I64
  long index = HX_AT(const long, i_buf, i_off)[k];
#else
  long index = HX_AT(const int, i_buf, i_off)[k];
#endif
  if (index < 0) index += axis_dim;
  if (index < 0 || index >= axis_dim) {
    ctl[1] = HX_OUT_OF_RANGE;
    return;
  }
  const ulong src = ((ulong)o * axis_dim + (ulong)index) * words_per_row + word;
  HX_AT(word_t, y_buf, y_off)[(ulong)gid] = HX_AT(const word_t, d_buf, d_off)[src];
}
)CLC";

struct AxisParams final : ops::KernelParams {
  explicit AxisParams(int64_t gather_axis) : axis(gather_axis) {}
  std::string to_string() const override { return fmt::format("axis={}", axis); }
  int64_t axis;
};

struct GatherGeometry {
  int64_t outer = 1, axis_dim = 0, n_indices = 0;
  uint64_t row_bytes = 0;
  int64_t units() const { return outer * n_indices; }
};

Result<GatherGeometry> gather_geometry(int64_t axis_attr, const ops::TensorRef& data, const ops::TensorRef& indices) {
  const int rank = data.shape.rank();
  if (axis_attr < -rank || axis_attr >= rank) return invalid_argument("Gather: axis {} out of range for rank {}", axis_attr, rank);
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  GatherGeometry g;
  int64_t inner = 1;
  for (int d = 0; d < axis; ++d) g.outer *= data.shape.dim(d);
  for (int d = axis + 1; d < rank; ++d) inner *= data.shape.dim(d);
  g.axis_dim = data.shape.dim(axis);
  g.n_indices = indices.num_elements();
  HXRT_ASSIGN_OR_RETURN(g.row_bytes, storage_bytes(data.dtype, static_cast<uint64_t>(inner)));
  HXRT_RETURN_IF_ERROR(check_int32(g.units() * static_cast<int64_t>(g.row_bytes), "Gather output bytes"));
  HXRT_RETURN_IF_ERROR(check_int32(g.outer * g.axis_dim, "Gather rows"));
  return g;
}

// The widest word (4, 2 or 1 bytes) dividing the row size and both byte offsets.
uint64_t word_bytes(uint64_t row_bytes, uint64_t data_offset, uint64_t out_offset) {
  for (uint64_t word : {4u, 2u}) {
    if (row_bytes % word == 0 && data_offset % word == 0 && out_offset % word == 0) return word;
  }
  return 1;
}

ops::KernelDef gather_kernel(std::shared_ptr<const JitProgram> program) {
  ops::KernelDef def = opencl_def("Gather", "", 13, "Gather", "row copy by 4/2/1-byte words, any plain dtype");
  def.input_dtypes = {{}, {DType::kI32, DType::kI64}};
  def.parse_attrs = [](const graph::Graph&, const graph::Node& node) -> Result<std::unique_ptr<ops::KernelParams>> {
    HXRT_ASSIGN_OR_RETURN(const int64_t axis, node.attrs.get_int("axis", 0));
    return std::unique_ptr<ops::KernelParams>(std::make_unique<AxisParams>(axis));
  };
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    HXRT_ASSIGN_OR_RETURN(const GatherGeometry g, gather_geometry(static_cast<const AxisParams&>(*query.params).axis,
                                                                  query.inputs[0], query.inputs[1]));
    const uint64_t word = word_bytes(g.row_bytes, 0, 0);  // views are aligned in practice; launch() re-checks
    ops::Tiling tiling;
    tiling.launch = launch_1d(g.units() * static_cast<int64_t>(g.row_bytes / word), kGroup);
    tiling.values = {{"wg", kGroup}, {"word_bytes", static_cast<int64_t>(word)}};
    return tiling;
  };
  def.launch = [program](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& data = launch.inputs[0];
    const ops::TensorRef& indices = launch.inputs[1];
    const ops::TensorRef& y = launch.outputs[0];
    HXRT_ASSIGN_OR_RETURN(const GatherGeometry g,
                          gather_geometry(static_cast<const AxisParams&>(*launch.params).axis, data, indices));
    if (g.units() == 0 || g.row_bytes == 0) return ok_status();
    const uint64_t word = word_bytes(g.row_bytes, data.view.offset, y.view.offset);
    const int64_t words_per_row = static_cast<int64_t>(g.row_bytes / word);
    const hal::LaunchConfig config = static_cast<int64_t>(word) == launch.tiling->get("word_bytes")
                                         ? launch.tiling->launch
                                         : launch_1d(g.units() * words_per_row, kGroup);
    std::vector<hal::KernelArg> args;
    add_tensor_arg(args, data);
    add_tensor_arg(args, indices);
    add_tensor_arg(args, y);
    for (int64_t v : {g.units(), g.n_indices, g.axis_dim, words_per_row}) {
      args.push_back(hal::KernelArg::scalar(static_cast<int32_t>(v)));
    }
    const std::string options =
        fmt::format("-D WORD_BYTES={} -D IDX_I64={}", word, indices.dtype == DType::kI64 ? 1 : 0);
    return launch_kernel(stream, *program, "gather", options, config, args);
  };
  return def;
}

ops::KernelDef reshape_kernel() {
  ops::KernelDef def = opencl_def("Reshape", "", 14, "Reshape", "device-to-device copy (none when input and output are one view)");
  def.input_dtypes = {{}, {DType::kI64}};
  def.tiling = [](const ops::TilingQuery& query) -> Result<ops::Tiling> {
    ops::Tiling tiling;
    HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(query.inputs[0].dtype,
                                                              static_cast<uint64_t>(query.inputs[0].num_elements())));
    tiling.values = {{"copy_bytes", static_cast<int64_t>(bytes)}};
    return tiling;
  };
  def.launch = [](hal::Stream& stream, const ops::KernelLaunch& launch) -> Status {
    const ops::TensorRef& x = launch.inputs[0];
    const ops::TensorRef& y = launch.outputs[0];
    if (x.num_elements() != y.num_elements()) {
      return invalid_argument("Reshape: input {} has {} elements but the output {} has {}", x.shape, x.num_elements(),
                              y.shape, y.num_elements());
    }
    HXRT_ASSIGN_OR_RETURN(const uint64_t bytes, storage_bytes(x.dtype, static_cast<uint64_t>(x.num_elements())));
    if (bytes == 0 || (x.view.buffer == y.view.buffer && x.view.offset == y.view.offset)) return ok_status();
    return stream.copy(y.view.subview(0, bytes), x.view.subview(0, bytes));
  };
  return def;
}

}  // namespace

Status register_tensor_ops(ops::KernelRegistry& registry) {
  auto program = std::make_shared<const JitProgram>("hxrt_tensor_ops", kSource);
  HXRT_RETURN_IF_ERROR(registry.add(gather_kernel(program)));
  return registry.add(reshape_kernel());
}

}  // namespace hxrt::kernels::opencl
