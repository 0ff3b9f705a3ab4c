// Registration of the built-in op schemas, one function per op family (one file each in this folder).
// register_builtin_schemas() in op_schema.cc calls them all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hxrt/ops/op_schema.h"

namespace hxrt::ops::schemas {

// Shared inference helpers.
// Numpy-style broadcast of two shapes; records DimChecks for symbolic dims that must match.
Result<graph::SymShape> broadcast_shapes(InferenceContext& ctx, const graph::SymShape& a, const graph::SymShape& b);

// Type constraint lists several families share (inference_helpers.cc, as the helpers below).
const std::vector<DType>& float_types();  // f32: T, the float type variable, unless a line says otherwise (docs/ops.md)
const std::vector<DType>& index_types();  // i32, i64
const std::vector<DType>& plain_types();  // every dtype stored element by element: f32 f16 bf16 i8 i32 i64 u8 bool

// `axis` in [-rank, rank) made non-negative; the error names the attribute or input (`what`) and the rank.
Result<int> axis_value(InferenceContext& ctx, int64_t axis, int rank, std::string_view what);

// The initializer behind input `i`, whose values inference needs; the error names the input.
Result<const graph::WeightData*> require_constant(InferenceContext& ctx, size_t i, std::string_view name);

// The first `count` elements of an i32 or i64 weight as int64 (the caller has checked the dtype and size).
std::vector<int64_t> weight_ints(const graph::WeightData& weight, DType dtype, size_t count);

Status register_elementwise(OpSchemaRegistry& registry);  // Add Sub Mul Div Relu LeakyRelu Gelu Silu Sigmoid Tanh Cast
Status register_normalization(OpSchemaRegistry& registry);  // Softmax LayerNormalization RMSNorm RoPE
Status register_tensor_ops(OpSchemaRegistry& registry);  // Gather Reshape Transpose Concat Slice
Status register_linear(OpSchemaRegistry& registry);  // MatMul Gemm MatMulQ
Status register_conv(OpSchemaRegistry& registry);  // Conv BatchNormalization
Status register_fused(OpSchemaRegistry& registry);  // hxrt.fused ops
Status register_llm(OpSchemaRegistry& registry);  // GatherRows PagedAttention
Status register_math(OpSchemaRegistry& registry);  // unary math and activations
Status register_logic(OpSchemaRegistry& registry);  // broadcast binary, variadic, comparison and logical ops
Status register_reduce(OpSchemaRegistry& registry);  // reductions and normalisations
Status register_shape_ops(OpSchemaRegistry& registry);  // shape and layout ops
Status register_indexing(OpSchemaRegistry& registry);  // indexing and data-dependent ops
Status register_pool(OpSchemaRegistry& registry);  // pooling, transposed convolution and resampling
Status register_sequence(OpSchemaRegistry& registry);  // recurrent, spectral and remaining ops
Status register_collective(OpSchemaRegistry& registry);  // AllReduce AllGather ReduceScatter Broadcast

}  // namespace hxrt::ops::schemas
