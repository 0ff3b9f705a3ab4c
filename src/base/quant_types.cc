#include "hxrt/base/quant_types.h"

#include <cstring>
#include <vector>

#include "hxrt/base/float16.h"
#include "hxrt/base/quant_blocks.h"

// Note [Error bounds]: MatMulQ kernels quantize the activations to int8, one scale per group of values (32 for the
// 32-value weight types, d_a = max|a| / 127 kept at f16 precision as llama.cpp's q8_0; 256 for the super-block types,
// d_a kept in float as llama.cpp's q8_K), and compute Σ w·a exactly in integers per run (per super-block for the
// latter), so against dot_row_f64 the only losses are (1) the rounding of a to d_a·q_a, at most d_a / 2 per value,
// (2) d_a's own f16 rounding, relative 2⁻¹¹, and (3) float accumulation of the partial sums. For a row of k values
// the error is at most Σ_groups (d_a/2 + 2⁻¹¹·max|a|)·Σ|w| + k·2⁻²⁴·Σ|w·a|; the kernel tests check this bound per
// output (kernels/cpu quant_matmul_test.cc). Weights are never rounded: a kernel computes with the row's exact values.

namespace hxrt {
namespace {

// Each dequantizer is ggml's dequantize_row_* for T = float (the same operations in the same order) and exact for
// T = double.
template <typename T>
T f16(uint16_t h) {
  return static_cast<T>(f16_to_f32(h));
}

template <typename T>
void q8_0(const BlockQ8_0& b, T* y) {
  const T d = f16<T>(b.d);
  for (int i = 0; i < kQK; ++i) y[i] = static_cast<T>(b.qs[i]) * d;
}

template <typename T>
void q4_0(const BlockQ4_0& b, T* y) {
  const T d = f16<T>(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<T>((b.qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<T>((b.qs[j] >> 4) - 8) * d;
  }
}

template <typename T>
void q4_1(const BlockQ4_1& b, T* y) {
  const T d = f16<T>(b.d);
  const T m = f16<T>(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<T>(b.qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<T>(b.qs[j] >> 4) * d + m;
  }
}

// The fifth bits of q5_0 and q5_1: bit i of the little-endian word is element i's.
inline uint32_t high_bits(const uint8_t* qh) {
  uint32_t bits = 0;
  std::memcpy(&bits, qh, sizeof(bits));
  return bits;
}

template <typename T>
void q5_0(const BlockQ5_0& b, T* y) {
  const T d = f16<T>(b.d);
  const uint32_t qh = high_bits(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = ((b.qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10)) - 16;
    const int x1 = ((b.qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10)) - 16;
    y[j] = static_cast<T>(x0) * d;
    y[j + 16] = static_cast<T>(x1) * d;
  }
}

template <typename T>
void q5_1(const BlockQ5_1& b, T* y) {
  const T d = f16<T>(b.d);
  const T m = f16<T>(b.m);
  const uint32_t qh = high_bits(b.qh);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = (b.qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10);
    const int x1 = (b.qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<T>(x0) * d + m;
    y[j + 16] = static_cast<T>(x1) * d + m;
  }
}

template <typename T>
void iq4_nl(const BlockIQ4_NL& b, T* y) {
  const T d = f16<T>(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<T>(kIQ4NLValues[b.qs[j] & 0x0F]);
    y[j + 16] = d * static_cast<T>(kIQ4NLValues[b.qs[j] >> 4]);
  }
}

template <typename T>
void q2_k(const BlockQ2_K& b, T* y) {
  const T d = f16<T>(b.d);
  const T dmin = f16<T>(b.dmin);
  const uint8_t* q = b.qs;
  int group = 0;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const uint8_t sc = b.scales[group++];
        const T dl = d * static_cast<T>(sc & 0x0F);
        const T ml = dmin * static_cast<T>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<T>((q[16 * part + l] >> shift) & 3) - ml;
      }
    }
  }
}

template <typename T>
void q3_k(const BlockQ3_K& b, T* y) {
  const T d = f16<T>(b.d);
  const std::array<int8_t, 16> scales = unpack_scales_q3_k(b.scales);
  const uint8_t* q = b.qs;
  int group = 0;
  uint8_t mask = 1;
  for (int half = 0; half < 2; ++half, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, mask = static_cast<uint8_t>(mask << 1)) {
      for (int part = 0; part < 2; ++part) {
        const T dl = d * static_cast<T>(scales[static_cast<size_t>(group++)]);
        for (int l = 16 * part; l < 16 * part + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & mask) != 0 ? 0 : 4);
          *y++ = dl * static_cast<T>(v);
        }
      }
    }
  }
}

// q4_K and q5_K share their scales and nibbles; q5_K's fifth bits come from qh (null for q4_K): bit j of qh[l] is
// bit 4 of value l of sub-block j.
template <typename T>
void k4_blocks(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, T* y) {
  const T d = f16<T>(d16);
  const T dmin = f16<T>(dmin16);
  const uint8_t* q = qs;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc = 0;
    uint8_t mn = 0;
    unpack_scale_min_k4(j, scales, &sc, &mn);
    const T dl = d * static_cast<T>(sc);
    const T ml = dmin * static_cast<T>(mn);
    for (int l = 0; l < 32; ++l) {
      const int nibble = j % 2 == 0 ? q[l] & 0x0F : q[l] >> 4;
      const int high = qh != nullptr ? ((qh[l] >> j) & 1) << 4 : 0;
      *y++ = dl * static_cast<T>(nibble + high) - ml;
    }
    if (j % 2 == 1) q += 32;
  }
}

