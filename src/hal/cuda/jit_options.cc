#include "hal/cuda/jit_options.h"

#include <sstream>

namespace hxrt::hal::cuda {

std::vector<std::string> split_jit_options(std::string_view options) {
  std::vector<std::string> out;
  std::istringstream in{std::string(options)};
  std::string token;
  bool join_next = false;
  while (in >> token) {
    if (join_next) {
      out.back() += token;
      join_next = false;
    } else {
      join_next = token == "-D" || token == "-I";
      out.push_back(token);
    }
  }
  return out;
}

}  // namespace hxrt::hal::cuda
