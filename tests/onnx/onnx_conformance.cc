// The ONNX backend node tests (Debian's libonnx-testdata, /usr/share/libonnx-testdata/data/node) through
// runtime::Model, compared as ONNX's backend runner compares: rtol 1e-3, atol 1e-7 for floats, exact for integers
// and bools, NaN where the reference has NaN.
//
//   onnx_conformance [--data DIR] [--device cpu] [--filter REGEX] [--report FILE] [--min-applicable N] [--verbose]
//
// Every case is run or skipped; a skip says why (a random op, a dtype hxrt has no type for, a non-tensor input). The
// *applicable* set (docs/onnx.md) is the cases without `_expanded`, every node in ai.onnx, no control flow,
// sequences or optionals, not random, every tensor float32, int64 or bool; the summary counts it apart, with the
// `_expanded` variants and the rest. --min-applicable makes the exit status fail when fewer applicable cases pass
// (the ctest guard against regressions); the report file lists every case with its outcome and reason.
#include <algorithm>
#include <array>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "hxrt/base/float16.h"
#include "hxrt/formats/onnx.h"
#include "hxrt/runtime/model.h"

namespace fs = std::filesystem;
using namespace hxrt;

namespace {

struct Options {
  std::string data = "/usr/share/libonnx-testdata/data/node";
  std::string device = "cpu";
  std::string filter;
  std::string report;
  int min_applicable = -1;
  bool verbose = false;
};

enum class Outcome { kPass, kFail, kSkip };

struct CaseResult {
  std::string name;
  Outcome outcome = Outcome::kFail;
  std::string reason;
  bool applicable = false;
  bool expanded = false;
};

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

bool plain_type(int32_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::INT64 || t == onnx::TensorProto::BOOL;
}

// Why a case is not in the applicable set ("" when it is); `skip` is set when hxrt cannot run it at all.
std::string classify(const fs::path& dir, const onnx::ModelProto& model, std::string* skip) {
  const std::string name = dir.filename().string();
  static const std::set<std::string> kControl = {"If", "Loop", "Scan", "SequenceAt", "SequenceConstruct",
      "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength", "SplitToSequence", "ConcatFromSequence",
      "Optional", "OptionalGetElement", "OptionalHasElement", "SequenceMap"};
  if (name.find("bernoulli") != std::string::npos || name.find("training_dropout") != std::string::npos ||
      name.starts_with("test_random")) {
    *skip = "random outputs: not reproducible";
    return "random";
  }
  std::string why;
  if (name.find("_expanded") != std::string::npos) why = "expanded";
  for (const auto& opset : model.opset_import()) {
    if (!opset.domain().empty() && opset.domain() != "ai.onnx" && why.empty()) why = "domain " + opset.domain();
  }
  for (const auto& node : model.graph().node()) {
    if (!node.domain().empty() && node.domain() != "ai.onnx" && why.empty()) why = "domain " + node.domain();
    if (kControl.count(node.op_type()) != 0 && why.empty()) why = "control flow / sequences: " + node.op_type();
  }
  auto check_info = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type()) {
      *skip = fmt::format("'{}' is not a tensor (sequence/optional/map)", v.name());
      if (why.empty()) why = "non-tensor value";
      return;
    }
    const int32_t t = v.type().tensor_type().elem_type();
    if (!formats::dtype_from_onnx(t).ok()) {
      *skip = fmt::format("'{}' is {}, which hxrt has no dtype for", v.name(),
                          onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t)));
    }
    if (!plain_type(t) && why.empty()) why = "dtype";
  };
  for (const auto& v : model.graph().input()) check_info(v);
  for (const auto& v : model.graph().output()) check_info(v);
  return why;
}

bool close_enough(double actual, double expected) {
  if (std::isnan(expected)) return std::isnan(actual);
  if (std::isinf(expected)) return actual == expected;
  return std::fabs(actual - expected) <= 1e-7 + 1e-3 * std::fabs(expected);
}

