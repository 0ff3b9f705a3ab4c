// The launch code that the JIT backends (opencl, cuda) share: a kernel family's KernelDefs, tilings, checks and
// argument lists are written once here, against Backend (how a backend passes a tensor, what it is called) and
// Program (its compiled programs); each backend's family file holds only its kernel source and one call.
//
// The kernel sources of one family take the same parameters in the same order on every backend, except that a
// tensor is whatever Backend::add_tensor_arg appends (OpenCL: buffer and byte offset; CUDA: the view's device
// address) and a trailing control-word parameter, if any, is the stream's.
//
// Thread-safety: the registered kernels are reentrant; Program implementations are thread-safe.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hxrt/base/status.h"
#include "hxrt/hal/device.h"
#include "hxrt/hal/kernel.h"
#include "hxrt/hal/stream.h"
#include "hxrt/ops/kernel_def.h"
#include "hxrt/ops/kernel_registry.h"
#include "kernels/launch_util.h"

namespace hxrt::kernels::jit {

// A family's source compiled at run time, one module per device and build options (opencl::JitProgram,
// cuda::CudaProgram).
class Program {
 public:
  virtual ~Program() = default;
  // The kernel `function` of this program built with `options` on `device`.
  virtual Result<const hal::Kernel*> kernel(hal::Device& device, const std::string& options,
                                            std::string_view function) const = 0;
};

struct Backend {
  hal::DeviceKind device = hal::DeviceKind::kOpenCL;
  std::string_view name;  // "OpenCL", "CUDA": errors say whose kernels refused
  // Appends a tensor's kernel arguments.
  void (*add_tensor_arg)(std::vector<hal::KernelArg>& args, const ops::TensorRef& tensor) = nullptr;
  // The longest PagedAttention context (positions) its attend kernel holds scores for; 0: no limit.
  int64_t max_attention_context = 0;
};

// The device-module key prefix of a program: "<tag>:<name>:<FNV-1a 64 of source>:" (the build options follow), so
// two programs of one name never share a module.
std::string program_key(std::string_view tag, std::string_view name, std::string_view source);

// A KernelDef for the backend's device with the common fields set.
ops::KernelDef make_def(const Backend& backend, std::string op_type, std::string domain, int since_version,
                        std::string name, std::string description);
// Enqueues `function` of `program`, built with `options` for the stream's device.
Status launch_program(hal::Stream& stream, const Program& program, std::string_view function, const std::string& options,
              const hal::LaunchConfig& config, std::span<const hal::KernelArg> args);

// ---- families (one file each in this folder) ----

// elementwise.cc: Add, Sub, Mul, Div (numpy broadcast merged to kMaxMergedDims), Relu, LeakyRelu, Gelu, Sigmoid, Tanh,
// Silu, SwiGLU. Functions: binary (BINARY_OP, SAME_SHAPE), unary (UNARY_OP), leaky_relu, swiglu.
Status register_elementwise(ops::KernelRegistry& registry, const Backend& backend,
                            std::shared_ptr<const Program> program);
enum class BinaryOp : int { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3 };
enum class UnaryOp : int { kRelu = 0, kGeluErf = 1, kGeluTanh = 2, kSigmoid = 3, kTanh = 4, kSilu = 5 };
std::string binary_options(BinaryOp op, bool same_shape);
std::string unary_options(UnaryOp op);

// cast.cc: Cast between f32 f16 bf16 i8 u8 i32 i64 bool. Function: cast (no build options).
Status register_cast(ops::KernelRegistry& registry, const Backend& backend, std::shared_ptr<const Program> program);

// tensor_ops.cc: Gather (function gather: WORD_BYTES, IDX_I64), Reshape, and Transpose, Slice, Concat (functions
// strided_copy_<bytes> and concat_part_<bytes> of `copies`, no build options).
Status register_tensor_ops(ops::KernelRegistry& registry, const Backend& backend,
                           std::shared_ptr<const Program> gather, std::shared_ptr<const Program> copies);
std::string gather_options(uint64_t word_bytes, bool i64_indices);

// normalization.cc: RMSNorm, RMSNormMul, Softmax, LayerNormalization (Y only), RoPE. Functions: rms_norm (HAS_WEIGHT,
// WG), softmax_rows and layer_norm (WG), softmax_columns, rope (NEOX, POS_I64). WG is one of row_groups().
Status register_normalization(ops::KernelRegistry& registry, const Backend& backend,
                              std::shared_ptr<const Program> program);
std::string rms_norm_options(bool weighted, int64_t group);
std::string rope_options(bool neox, bool i64_positions, bool freq_factors);
std::vector<int64_t> row_groups();

// llm_ops.cc: GatherRows (function gather_rows: DTYPE, IDX_I64) and PagedAttention (kv_write and attend: CACHE_F16,
// HX_CPU_FMA, WG, MAX_CTX, HEAD_DIM).
Status register_llm_ops(ops::KernelRegistry& registry, const Backend& backend, std::shared_ptr<const Program> program);
std::string gather_rows_options(int dtype_code, bool i64_indices);
std::string attention_options(bool cache_f16, bool cpu_fma, int64_t max_ctx, int64_t head_dim);

// quant_blocks.cc: GatherRows (function gather_rows_q: QTYPE, IDX_I64) and MatMulQ (function matmul_kq: QTYPE,
// TILE_M, NB, WG, HAS_BIAS) for q5_0, q5_1, iq4_nl and the K-quants, from one source for every backend
// (quant_blocks_source(), which maps its few backend-specific names itself); QTYPE is the ggml type id.
Status register_quant_blocks(ops::KernelRegistry& registry, const Backend& backend,
                             std::shared_ptr<const Program> program);
std::string_view quant_blocks_source();
std::string quant_gather_options(int ggml_type, bool i64_indices);
std::string quant_matmul_options(int ggml_type, int64_t tile_m, int64_t nb, bool has_bias);
// matmul_experts of quant_blocks_source() for W of ggml type `ggml_type`; `weighted`: slots summed with weights.
std::string experts_options(int ggml_type, bool weighted);

}  // namespace hxrt::kernels::jit
