#include "kernels/cuda/cuda_program.h"

#include <fmt/format.h>

#include "hxrt/base/expf_table.h"
#include "hxrt/base/logging.h"

namespace hxrt::kernels::cuda {

const char* const kCudaPrelude = R"CUDA(
#define HX_INVALID_ARGUMENT 1
#define HX_OUT_OF_RANGE 5
#define HX_ABORTED 9
typedef unsigned char hx_u8;
typedef unsigned short hx_u16;
typedef unsigned int hx_u32;
typedef unsigned long long hx_u64;

// f16 <-> f32 with the hardware's conversions (round to nearest even), as the CPU's f32_to_f16 / f16_to_f32. The CUDA
// emulator (hal/cuda/cuda_emulator.cc) compiles this source for the host, where the same conversions are functions.
#ifdef HXRT_CUDA_EMULATION
__device__ __forceinline__ float hx_half_to_float(hx_u16 h) { return hxemu_f16_to_f32(h); }
__device__ __forceinline__ hx_u16 hx_float_to_half(float f) { return hxemu_f32_to_f16(f); }
#else
__device__ __forceinline__ float hx_half_to_float(hx_u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ hx_u16 hx_float_to_half(float f) {
  hx_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#endif
__device__ __forceinline__ float hx_round_half(float x) { return hx_half_to_float(hx_float_to_half(x)); }
__device__ __forceinline__ float hx_bf16_to_float(hx_u16 h) { return __uint_as_float(((hx_u32)h) << 16); }

// glibc's expf (Note [Matching the CPU kernels on CUDA]): x·32/ln2 = k + r, 2^(k/32) from a table, a degree-3
// polynomial in r, in double, rounded to float once.
__device__ __constant__ hx_u64 hx_exp_table[32] = HX_EXP2F_TABLE;  // hxrt/base/expf_table.h
__device__ __forceinline__ float hx_exp(float x) {
  if (isnan(x)) return x;
  if (x > 0x1.62e42ep6f) return __int_as_float(0x7f800000);  // overflows to +inf
  if (x < -0x1.9fe368p6f) return 0.0f;                        // underflows to zero
  const double shift = 0x1.8p52;
  const double z = 0x1.71547652b82fep5 * (double)x;  // x · 32 / ln 2
  double kd = __dadd_rn(z, shift);
  const hx_u64 ki = (hx_u64)__double_as_longlong(kd);
  kd = __dsub_rn(kd, shift);
  const double r = __dsub_rn(z, kd);
  const double s = __longlong_as_double((long long)(hx_exp_table[ki % 32] + (ki << 47)));
  const double p = fma(0x1.c6af84b912394p-5 / (32.0 * 32.0 * 32.0), r, 0x1.ebfce50fac4f3p-3 / (32.0 * 32.0));
  const double q = fma(0x1.62e42ff0c52d6p-1 / 32.0, r, 1.0);
  return (float)(fma(p, __dmul_rn(r, r), q) * s);
}

// Block-wide reductions through shared memory (blockDim.x a power of two <= 1024); every thread gets the result.
__device__ __forceinline__ double hx_block_sum_double(double v, double* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) scratch[t] = scratch[t] + scratch[t + s];
    __syncthreads();
  }
  const double out = scratch[0];
  __syncthreads();
  return out;
}
__device__ __forceinline__ float hx_block_max(float v, float* scratch) {
  const unsigned t = threadIdx.x;
  scratch[t] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (t < s) scratch[t] = fmaxf(scratch[t], scratch[t + s]);
    __syncthreads();
  }
  const float out = scratch[0];
  __syncthreads();
  return out;
}
)CUDA";

CudaProgram::CudaProgram(std::string name, std::string_view source)
    : name_(std::move(name)),
      source_(with_exp2f_table(kCudaPrelude, "ULL") + std::string(source)),
      key_(jit::program_key("cuda-cpp", name_, source_)) {}

std::string CudaProgram::build_options(const std::string& options) { return options + " --fmad=false"; }

Result<const hal::Kernel*> CudaProgram::kernel(hal::Device& device, const std::string& options,
                                               std::string_view function) const {
  bool built = false;
  std::string key;
  key.reserve(key_.size() + options.size());
  key.append(key_).append(options);
  Result<const hal::Module*> module = device.shared_module(
      key,
      [&] {
        return hal::ModuleSource{.language = hal::ModuleSource::Language::kCudaCpp,
                                 .name = name_,
                                 .code = source_,
                                 .options = build_options(options)};
      },
      &built);
  if (!module.ok()) {
    return std::move(module).take_status().with_context(
        fmt::format("building CUDA kernels '{}' with options '{}'", name_, options));
  }
  if (built) HXRT_LOG(kInfo, "cuda kernels '{}' [{}] loaded", name_, options);
  return (*module)->kernel(function);
}

void add_tensor_arg(std::vector<hal::KernelArg>& args, const ops::TensorRef& tensor) {
  args.push_back(hal::KernelArg::buffer(tensor.view));
}

Status launch_kernel(hal::Stream& stream, const CudaProgram& program, std::string_view function,
                     const std::string& options, const hal::LaunchConfig& config, std::span<const hal::KernelArg> args) {
  return jit::launch_program(stream, program, function, options, config, args);
}

const jit::Backend& cuda_backend() {
  // Attention scores live in static shared memory, at most 48 KiB per block: 8192 floats and the rest.
  static const jit::Backend backend{
      .device = hal::DeviceKind::kCuda, .name = "CUDA", .add_tensor_arg = add_tensor_arg, .max_attention_context = 8192};
  return backend;
}

ops::KernelDef cuda_def(std::string op_type, std::string domain, int since_version, std::string name,
                        std::string description) {
  return jit::make_def(cuda_backend(), std::move(op_type), std::move(domain), since_version, std::move(name),
                       std::move(description));
}

}  // namespace hxrt::kernels::cuda
