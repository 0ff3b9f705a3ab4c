#include "kernels/jit/jit_family.h"

namespace hxrt::kernels::jit {

ops::KernelDef make_def(const Backend& backend, std::string op_type, std::string domain, int since_version,
                        std::string name, std::string description) {
  ops::KernelDef def;
  def.op_type = std::move(op_type);
  def.domain = std::move(domain);
  def.since_version = since_version;
  def.device = backend.device;
  def.name = std::move(name);
  def.description = std::move(description);
  return def;
}

Status launch_program(hal::Stream& stream, const Program& program, std::string_view function, const std::string& options,
              const hal::LaunchConfig& config, std::span<const hal::KernelArg> args) {
  HXRT_ASSIGN_OR_RETURN(const hal::Kernel* kernel, program.kernel(stream.device(), options, function));
  return stream.launch(*kernel, config, args);
}

}  // namespace hxrt::kernels::jit