double element(const HostTensor& t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32: return reinterpret_cast<const float*>(t.bytes.data())[i];
    case DType::kF16: return static_cast<double>(f16_to_f32(reinterpret_cast<const uint16_t*>(t.bytes.data())[i]));
    default: return 0.0;
  }
}

std::string compare(const std::string& name, const HostTensor& actual, const graph::TensorValue& expected) {
  if (actual.dtype != expected.dtype) {
    return fmt::format("output '{}': dtype {}, expected {}", name, actual.dtype, expected.dtype);
  }
  if (!(actual.shape == expected.shape)) {
    return fmt::format("output '{}': shape {}, expected {}", name, actual.shape, expected.shape);
  }
  const int64_t n = expected.shape.num_elements();
  if (expected.dtype == DType::kF32 || expected.dtype == DType::kF16) {
    HostTensor e{.dtype = expected.dtype, .shape = expected.shape, .bytes = expected.data};
    int64_t bad = 0;
    int64_t first = -1;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double a = element(actual, i);
      const double x = element(e, i);
      if (!close_enough(a, x)) {
        if (first < 0) first = i;
        ++bad;
        worst = std::max(worst, std::fabs(a - x));
      }
    }
    if (bad > 0) {
      return fmt::format("output '{}': {} of {} elements differ (first at {}: {} vs {}; max abs diff {:.3g})", name,
                         bad, n, first, element(actual, first), element(e, first), worst);
    }
    return "";
  }
  if (actual.bytes != expected.data) {
    const size_t size = dtype_info(expected.dtype).block_bytes;
    size_t first = 0;
    while (first < actual.bytes.size() && actual.bytes[first] == expected.data[first]) ++first;
    return fmt::format("output '{}': {} values differ from element {}", name, expected.dtype, first / size);
  }
  return "";
}

