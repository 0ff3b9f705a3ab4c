// CUDA Cast between f32, f16, bf16, i8, u8, i32, i64 and bool, with the CPU kernel's rules
// (kernels/cpu/elementwise.cc): float → integer truncates toward zero and saturates (NaN → 0), integer → integer
// wraps, anything → bool is "!= 0" (NaN is true), f16 and bf16 round to nearest even. One thread per element, in
// blocks of 256 threads (launch code: kernels/jit/cast.cc).
//
// The source and destination types are kernel arguments, not build options: one build serves all 56 pairs, and the
// per-element branch on a uniform value costs little next to a compile per pair. f16 and bf16 are converted with
// integer code ported from base/float16.h rather than the prelude's cvt-based hx_half_to_float / hx_float_to_half,
// which canonicalise NaNs: this way the results, NaN payloads included, are bit-identical to the CPU's. A cast to the
// same dtype is a device-to-device copy.
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/cuda/registration.h"

namespace hxrt::kernels::cuda {
namespace {

constexpr std::string_view kSource = R"CUDA(
#define T_F32 0
#define T_F16 1
#define T_BF16 2
#define T_I8 3
#define T_U8 4
#define T_I32 5
#define T_I64 6
#define T_BOOL 7

// NVRTC has no <climits>.
#define HX_I32_MIN (-2147483647LL - 1LL)
#define HX_I32_MAX 2147483647LL
#define HX_I64_MIN (-9223372036854775807LL - 1LL)
#define HX_I64_MAX 9223372036854775807LL

// base/float16.h's f16_to_f32: exact, subnormals, infinities and NaN payloads included.
__device__ __forceinline__ float f16_bits_to_float(hx_u32 h) {
  const hx_u32 sign = (h & 0x8000u) << 16;
  const hx_u32 exponent = (h >> 10) & 0x1Fu;
  const hx_u32 mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return __uint_as_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0u) return __uint_as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  const float magnitude = (float)mantissa * 0x1.0p-24f;  // zero or subnormal, exactly
  return sign != 0u ? -magnitude : magnitude;
}

// base/float16.h's f32_to_f16: round to nearest even, overflow to ±inf, NaN stays NaN.
__device__ __forceinline__ hx_u16 float_to_f16_bits(float f) {
  const hx_u32 bits = __float_as_uint(f);
  const hx_u32 sign = (bits >> 16) & 0x8000u;
  const hx_u32 magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) return (hx_u16)(sign | 0x7C00u | (magnitude > 0x7F800000u ? 0x200u : 0u));
  if (magnitude >= 0x477FF000u) return (hx_u16)(sign | 0x7C00u);
  if (magnitude < 0x38800000u) {
    if (magnitude < 0x33000001u) return (hx_u16)sign;
    const hx_u32 exponent = magnitude >> 23;
    const hx_u32 mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    const hx_u32 shift = 126u - exponent;
    hx_u32 half_bits = mantissa >> shift;
    const hx_u32 rest = mantissa & ((1u << shift) - 1u);
    const hx_u32 halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half_bits & 1u))) ++half_bits;
    return (hx_u16)(sign | half_bits);
  }
  hx_u32 half_bits = (magnitude - 0x38000000u) >> 13;
  const hx_u32 rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half_bits & 1u))) ++half_bits;
  return (hx_u16)(sign | half_bits);
}

// base/float16.h's f32_to_bf16: round to nearest even, NaN stays NaN (quietened).
__device__ __forceinline__ hx_u16 float_to_bf16_bits(float f) {
  hx_u32 bits = __float_as_uint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (hx_u16)((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (hx_u16)(bits >> 16);
}

// Truncated toward zero and clamped to [lo, hi]; NaN is 0.
__device__ __forceinline__ long long saturate(float f, long long lo, long long hi) {
  if (isnan(f)) return 0;
  const float t = truncf(f);
  if (t <= (float)lo) return lo;
  if (t >= (float)hi) return hi;  // (float)hi rounds up to a power of two for i32/i64, as the CPU's double compare
  return (long long)t;
}

__device__ __forceinline__ float load_float(const hx_u8* x, int i, int type) {
  if (type == T_F32) return ((const float*)x)[i];
  const hx_u32 bits = ((const hx_u16*)x)[i];
  return type == T_F16 ? f16_bits_to_float(bits) : hx_bf16_to_float((hx_u16)bits);
}

__device__ __forceinline__ long long load_int(const hx_u8* x, int i, int type) {
  switch (type) {
    case T_I8: return ((const signed char*)x)[i];
    case T_U8: return x[i];
    case T_I32: return ((const int*)x)[i];
    case T_I64: return ((const long long*)x)[i];
    default: return x[i] != 0 ? 1 : 0;  // bool
  }
}

__device__ __forceinline__ void store_float(hx_u8* y, int i, int type, float f) {
  switch (type) {
    case T_F32: ((float*)y)[i] = f; break;
    case T_F16: ((hx_u16*)y)[i] = float_to_f16_bits(f); break;
    case T_BF16: ((hx_u16*)y)[i] = float_to_bf16_bits(f); break;
    case T_I8: ((signed char*)y)[i] = (signed char)saturate(f, -128, 127); break;
    case T_U8: y[i] = (hx_u8)saturate(f, 0, 255); break;
    case T_I32: ((int*)y)[i] = (int)saturate(f, HX_I32_MIN, HX_I32_MAX); break;
    case T_I64: ((long long*)y)[i] = saturate(f, HX_I64_MIN, HX_I64_MAX); break;
    default: y[i] = f != 0.0f ? 1 : 0; break;  // bool; NaN is true
  }
}

__device__ __forceinline__ void store_int(hx_u8* y, int i, int type, long long v) {
  switch (type) {
    case T_F32:
    case T_F16:
    case T_BF16: store_float(y, i, type, (float)v); break;  // rounded to nearest, as the CPU's static_cast
    case T_I8: ((signed char*)y)[i] = (signed char)v; break;  // two's-complement wrap
    case T_U8: y[i] = (hx_u8)v; break;
    case T_I32: ((int*)y)[i] = (int)v; break;
    case T_I64: ((long long*)y)[i] = v; break;
    default: y[i] = v != 0 ? 1 : 0; break;
  }
}

// x and y are the tensors' bytes; from and to are T_* codes.
extern "C" __global__ void cast(const hx_u8* x, hx_u8* y, int n, int from, int to) {
  // Unsigned: the last block of a grid covering 2^31 - 1 elements reaches past INT_MAX.
  const unsigned u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= (unsigned)n) return;
  const int i = (int)u;
  if (from <= T_BF16) {
    store_float(y, i, to, load_float(x, i, from));
  } else {
    store_int(y, i, to, load_int(x, i, from));
  }
}
)CUDA";

std::shared_ptr<const CudaProgram> cast_program() {
  static const auto program = std::make_shared<const CudaProgram>("hxrt_cast", kSource);
  return program;
}

}  // namespace

Status register_cast(ops::KernelRegistry& registry) {
  return jit::register_cast(registry, cuda_backend(), cast_program());
}

std::vector<ProgramBuild> cast_builds() { return {{cast_program().get(), "", {"cast"}}}; }

}  // namespace hxrt::kernels::cuda
