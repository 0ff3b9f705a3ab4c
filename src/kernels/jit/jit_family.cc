#include "kernels/jit/jit_family.h"

#include <fmt/format.h>

namespace hxrt::kernels::jit {

std::string program_key(std::string_view tag, std::string_view name, std::string_view source) {
  uint64_t digest = 0xcbf29ce484222325ull;
  for (const char c : source) digest = (digest ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return fmt::format("{}:{}:{:016x}:", tag, name, digest);
}

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