CaseResult run_case(const fs::path& dir, const Options& options) {
  CaseResult result;
  result.name = dir.filename().string();
  result.expanded = result.name.find("_expanded") != std::string::npos;
  const std::vector<std::byte> bytes = read_bytes(dir / "model.onnx");
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    result.reason = "model.onnx does not parse";
    return result;
  }
  std::string skip;
  result.applicable = classify(dir, proto, &skip).empty();
  if (!skip.empty()) {
    result.outcome = Outcome::kSkip;
    result.reason = skip;
    return result;
  }
  std::set<std::string> initializers;
  for (const auto& t : proto.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> input_names;
  for (const auto& v : proto.graph().input()) {
    if (initializers.count(v.name()) == 0) input_names.push_back(v.name());
  }
  std::vector<std::string> output_names;
  for (const auto& v : proto.graph().output()) output_names.push_back(v.name());

  Result<std::unique_ptr<runtime::Model>> model =
      runtime::Model::load((dir / "model.onnx").string(), {.device = options.device, .fallback_device = "cpu"});
  if (!model.ok()) {
    result.reason = "load: " + model.status().to_string();
    return result;
  }
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().starts_with("test_data_set_")) sets.push_back(entry.path());
  }
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    runtime::TensorMap inputs;
    for (size_t i = 0; i < input_names.size(); ++i) {
      const fs::path file = set / fmt::format("input_{}.pb", i);
      if (!fs::exists(file)) continue;  // an optional input left out
      Result<std::pair<std::string, graph::TensorValue>> t = formats::read_onnx_tensor(read_bytes(file));
      if (!t.ok()) {
        result.reason = fmt::format("{}: {}", file.string(), t.status().to_string());
        return result;
      }
      inputs.emplace(input_names[i], HostTensor{.dtype = t->second.dtype, .shape = t->second.shape,
                                                .bytes = std::move(t->second.data)});
    }
    Result<runtime::TensorMap> outputs = (*model)->run(inputs);
    if (!outputs.ok()) {
      result.reason = fmt::format("run ({}): {}", set.filename().string(), outputs.status().to_string());
      return result;
    }
    for (size_t i = 0; i < output_names.size(); ++i) {
      const fs::path file = set / fmt::format("output_{}.pb", i);
      if (!fs::exists(file)) continue;
      Result<std::pair<std::string, graph::TensorValue>> expected = formats::read_onnx_tensor(read_bytes(file));
      if (!expected.ok()) {
        result.reason = fmt::format("{}: {}", file.string(), expected.status().to_string());
        return result;
      }
      auto actual = outputs->find(output_names[i]);
      if (actual == outputs->end()) {
        result.reason = fmt::format("no output '{}'", output_names[i]);
        return result;
      }
      const std::string diff = compare(output_names[i], actual->second, expected->second);
      if (!diff.empty()) {
        result.reason = fmt::format("{}: {}", set.filename().string(), diff);
        return result;
      }
    }
  }
  result.outcome = Outcome::kPass;
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--data") options.data = value();
    else if (arg == "--device") options.device = value();
    else if (arg == "--filter") options.filter = value();
    else if (arg == "--report") options.report = value();
    else if (arg == "--min-applicable") options.min_applicable = std::stoi(value());
    else if (arg == "--verbose") options.verbose = true;
    else {
      std::fprintf(stderr, "usage: onnx_conformance [--data DIR] [--device D] [--filter REGEX] [--report FILE] "
                           "[--min-applicable N] [--verbose]\n");
      return 2;
    }
  }
  if (!fs::is_directory(options.data)) {
    std::printf("no ONNX test data at %s (Debian package libonnx-testdata): nothing to run\n", options.data.c_str());
    return options.min_applicable > 0 ? 1 : 0;
  }
  std::vector<fs::path> cases;
  const std::regex filter(options.filter.empty() ? ".*" : options.filter);
  for (const auto& entry : fs::directory_iterator(options.data)) {
    if (!entry.is_directory()) continue;
    if (!options.filter.empty() && !std::regex_search(entry.path().filename().string(), filter)) continue;
    cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  std::map<std::string, std::array<int, 3>> counts;  // group -> pass, fail, skip
  std::vector<CaseResult> results;
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& dir : cases) {
    CaseResult r = run_case(dir, options);
    const char* tag = r.outcome == Outcome::kPass ? "PASS" : r.outcome == Outcome::kFail ? "FAIL" : "SKIP";
    if (options.verbose || r.outcome != Outcome::kPass || !options.filter.empty()) {
      std::printf("%s %s%s%s\n", tag, r.name.c_str(), r.reason.empty() ? "" : ": ", r.reason.c_str());
    }
    const std::string group = r.applicable ? "applicable" : r.expanded ? "expanded" : "other";
    counts[group][static_cast<size_t>(r.outcome)]++;
    results.push_back(std::move(r));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\nONNX backend node tests on %s (%zu cases, %.1f s):\n", options.device.c_str(), cases.size(), seconds);
  for (const auto& [group, c] : counts) {
    std::printf("  %-10s %4d passed, %4d failed, %4d skipped\n", group.c_str(), c[0], c[1], c[2]);
  }
  if (!options.report.empty()) {
    std::ofstream out(options.report);
    out << fmt::format("# ONNX backend node tests on {}: every case, its group and outcome\n", options.device);
    for (const CaseResult& r : results) {
      const char* tag = r.outcome == Outcome::kPass ? "PASS" : r.outcome == Outcome::kFail ? "FAIL" : "SKIP";
      out << fmt::format("{} {} [{}]{}{}\n", tag, r.name, r.applicable ? "applicable" : r.expanded ? "expanded" : "other",
                         r.reason.empty() ? "" : ": ", r.reason);
    }
  }
  const int applicable_passed = counts["applicable"][0];
  if (options.min_applicable >= 0 && applicable_passed < options.min_applicable) {
    std::printf("FAILED: %d applicable cases passed, at least %d expected\n", applicable_passed, options.min_applicable);
    return 1;
  }
  return 0;
}
