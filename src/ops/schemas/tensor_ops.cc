// Schemas of the tensor ops (docs/ops.md, "Tensor ops"): Gather, Reshape, Transpose, Concat and Slice.
//
// Note [Symbolic Reshape]
// Reshape's target shape is a constant. A 0 copies the input dim (symbolic or not); the -1 dim is the input's
// element count divided by the other output dims, computed on factors: symbolic dims present on both sides cancel
// (n_tokens · 576 over 9 · 64 gives n_tokens · 1) and the static parts divide exactly, so [n_tokens, 576] reshaped
// to [-1, 9, 64] is [n_tokens, 9, 64] and not an opaque quotient. When the factors do not cancel, the -1 dim
// becomes the symbolic quotient and the kernel checks the element count at run time.
//
// Note [Symbolic Slice]
// On a static axis Slice follows ONNX exactly (negative bounds, clamping, negative steps). On a symbolic axis of
// length D only positive steps are supported, and the bounds are assumed not to need clamping:
//   start >= 0, end "to the end" (end >= 2^31 - 1)  → ceil((D - start) / step)
//   start >= 0, 0 <= end < 2^31 - 1                 → ceil((end - start) / step)            (assumes D >= end)
//   start >= 0, end < 0                             → ceil((D - start + end) / step)
//   start < 0, end "to the end"                     → ceil(-start / step)                  (assumes D >= -start)
//   start < 0, end < 0                              → ceil((end - start) / step)           (assumes D >= -start)
// start < 0 with a non-negative finite end depends on D and is rejected. The CPU kernel recomputes the exact
// slice from the bound shape and fails when an assumption did not hold.

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ops/schemas/schemas.h"

