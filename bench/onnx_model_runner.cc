// onnx_model_runner: the hxrt side of bench/onnx_peer.py. Loads an ONNX model (or graph file) with runtime::Model on
// the CPU with a given intra-op thread count, reads its inputs from .npy files, then runs it once per "run" line on
// stdin and answers each with the run's wall time, so that the peer script can alternate hxrt and ONNX Runtime run
// by run in one process each.
//
//   onnx_model_runner MODEL --threads 2 --input input_ids=a.npy --input attention_mask=b.npy
//   stdin:  run | quit        stdout: "ready <load seconds>", then "time <seconds>" per run, or "error <message>"
//
// A load error is one "error" line and exit status 2; a run error is an "error" line, and the program goes on.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "hxrt/formats/npy.h"
#include "hxrt/hal/cpu/cpu_driver.h"
#include "hxrt/hal/driver.h"
#include "hxrt/runtime/model.h"

namespace {

// One line, newlines folded, so the script reads one answer per line.
void print_error(const hxrt::Status& status) {
  std::string text = status.to_string();
  for (char& c : text) {
    if (c == '\n') c = ' ';
  }
  std::printf("error %s\n", text.c_str());
  std::fflush(stdout);
}

int usage() {
  std::fprintf(stderr, "usage: onnx_model_runner MODEL [--threads N] [--input NAME=FILE.npy]...\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string model_path = argv[1];
  int threads = 0;
  hxrt::runtime::TensorMap inputs;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return usage();
    const std::string value = argv[++i];
    if (arg == "--threads") {
      threads = std::atoi(value.c_str());
    } else if (arg == "--input") {
      const size_t eq = value.find('=');
      if (eq == std::string::npos) return usage();
      hxrt::Result<hxrt::HostTensor> tensor = hxrt::formats::read_npy(value.substr(eq + 1));
      if (!tensor.ok()) {
        print_error(tensor.status());
        return 2;
      }
      inputs.emplace(value.substr(0, eq), std::move(tensor).value());
    } else {
      return usage();
    }
  }

  // Own drivers: the CPU driver with the requested intra-op threads (0: HXRT_NUM_THREADS or every core).
  hxrt::hal::DriverRegistry drivers;
  hxrt::Status added = drivers.add(hxrt::hal::make_cpu_driver({.num_threads = threads}));
  if (!added.ok()) {
    print_error(added);
    return 2;
  }
  const auto load_start = std::chrono::steady_clock::now();
  hxrt::Result<std::unique_ptr<hxrt::runtime::Model>> model =
      hxrt::runtime::Model::load(model_path, {.device = "cpu", .drivers = &drivers});
  if (!model.ok()) {
    print_error(model.status());
    return 2;
  }
  std::printf("ready %.6f\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "quit") break;
    if (line != "run") {
      std::printf("error unknown command '%s'\n", line.c_str());
      std::fflush(stdout);
      continue;
    }
    const auto start = std::chrono::steady_clock::now();
    hxrt::Result<hxrt::runtime::TensorMap> outputs = (*model)->run(inputs);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (outputs.ok()) {
      std::printf("time %.9f\n", seconds);
    } else {
      print_error(outputs.status());
    }
    std::fflush(stdout);
  }
  return 0;
}
