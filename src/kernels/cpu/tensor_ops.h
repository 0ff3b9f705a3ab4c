// CPU tensor-movement math: Gather, Reshape, Transpose, Concat and Slice. These ops only move bytes, so they work
// on any dtype by element size (Gather also on block-quantized rows).
//
// Transpose and Slice are both a StridedCopy: the output is written row-major while the source is read at
// base + Σ index[d]·stride[d] (a permutation of the source strides for Transpose, start and step scaled strides for
// Slice). Dims over which the source is contiguous are merged, so the common cases reduce to a few long memcpys.
//
// Thread-safety: pure functions and immutable plans; a plan may be run from several threads on disjoint row ranges.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "hxrt/base/dtype.h"
#include "hxrt/base/shape.h"
#include "hxrt/base/status.h"
#include "hxrt/ops/params/tensor_ops.h"

namespace hxrt::kernels::cpu {

// The ops' own helpers (hxrt/ops/params/tensor_ops.h), used by these kernels and their tests.
using ops::check_permutation;
using ops::element_bytes;
using ops::slice_axis;
using ops::SliceAxis;
using ops::transposed_shape;

// ---- Strided copy (Transpose, Slice) ----
class StridedCopy {
 public:
  // out_dims: the output shape; src_strides: source element strides per output dim (may be 0 or negative);
  // src_base: source element offset of output index 0. Ranks up to Shape::kMaxRank.
  static StridedCopy make(std::span<const int64_t> out_dims, std::span<const int64_t> src_strides, int64_t src_base,
                          size_t element_bytes);

  // The merged copy runs over rows() rows of cols() elements.
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int rank() const { return rank_; }  // merged rank
  // Copies output rows [row_begin, row_end).
  void run(const std::byte* src, std::byte* dst, int64_t row_begin, int64_t row_end) const;

 private:
  int rank_ = 1;
  std::array<int64_t, Shape::kMaxRank> dims_{};
  std::array<int64_t, Shape::kMaxRank> strides_{};
  int64_t base_ = 0;
  size_t element_bytes_ = 1;
  int64_t rows_ = 1;
  int64_t cols_ = 1;
};

// ---- Transpose ----
StridedCopy transpose_plan(const Shape& in, std::span<const int64_t> perm, size_t element_bytes);

// ---- Slice (ONNX-13) ----
// axes[d] describes source axis d (rank = in.rank()).
StridedCopy slice_plan(const Shape& in, std::span<const SliceAxis> axes, size_t element_bytes);

// ---- Gather ----
// Resolves n indices (i32 or i64) into [0, axis_dim): negative indices count from the end. OutOfRange names the
// position and value of the first bad index; nothing is read outside `indices`.
Status resolve_gather_indices(DType index_dtype, const void* indices, int64_t n, int64_t axis_dim, int64_t* out);
// Source viewed as [outer, axis_dim, row_bytes], output as [outer, n_indices, row_bytes]: copies output rows
// u in [unit_begin, unit_end), u = o * n_indices + k, from source row (o, idx[k]).
void gather_rows(const std::byte* src, const int64_t* idx, int64_t n_indices, int64_t axis_dim, size_t row_bytes,
                 std::byte* dst, int64_t unit_begin, int64_t unit_end);

// ---- Concat ----
// Copies outer rows [outer_begin, outer_end) of one input, each src_row_bytes long, into the output rows of
// dst_row_bytes at byte offset dst_offset.
void concat_rows(const std::byte* src, size_t src_row_bytes, std::byte* dst, size_t dst_row_bytes, size_t dst_offset,
                 int64_t outer_begin, int64_t outer_end);

}  // namespace hxrt::kernels::cpu