namespace hxrt::ops::schemas {

namespace {

// "end >= this" on a symbolic axis means "to the end" (exporters write INT32_MAX or INT64_MAX).
constexpr int64_t kSliceToEnd = 2147483647;

const std::vector<DType>& all_types() {
  static const std::vector<DType> types = [] {
    std::vector<DType> out;
    for (int i = 0; i < kDTypeCount; ++i) out.push_back(static_cast<DType>(i));
    return out;
  }();
  return types;
}

// The values of constant input `i` (i32 or i64, rank 1); the error names the input.
Result<std::vector<int64_t>> constant_ints(InferenceContext& ctx, size_t i, std::string_view name) {
  HXRT_ASSIGN_OR_RETURN(const graph::WeightData* weight, require_constant(ctx, i, name));
  const graph::TensorDesc& desc = ctx.input(i);
  if (desc.shape.rank() != 1) {
    return ctx.error(fmt::format("input '{}' {} must have rank 1", name, desc.to_string()));
  }
  const size_t element = desc.dtype == DType::kI64 ? 8 : desc.dtype == DType::kI32 ? 4 : 0;
  if (element == 0) return ctx.error(fmt::format("input '{}' must be i32 or i64, got {}", name, desc.dtype));
  const graph::Dim& length = desc.shape.dim(0);
  if (!length.is_static() || weight->size != static_cast<uint64_t>(length.value()) * element) {
    return ctx.error(fmt::format("input '{}' {} holds {} bytes", name, desc.to_string(), weight->size));
  }
  return weight_ints(*weight, desc.dtype, static_cast<size_t>(length.value()));
}

graph::Dim product(const std::vector<graph::Dim>& dims) {
  graph::Dim p(1);
  for (const graph::Dim& d : dims) p = p * d;
  return p;
}

// A product of dims as a constant times a list of symbolic dims (Note [Symbolic Reshape]).
struct Factors {
  int64_t constant = 1;
  std::vector<graph::Dim> symbols;
  bool overflow = false;  // the static dims' product does not fit int64_t
};

Factors factor(const std::vector<graph::Dim>& dims) {
  Factors f;
  for (const graph::Dim& d : dims) {
    if (d.is_static()) {
      f.overflow = f.overflow || __builtin_mul_overflow(f.constant, d.value(), &f.constant);
    } else {
      f.symbols.push_back(d);
    }
  }
  return f;
}

// Removes every symbolic dim present in both (structurally equal), once per occurrence.
void cancel(Factors& a, Factors& b) {
  for (auto it = b.symbols.begin(); it != b.symbols.end();) {
    auto match = std::find(a.symbols.begin(), a.symbols.end(), *it);
    if (match != a.symbols.end()) {
      a.symbols.erase(match);
      it = b.symbols.erase(it);
    } else {
      ++it;
    }
  }
}

Status infer_reshape(InferenceContext& ctx) {
  const graph::TensorDesc& in = ctx.input(0);
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> target, constant_ints(ctx, 1, "shape"));
  Result<int64_t> allowzero = ctx.attrs().get_int("allowzero", 0);
  if (!allowzero.ok()) return ctx.error(fmt::format("attribute 'allowzero': {}", allowzero.status().message()));
  if (target.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return ctx.error(
        fmt::format("input 'shape' has {} dims; at most {} are supported", target.size(), Shape::kMaxRank));
  }
  std::vector<graph::Dim> out(target.size());
  std::vector<graph::Dim> known;  // every output dim but the -1
  std::optional<size_t> inferred;
  bool has_zero = false;
  for (size_t k = 0; k < target.size(); ++k) {
    const int64_t v = target[k];
    if (v == -1) {
      if (inferred) return ctx.error(fmt::format("input 'shape' [{}] has more than one -1", fmt::join(target, ", ")));
      inferred = k;
      continue;
    }
    if (v < -1) return ctx.error(fmt::format("input 'shape' [{}] has the invalid dim {}", fmt::join(target, ", "), v));
    if (v == 0 && allowzero.value() == 0) {
      if (static_cast<int>(k) >= in.shape.rank()) {
        return ctx.error(fmt::format("input 'shape' [{}]: dim {} is 0 (copy) but the input {} has rank {}",
                                     fmt::join(target, ", "), k, in.shape.to_string(), in.shape.rank()));
      }
      out[k] = in.shape.dims()[k];
    } else {
      has_zero = has_zero || v == 0;
      out[k] = graph::Dim(v);
    }
    known.push_back(out[k]);
  }
  if (has_zero && inferred) {
    return ctx.error(fmt::format("input 'shape' [{}] has both a 0 (allowzero=1) and a -1", fmt::join(target, ", ")));
  }
  Factors fin = factor(in.shape.dims());
  Factors fout = factor(known);
  if (fin.overflow || fout.overflow) {
    return ctx.error(fmt::format("cannot reshape {} to [{}]: the element count overflows int64",
                                 in.shape.to_string(), fmt::join(target, ", ")));
  }
  cancel(fin, fout);
  if (inferred) {
    if (fout.symbols.empty() && fout.constant != 0 && fin.constant % fout.constant == 0) {
      out[*inferred] = product(fin.symbols) * graph::Dim(fin.constant / fout.constant);
    } else if (fout.symbols.empty() && fin.symbols.empty()) {
      return ctx.error(fmt::format("cannot reshape {} ({} elements) to [{}]", in.shape.to_string(),
                                   in.shape.num_elements().to_string(), fmt::join(target, ", ")));
    } else {
      out[*inferred] = in.shape.num_elements() / product(known);  // checked by the kernel at run time
    }
  } else if (fin.symbols.empty() && fout.symbols.empty()) {
    if (fin.constant != fout.constant) {
      return ctx.error(fmt::format("cannot reshape {} to [{}]: element counts differ", in.shape.to_string(),
                                   fmt::join(target, ", ")));
    }
  } else {
    HXRT_RETURN_IF_ERROR(ctx.require_equal(in.shape.num_elements(), product(out),
                                           fmt::format("Reshape '{}': element count of {} vs [{}]", ctx.node().name,
                                                       in.shape.to_string(), fmt::join(target, ", "))));
  }
  ctx.set_output(0, graph::TensorDesc{in.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_transpose(InferenceContext& ctx) {
  const graph::TensorDesc& in = ctx.input(0);
  const int rank = in.shape.rank();
  std::vector<int64_t> perm;
  if (ctx.attrs().has("perm")) {
    Result<std::vector<int64_t>> p = ctx.attrs().get_ints("perm");
    if (!p.ok()) return ctx.error(fmt::format("attribute 'perm': {}", p.status().message()));
    perm = std::move(p).value();
  } else {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool valid = static_cast<int>(perm.size()) == rank;
  for (size_t i = 0; valid && i < perm.size(); ++i) {
    valid = perm[i] >= 0 && perm[i] < rank && !seen[static_cast<size_t>(perm[i])];
    if (valid) seen[static_cast<size_t>(perm[i])] = true;
  }
  if (!valid) {
    return ctx.error(fmt::format("attribute 'perm' [{}] is not a permutation of the {} dims of {}",
                                 fmt::join(perm, ", "), rank, in.to_string()));
  }
  std::vector<graph::Dim> out;
  for (int64_t p : perm) out.push_back(in.shape.dims()[static_cast<size_t>(p)]);
  ctx.set_output(0, graph::TensorDesc{in.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_concat(InferenceContext& ctx) {
  if (ctx.num_inputs() == 0) return ctx.error("needs at least one input");
  const graph::TensorDesc& first = ctx.input(0);
  const int rank = first.shape.rank();
  if (rank == 0) return ctx.error("inputs must have rank >= 1");
  Result<int64_t> axis_attr = ctx.attrs().get_int("axis");
  if (!axis_attr.ok()) return ctx.error(fmt::format("attribute 'axis': {}", axis_attr.status().message()));
  HXRT_ASSIGN_OR_RETURN(const int axis, axis_value(ctx, axis_attr.value(), rank, "attribute 'axis'"));
  std::vector<graph::Dim> out = first.shape.dims();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const graph::TensorDesc& in = ctx.input(i);
    if (in.dtype != first.dtype) {
      return ctx.error(fmt::format("input {} has dtype {}, input 0 has {}", i, in.dtype, first.dtype));
    }
    if (in.shape.rank() != rank) {
      return ctx.error(fmt::format("input {} {} has rank {}, input 0 {} has rank {}", i, in.shape.to_string(),
                                   in.shape.rank(), first.shape.to_string(), rank));
    }
    for (int d = 0; d < rank; ++d) {
      const graph::Dim& di = in.shape.dims()[static_cast<size_t>(d)];
      if (d == axis) {
        out[static_cast<size_t>(d)] = out[static_cast<size_t>(d)] + di;
        continue;
      }
      const graph::Dim& d0 = first.shape.dims()[static_cast<size_t>(d)];
      if (d0.is_static() && di.is_static() && d0.value() != di.value()) {
        return ctx.error(fmt::format("input {} {} does not match input 0 {} on axis {} (only axis {} may differ)", i,
                                     in.shape.to_string(), first.shape.to_string(), d, axis));
      }
      HXRT_RETURN_IF_ERROR(
          ctx.require_equal(d0, di, fmt::format("Concat '{}': dim {} of input {} vs input 0", ctx.node().name, d, i)));
    }
  }
  ctx.set_output(0, graph::TensorDesc{first.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

Status infer_gather(InferenceContext& ctx) {
  const graph::TensorDesc& data = ctx.input(0);
  const graph::TensorDesc& indices = ctx.input(1);
  const int rank = data.shape.rank();
  if (rank == 0) return ctx.error("input 'data' must have rank >= 1");
  Result<int64_t> axis_attr = ctx.attrs().get_int("axis", 0);
  if (!axis_attr.ok()) return ctx.error(fmt::format("attribute 'axis': {}", axis_attr.status().message()));
  HXRT_ASSIGN_OR_RETURN(const int axis, axis_value(ctx, axis_attr.value(), rank, "attribute 'axis'"));
  const DTypeInfo& info = dtype_info(data.dtype);
  if (info.is_quantized) {
    // Quantized rows are gathered whole: the gathered slab must be whole blocks.
    const graph::Dim& last = data.shape.dim(-1);
    if (axis == rank - 1 || !last.is_static() || last.value() % info.block_elements != 0) {
      return ctx.error(fmt::format("gathering {} on axis {} splits its {}-element blocks", data.to_string(), axis,
                                   info.block_elements));
    }
  }
  std::vector<graph::Dim> out(data.shape.dims().begin(), data.shape.dims().begin() + axis);
  out.insert(out.end(), indices.shape.dims().begin(), indices.shape.dims().end());
  out.insert(out.end(), data.shape.dims().begin() + axis + 1, data.shape.dims().end());
  if (out.size() > static_cast<size_t>(Shape::kMaxRank)) {
    return ctx.error(fmt::format("output rank {} exceeds {}", out.size(), Shape::kMaxRank));
  }
  ctx.set_output(0, graph::TensorDesc{data.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

// Exact ONNX slice length on a static axis.
int64_t static_slice_length(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end - step - 1) / (-step) : 0;
}

int64_t ceil_div_nonneg(int64_t a, int64_t b) {
  return a > 0 ? (a + b - 1) / b : 0;
}

// Slice length on a symbolic axis (Note [Symbolic Slice]).
Result<graph::Dim> symbolic_slice_length(InferenceContext& ctx, const graph::Dim& dim, int axis, int64_t start,
                                         int64_t end, int64_t step) {
  auto unsupported = [&](std::string_view why) {
    return ctx.error(fmt::format("slicing symbolic axis {} ({}) with start {}, end {}, step {}: {}", axis,
                                 dim.to_string(), start, end, step, why));
  };
  if (step < 0) return unsupported("negative steps need a static axis");
  const bool to_end = end >= kSliceToEnd;
  auto strided = [step](const graph::Dim& length) {
    return step == 1 ? length : (length + graph::Dim(step - 1)) / graph::Dim(step);
  };
  if (start >= 0) {
    if (to_end) return strided(dim - graph::Dim(start));
    if (end >= 0) return graph::Dim(ceil_div_nonneg(end - start, step));
    return strided(dim - graph::Dim(start - end));
  }
  if (to_end) return graph::Dim(ceil_div_nonneg(-start, step));
  if (end < 0) return graph::Dim(ceil_div_nonneg(end - start, step));
  return unsupported("a negative start with a non-negative end depends on the axis length");
}

Status infer_slice(InferenceContext& ctx) {
  const graph::TensorDesc& data = ctx.input(0);
  const int rank = data.shape.rank();
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> starts, constant_ints(ctx, 1, "starts"));
  HXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> ends, constant_ints(ctx, 2, "ends"));
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    HXRT_ASSIGN_OR_RETURN(axes, constant_ints(ctx, 3, "axes"));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> steps(starts.size(), 1);
  if (ctx.has_input(4)) {
    HXRT_ASSIGN_OR_RETURN(steps, constant_ints(ctx, 4, "steps"));
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.error(fmt::format("inputs 'starts', 'ends', 'axes', 'steps' have {}, {}, {}, {} values (must match)",
                                 starts.size(), ends.size(), axes.size(), steps.size()));
  }
  std::vector<graph::Dim> out = data.shape.dims();
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    HXRT_ASSIGN_OR_RETURN(const int axis, axis_value(ctx, axes[i], rank, fmt::format("input 'axes'[{}]", i)));
    if (seen[static_cast<size_t>(axis)]) return ctx.error(fmt::format("input 'axes' repeats axis {}", axis));
    seen[static_cast<size_t>(axis)] = true;
    if (steps[i] == 0) return ctx.error(fmt::format("input 'steps'[{}] is 0", i));
    const graph::Dim& dim = data.shape.dims()[static_cast<size_t>(axis)];
    if (dim.is_static()) {
      out[static_cast<size_t>(axis)] = graph::Dim(static_slice_length(dim.value(), starts[i], ends[i], steps[i]));
    } else {
      HXRT_ASSIGN_OR_RETURN(out[static_cast<size_t>(axis)],
                            symbolic_slice_length(ctx, dim, axis, starts[i], ends[i], steps[i]));
    }
  }
  ctx.set_output(0, graph::TensorDesc{data.dtype, graph::SymShape(std::move(out))});
  return ok_status();
}

}  // namespace

// MemcpyToHost / MemcpyFromHost: the copies the planner puts on edges between a device and its host fallback
// (Note [Heterogeneous split] in runtime/execution_plan.cc). The output is the input, on the other side.
OpSchema memcpy_schema(std::string op_type, std::string doc) {
  OpSchema schema;
  schema.op_type = std::move(op_type);
  schema.domain = "hxrt";
  schema.since_version = 1;
  schema.inputs = {{.name = "input"}};
  schema.outputs = {{.name = "output"}};
  schema.type_constraints = {{"T", all_types()}};
  schema.infer = [](InferenceContext& ctx) {
    ctx.set_output(0, ctx.input(0));
    return ok_status();
  };
  schema.doc = std::move(doc);
  return schema;
}

Status register_tensor_ops(OpSchemaRegistry& registry) {
  HXRT_RETURN_IF_ERROR(registry.add(memcpy_schema(
      "MemcpyToHost", "copies a device tensor into host memory for a node placed on the host fallback device")));
  HXRT_RETURN_IF_ERROR(registry.add(memcpy_schema(
      "MemcpyFromHost", "copies a tensor a host fallback node produced into device memory")));

  OpSchema gather;
  gather.op_type = "Gather";
  gather.since_version = 13;
  gather.inputs = {{.name = "data"}, {.name = "indices", .type_var = "Tind"}};
  gather.outputs = {{.name = "output"}};
  gather.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  gather.type_constraints = {{"T", all_types()}, {"Tind", index_types()}};
  gather.infer = infer_gather;
  gather.doc = "ONNX Gather; negative indices count from the end, an out-of-range index is a kernel error";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(gather)));

  OpSchema reshape;
  reshape.op_type = "Reshape";
  reshape.since_version = 14;
  reshape.inputs = {{.name = "data"}, {.name = "shape", .type_var = "Tshape"}};
  reshape.outputs = {{.name = "reshaped"}};
  reshape.attrs = {{.name = "allowzero", .type = graph::AttrType::kInt, .default_value = graph::Attribute(0)}};
  reshape.type_constraints = {{"T", plain_types()}, {"Tshape", {DType::kI64}}};
  reshape.infer = infer_reshape;
  reshape.doc = "ONNX Reshape with a constant shape: 0 copies the input dim (allowzero=0), -1 is inferred";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(reshape)));

  OpSchema transpose;
  transpose.op_type = "Transpose";
  transpose.since_version = 13;
  transpose.inputs = {{.name = "data"}};
  transpose.outputs = {{.name = "transposed"}};
  transpose.attrs = {{.name = "perm", .type = graph::AttrType::kInts}};
  transpose.type_constraints = {{"T", plain_types()}};
  transpose.infer = infer_transpose;
  transpose.doc = "output dim i = input dim perm[i]; perm defaults to reversing the dims";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(transpose)));

  OpSchema concat;
  concat.op_type = "Concat";
  concat.since_version = 13;
  concat.inputs = {{.name = "inputs", .variadic = true}};
  concat.outputs = {{.name = "concat_result"}};
  concat.attrs = {{.name = "axis", .type = graph::AttrType::kInt, .required = true}};
  concat.type_constraints = {{"T", plain_types()}};
  concat.infer = infer_concat;
  concat.doc = "joins the inputs along axis; every other dim must match";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(concat)));

  OpSchema slice;
  slice.op_type = "Slice";
  slice.since_version = 13;
  slice.inputs = {{.name = "data"},
                  {.name = "starts", .type_var = "Tind"},
                  {.name = "ends", .type_var = "Tind"},
                  {.name = "axes", .type_var = "Tind", .optional = true},
                  {.name = "steps", .type_var = "Tind", .optional = true}};
  slice.outputs = {{.name = "output"}};
  slice.type_constraints = {{"T", plain_types()}, {"Tind", index_types()}};
  slice.infer = infer_slice;
  slice.doc = "ONNX Slice with constant starts/ends/axes/steps; symbolic axes per Note [Symbolic Slice]";
  HXRT_RETURN_IF_ERROR(registry.add(std::move(slice)));
  return ok_status();
}

}  // namespace hxrt::ops::schemas
