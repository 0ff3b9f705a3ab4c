// The reference arithmetic of every element type a weight row can hold: the quantized GGUF types of dtype.h (block
// layouts in quant_blocks.h) and the plain f32, f16 and bf16.
//
// dequantize_row is ggml's dequantize_row_* operation for operation (float arithmetic in the same order), so a row
// hxrt widens equals the row llama.cpp widens bit for bit; kernels that expand rows (GatherRows) use it.
// dequantize_row_f64 evaluates the same formulas in double, where they are exact (an f16 times integers of at most
// 8 bits, minus another such product), and dot_row_f64 is the exact dot product of a row with float activations:
// the references kernels are tested against (Note [Error bounds] in quant_types.cc states what a kernel that
// quantizes its activations may lose against it).
//
// Thread-safety: every function is reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hxrt/base/dtype.h"
#include "hxrt/base/status.h"

namespace hxrt {

// True for the types whose rows the functions below expand: the quantized types of DType, f32, f16 and bf16.
bool row_dequantizable(DType dtype);
const std::vector<DType>& row_dequantizable_types();  // in DType order

// Widens one row of k values (k a multiple of the type's block size) to float with ggml's arithmetic.
// InvalidArgument for another type or a k that is not a whole number of blocks.
Status dequantize_row(DType dtype, const void* row, int64_t k, float* out);

// The same values, exactly, in double.
Status dequantize_row_f64(DType dtype, const void* row, int64_t k, double* out);

// Σ row[i] · x[i] in double over the exact values of the row.
Result<double> dot_row_f64(DType dtype, const void* row, std::span<const float> x);

}  // namespace hxrt
