#include "kernels/opencl/jit_program.h"

#include <algorithm>
#include <cctype>
#include <climits>

#include <fmt/format.h>

#include "hxrt/base/expf_table.h"
#include "hxrt/base/logging.h"
#include "hxrt/hal/opencl/opencl_driver.h"

namespace hxrt::kernels::opencl {

// Note [Matching the CPU kernels]
// The OpenCL kernels repeat the CPU kernels' float operations, so that both devices give the same logits and the same
// greedy tokens. Small differences would not stay small: MatMulQ rounds activations to 8 bits, so a one-ulp change
// upstream can move a value across a rounding boundary, and in SmolLM2 that grows to logit differences of ~0.7 after
// 30 layers. Hence:
//  - contraction is off: the CPU kernels are compiled in ISO C++ mode (-ffp-contract=off), so their plain float
//    expressions are never fused; kernels call fma() exactly where the CPU code uses FMA intrinsics;
//  - hx_exp is the algorithm of glibc's expf, which the CPU kernels reach through std::exp on float: x·32/ln2 = k + r,
//    2^(k/32) from a table, a degree-3 polynomial in r, in double, rounded to float once. OpenClPreludeTest checks it
//    bit for bit against the host's expf; without cl_khr_fp64 it falls back to OpenCL's exp (an ulp away at times);
//  - hx_round_half is the CPU's f16_to_f32(f32_to_f16(x)).
// The price is coupling: when a CPU kernel's arithmetic changes, its OpenCL twin must change with it (the kernel tests
// compare the two and fail otherwise).
const char* const kClPrelude = R"CLC(
#pragma OPENCL FP_CONTRACT OFF
#define HX_AT(type, buffer, offset) ((__global type*)((__global uchar*)(buffer) + (offset)))
#define HX_INVALID_ARGUMENT 1
#define HX_OUT_OF_RANGE 5
#define HX_ABORTED 9
// x rounded to the nearest f16 value (ties to even), as f32 again: the CPU kernels' f16_to_f32(f32_to_f16(x)).
inline float hx_round_half(float x) {
  ushort bits;
  vstore_half_rte(x, 0, (__private half*)&bits);
  return vload_half(0, (__private const half*)&bits);
}
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
// glibc's expf (Note [Matching the CPU kernels] in jit_program.cc).
inline float hx_exp(float x) {
  // the bits of 2^(i/32) rounded to double, minus i << 47 (adding k << 47 then scales by 2^(k/32))
  const ulong table[32] = HX_EXP2F_TABLE;  // hxrt/base/expf_table.h
  if (isnan(x)) return x;
  if (x > 0x1.62e42ep6f) return INFINITY;  // overflows
  if (x < -0x1.9fe368p6f) return 0.0f;     // underflows to zero
  const double shift = 0x1.8p52;           // adding it rounds to an integer kept in the low mantissa bits
  const double xd = (double)x;
  const double z = 0x1.71547652b82fep5 * xd;  // x · 32 / ln 2
  double kd = z + shift;
  const ulong ki = as_ulong(kd);
  kd -= shift;
  const double r = z - kd;
  const double s = as_double(table[ki % 32] + (ki << 47));
  const double p = fma(0x1.c6af84b912394p-5 / (32.0 * 32.0 * 32.0), r, 0x1.ebfce50fac4f3p-3 / (32.0 * 32.0));
  const double q = fma(0x1.62e42ff0c52d6p-1 / 32.0, r, 1.0);
  return (float)(fma(p, r * r, q) * s);
}
#else
typedef float acc_t;
inline float hx_exp(float x) { return exp(x); }
#endif
)CLC";

JitProgram::JitProgram(std::string name, std::string_view source)
    : name_(std::move(name)),
      source_(with_exp2f_table(kClPrelude, "UL") + std::string(source)),
      key_(jit::program_key("opencl-c", name_, source_)) {}

Result<const hal::Kernel*> JitProgram::kernel(hal::Device& device, const std::string& options,
                                              std::string_view function) const {
  // The device keeps the module (Device::shared_module), so this program holds nothing a device made.
  bool built = false;
  std::string key;
  key.reserve(key_.size() + options.size());
  key.append(key_).append(options);
  Result<const hal::Module*> module = device.shared_module(
      key,
      [&] {
        return hal::ModuleSource{
            .language = hal::ModuleSource::Language::kOpenCLC, .name = name_, .code = source_, .options = options};
      },
      &built);
  if (!module.ok()) {
    return std::move(module).take_status().with_context(
        fmt::format("building OpenCL kernels '{}' with options '{}'", name_, options));
  }
  if (built) {
    if (Result<hal::OpenClModuleStats> stats = hal::opencl_module_stats(**module); stats.ok()) {
      HXRT_LOG(kInfo, "opencl kernels '{}' [{}]: {} in {:.1f} ms", name_, options,
               stats->origin == hal::OpenClModuleStats::Origin::kCompiled ? "compiled" : "cached", stats->build_ms);
    }
  }
  return (*module)->kernel(function);
}

void add_tensor_arg(std::vector<hal::KernelArg>& args, const ops::TensorRef& tensor) {
  args.push_back(hal::KernelArg::buffer(hal::BufferView(*tensor.view.buffer)));
  args.push_back(hal::KernelArg::scalar(static_cast<uint64_t>(tensor.view.offset)));
}

Status launch_kernel(hal::Stream& stream, const JitProgram& program, std::string_view function,
                     const std::string& options, const hal::LaunchConfig& config, std::span<const hal::KernelArg> args) {
  return jit::launch_program(stream, program, function, options, config, args);
}

const jit::Backend& opencl_backend() {
  static const jit::Backend backend{.device = hal::DeviceKind::kOpenCL, .name = "OpenCL", .add_tensor_arg = add_tensor_arg};
  return backend;
}

ops::KernelDef opencl_def(std::string op_type, std::string domain, int since_version, std::string name,
                          std::string description) {
  return jit::make_def(opencl_backend(), std::move(op_type), std::move(domain), since_version, std::move(name),
                       std::move(description));
}

}  // namespace hxrt::kernels::opencl
