// OpenCL Cast between f32, f16, bf16, i8, u8, i32, i64 and bool, with the CPU kernel's rules
// (kernels/cpu/elementwise.cc): float → integer truncates toward zero and saturates (NaN → 0), integer → integer
// wraps, anything → bool is "!= 0" (NaN is true), f16 and bf16 round to nearest even. One work-item per element.
//
// The source and destination types are kernel arguments, not build options: one program serves all 56 pairs, and the
// per-element branch on a uniform value costs little next to a compile per pair. f16 and bf16 are converted with
// integer code ported from base/float16.h, so the results (NaN payloads included) are bit-identical to the CPU's.
// A cast to the same dtype is a device-to-device copy.
#include <memory>
#include <string_view>

#include "kernels/opencl/jit_program.h"
#include "kernels/opencl/registration.h"

namespace hxrt::kernels::opencl {
namespace {

constexpr std::string_view kSource = R"CLC(
#define T_F32 0
#define T_F16 1
#define T_BF16 2
#define T_I8 3
#define T_U8 4
#define T_I32 5
#define T_I64 6
#define T_BOOL 7

// base/float16.h's f16_to_f32: exact, subnormals, infinities and NaN payloads included.
inline float f16_bits_to_float(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1Fu;
  const uint mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return as_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0u) return as_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  const float magnitude = (float)mantissa * 0x1.0p-24f;  // zero or subnormal, exactly
  return sign != 0u ? -magnitude : magnitude;
}

// base/float16.h's f32_to_f16: round to nearest even, overflow to ±inf, NaN stays NaN.
inline ushort float_to_f16_bits(float f) {
  const uint bits = as_uint(f);
  const uint sign = (bits >> 16) & 0x8000u;
  const uint magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) return (ushort)(sign | 0x7C00u | (magnitude > 0x7F800000u ? 0x200u : 0u));
  if (magnitude >= 0x477FF000u) return (ushort)(sign | 0x7C00u);
  if (magnitude < 0x38800000u) {
    if (magnitude < 0x33000001u) return (ushort)sign;
    const uint exponent = magnitude >> 23;
    const uint mantissa = (magnitude & 0x7FFFFFu) | 0x800000u;
    const uint shift = 126u - exponent;
    uint half_bits = mantissa >> shift;
    const uint rest = mantissa & ((1u << shift) - 1u);
    const uint halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (half_bits & 1u))) ++half_bits;
    return (ushort)(sign | half_bits);
  }
  uint half_bits = (magnitude - 0x38000000u) >> 13;
  const uint rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half_bits & 1u))) ++half_bits;
  return (ushort)(sign | half_bits);
}

// base/float16.h's f32_to_bf16: round to nearest even, NaN stays NaN (quietened).
inline ushort float_to_bf16_bits(float f) {
  uint bits = as_uint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (ushort)((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (ushort)(bits >> 16);
}

// Truncated toward zero and clamped to [lo, hi]; NaN is 0.
inline long saturate(float f, long lo, long hi) {
  if (isnan(f)) return 0;
  const float t = trunc(f);
  if (t <= (float)lo) return lo;
  if (t >= (float)hi) return hi;  // (float)hi rounds up to a power of two for i32/i64, as the CPU's double compare
  return (long)t;
}

inline float load_float(__global const uchar* x, int i, int type) {
  if (type == T_F32) return ((__global const float*)x)[i];
  const uint bits = ((__global const ushort*)x)[i];
  return type == T_F16 ? f16_bits_to_float(bits) : as_float(bits << 16);
}

inline long load_int(__global const uchar* x, int i, int type) {
  switch (type) {
    case T_I8: return ((__global const char*)x)[i];
    case T_U8: return x[i];
    case T_I32: return ((__global const int*)x)[i];
    case T_I64: return ((__global const long*)x)[i];
    default: return x[i] != 0 ? 1 : 0;  // bool
  }
}

inline void store_float(__global uchar* y, int i, int type, float f) {
  switch (type) {
    case T_F32: ((__global float*)y)[i] = f; break;
    case T_F16: ((__global ushort*)y)[i] = float_to_f16_bits(f); break;
    case T_BF16: ((__global ushort*)y)[i] = float_to_bf16_bits(f); break;
    case T_I8: ((__global char*)y)[i] = (char)saturate(f, -128, 127); break;
    case T_U8: y[i] = (uchar)saturate(f, 0, 255); break;
    case T_I32: ((__global int*)y)[i] = (int)saturate(f, INT_MIN, INT_MAX); break;
    case T_I64: ((__global long*)y)[i] = saturate(f, LONG_MIN, LONG_MAX); break;
    default: y[i] = f != 0.0f ? 1 : 0; break;  // bool; NaN is true
  }
}

inline void store_int(__global uchar* y, int i, int type, long v) {
  switch (type) {
    case T_F32:
    case T_F16:
    case T_BF16: store_float(y, i, type, (float)v); break;  // rounded to nearest, as the CPU's static_cast
    case T_I8: ((__global char*)y)[i] = (char)v; break;     // two's-complement wrap
    case T_U8: y[i] = (uchar)v; break;
    case T_I32: ((__global int*)y)[i] = (int)v; break;
    case T_I64: ((__global long*)y)[i] = v; break;
    default: y[i] = v != 0 ? 1 : 0; break;
  }
}

__kernel void cast(__global const uchar* x_buf, ulong x_off, __global uchar* y_buf, ulong y_off, int n, int from,
                   int to) {
  const int i = get_global_id(0);
  if (i >= n) return;
  __global const uchar* x = HX_AT(const uchar, x_buf, x_off);
  __global uchar* y = HX_AT(uchar, y_buf, y_off);
  if (from <= T_BF16) {
    store_float(y, i, to, load_float(x, i, from));
  } else {
    store_int(y, i, to, load_int(x, i, from));
  }
}
)CLC";

}  // namespace

Status register_cast(ops::KernelRegistry& registry) {
  return jit::register_cast(registry, opencl_backend(), std::make_shared<const JitProgram>("hxrt_cast", kSource));
}

}  // namespace hxrt::kernels::opencl