template <typename T>
void q4_k(const BlockQ4_K& b, T* y) {
  k4_blocks(b.d, b.dmin, b.scales, b.qs, nullptr, y);
}

template <typename T>
void q5_k(const BlockQ5_K& b, T* y) {
  k4_blocks(b.d, b.dmin, b.scales, b.qs, b.qh, y);
}

template <typename T>
void q6_k(const BlockQ6_K& b, T* y) {
  const T d = f16<T>(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<T>(sc[is]) * static_cast<T>(q1);
      y[l + 32] = d * static_cast<T>(sc[is + 2]) * static_cast<T>(q2);
      y[l + 64] = d * static_cast<T>(sc[is + 4]) * static_cast<T>(q3);
      y[l + 96] = d * static_cast<T>(sc[is + 6]) * static_cast<T>(q4);
    }
  }
}

template <typename T>
void iq4_xs(const BlockIQ4_XS& b, T* y) {
  const T d = f16<T>(b.d);
  const uint8_t* qs = b.qs;
  for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((b.scales_h >> (2 * ib)) & 3) << 4);
    const T dl = d * static_cast<T>(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * static_cast<T>(kIQ4NLValues[qs[j] & 0x0F]);
      y[j + 16] = dl * static_cast<T>(kIQ4NLValues[qs[j] >> 4]);
    }
  }
}

template <typename Block, typename T>
void blocks(const void* row, int64_t nb, T* y, void (*one)(const Block&, T*), int64_t per_block) {
  const auto* b = static_cast<const Block*>(row);
  for (int64_t i = 0; i < nb; ++i) one(b[i], y + i * per_block);
}

template <typename T>
Status dequantize(DType dtype, const void* row, int64_t k, T* out) {
  if (!row_dequantizable(dtype)) return invalid_argument("dequantize_row: {} rows cannot be dequantized", dtype);
  const DTypeInfo& info = dtype_info(dtype);
  if (k < 0 || k % info.block_elements != 0) {
    return invalid_argument("dequantize_row: k={} is not a whole number of {}-value {} blocks", k,
                            info.block_elements, dtype);
  }
  const int64_t nb = k / info.block_elements;
  const int64_t per = info.block_elements;
  switch (dtype) {
    case DType::kF32: {
      const auto* x = static_cast<const float*>(row);
      for (int64_t i = 0; i < k; ++i) out[i] = static_cast<T>(x[i]);
      break;
    }
    case DType::kF16: {
      const auto* x = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < k; ++i) out[i] = static_cast<T>(f16_to_f32(x[i]));
      break;
    }
    case DType::kBF16: {
      const auto* x = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < k; ++i) out[i] = static_cast<T>(bf16_to_f32(x[i]));
      break;
    }
    case DType::kQ8_0: blocks<BlockQ8_0, T>(row, nb, out, &q8_0<T>, per); break;
    case DType::kQ4_0: blocks<BlockQ4_0, T>(row, nb, out, &q4_0<T>, per); break;
    case DType::kQ4_1: blocks<BlockQ4_1, T>(row, nb, out, &q4_1<T>, per); break;
    case DType::kQ5_0: blocks<BlockQ5_0, T>(row, nb, out, &q5_0<T>, per); break;
    case DType::kQ5_1: blocks<BlockQ5_1, T>(row, nb, out, &q5_1<T>, per); break;
    case DType::kIQ4_NL: blocks<BlockIQ4_NL, T>(row, nb, out, &iq4_nl<T>, per); break;
    case DType::kQ2_K: blocks<BlockQ2_K, T>(row, nb, out, &q2_k<T>, per); break;
    case DType::kQ3_K: blocks<BlockQ3_K, T>(row, nb, out, &q3_k<T>, per); break;
    case DType::kQ4_K: blocks<BlockQ4_K, T>(row, nb, out, &q4_k<T>, per); break;
    case DType::kQ5_K: blocks<BlockQ5_K, T>(row, nb, out, &q5_k<T>, per); break;
    case DType::kQ6_K: blocks<BlockQ6_K, T>(row, nb, out, &q6_k<T>, per); break;
    case DType::kIQ4_XS: blocks<BlockIQ4_XS, T>(row, nb, out, &iq4_xs<T>, per); break;
    default: break;
  }
  return ok_status();
}

}  // namespace

bool row_dequantizable(DType dtype) {
  return dtype_info(dtype).is_quantized || dtype_info(dtype).is_float;
}

const std::vector<DType>& row_dequantizable_types() {
  static const std::vector<DType> types = [] {
    std::vector<DType> out;
    for (int i = 0; i < kDTypeCount; ++i) {
      if (row_dequantizable(static_cast<DType>(i))) out.push_back(static_cast<DType>(i));
    }
    return out;
  }();
  return types;
}

Status dequantize_row(DType dtype, const void* row, int64_t k, float* out) {
  return dequantize<float>(dtype, row, k, out);
}

Status dequantize_row_f64(DType dtype, const void* row, int64_t k, double* out) {
  return dequantize<double>(dtype, row, k, out);
}

Result<double> dot_row_f64(DType dtype, const void* row, std::span<const float> x) {
  std::vector<double> w(x.size());
  HXRT_RETURN_IF_ERROR(dequantize_row_f64(dtype, row, static_cast<int64_t>(x.size()), w.data()));
  double sum = 0.0;
  for (size_t i = 0; i < x.size(); ++i) sum += w[i] * static_cast<double>(x[i]);
  return sum;
}

}  // namespace hxrt
