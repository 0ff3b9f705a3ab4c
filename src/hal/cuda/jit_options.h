// Build options of CUDA JIT modules, split into arguments: shared by the NVRTC path and the CUDA emulator.
//
// Thread-safety: reentrant.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hxrt::hal::cuda {

// One argument per option, split on white space, with "-D NAME=V" and "-I DIR" joined into "-DNAME=V" and "-IDIR"
// (the form NVRTC accepts, and the host compiler too).
std::vector<std::string> split_jit_options(std::string_view options);

}  // namespace hxrt::hal::cuda
