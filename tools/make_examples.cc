// hxrt-make-examples: writes the example graphs and inputs of examples/ (README.md there), deterministically
// (fixed seeds), so the committed files can be regenerated and the CLI tests can make fresh copies.
//
//   mlp.hxrt        x f32[batch, 64] → MatMul → Add → Gelu → MatMul → Add → Softmax → y f32[batch, 10]
//   cnn_block.hxrt  x f32[1, 3, 32, 32] → Conv 3x3 pad 1 → BatchNormalization → Relu → Conv 3x3 pad 1 →
//                   BatchNormalization → Relu → y f32[1, 16, 32, 32]
//   two_tower.hxrt  x f32[batch, 64] → two independent towers (MatMul → Add → Gelu/Relu → MatMul, 256 wide) →
//                   Add → Softmax → probs f32[batch, 32]: branches the planner puts on separate streams
//   mlp_input.npy   f32[4, 64]
//   cnn_input.npy   f32[1, 3, 32, 32]
//   two_tower_input.npy  f32[64, 64]
// With --test-files it also writes the broken inputs the CLI tests feed to `hxrt run` (never committed):
//   mlp_input_wrong_width.npy  f32[4, 32]      mlp_input_i32.npy  i32[4, 64]
//   truncated.npy              a .npy file cut inside its data
//   unsupported_op.hxrt        x → FancyOp (an op with no schema) → y
//   mlp_input_nan.npy          f32[4, 64] with one NaN (for --check-numerics)
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "hxrt/base/host_tensor.h"
#include "hxrt/formats/graph_file.h"
#include "hxrt/formats/npy.h"
#include "hxrt/graph/graph.h"
#include "hxrt/ops/op_schema.h"
#include "hxrt/ops/registries.h"

namespace hxrt::tools {
namespace {

using graph::Dim;
using graph::Graph;
using Names = std::vector<std::string>;

// Opset versions of the default-domain ops used here (docs/ops.md).
constexpr int kMatMulVersion = 13;
constexpr int kAddVersion = 14;
constexpr int kGeluVersion = 20;
constexpr int kSoftmaxVersion = 13;
constexpr int kConvVersion = 11;
constexpr int kBatchNormVersion = 15;
constexpr int kReluVersion = 14;

constexpr int kMlpIn = 64;
constexpr int kMlpHidden = 128;
constexpr int kMlpOut = 10;
constexpr int kCnnInChannels = 3;
constexpr int kCnnChannels = 16;
constexpr int kCnnSize = 32;
constexpr int kTowerWidth = 256;
constexpr int kTowerOut = 32;
constexpr int kTowerBatch = 64;

Status add_weight(Graph& g, const std::string& name, const HostTensor& t) {
  return g.add_initializer(name, {t.dtype, graph::SymShape::from(t.shape)}, graph::WeightData::copy_of(t.bytes))
      .status();
}

// Uniform in ±1/sqrt(fan_in): keeps activations of order one through the layers.
HostTensor layer_weight(Shape shape, int64_t fan_in, std::mt19937& rng) {
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  return HostTensor::random_f32(shape, rng, -bound, bound);
}

Status add_node(Graph& g, const std::string& name, const std::string& op, const Names& inputs,
                const std::string& output, int version, graph::AttributeMap attrs = {}) {
  return g.add_node(name, op, inputs, Names{output}, std::move(attrs), "", version).status();
}

Result<Graph> make_mlp() {
  std::mt19937 rng(1234);
  Graph g("mlp");
  HXRT_RETURN_IF_ERROR(g.add_input("x", {DType::kF32, {Dim::symbol("batch"), kMlpIn}}).status());
  HXRT_RETURN_IF_ERROR(add_weight(g, "fc1.weight", layer_weight({kMlpIn, kMlpHidden}, kMlpIn, rng)));       // (64, 128)
  HXRT_RETURN_IF_ERROR(add_weight(g, "fc1.bias", layer_weight({kMlpHidden}, kMlpIn, rng)));                 // (128)
  HXRT_RETURN_IF_ERROR(add_weight(g, "fc2.weight", layer_weight({kMlpHidden, kMlpOut}, kMlpHidden, rng)));  // (128, 10)
  HXRT_RETURN_IF_ERROR(add_weight(g, "fc2.bias", layer_weight({kMlpOut}, kMlpHidden, rng)));                // (10)
  graph::AttributeMap softmax;
  softmax.set("axis", int64_t{-1});
  HXRT_RETURN_IF_ERROR(add_node(g, "fc1", "MatMul", {"x", "fc1.weight"}, "fc1.out", kMatMulVersion));  // (batch, 128)
  HXRT_RETURN_IF_ERROR(add_node(g, "fc1.add", "Add", {"fc1.out", "fc1.bias"}, "fc1.biased", kAddVersion));
  HXRT_RETURN_IF_ERROR(add_node(g, "act", "Gelu", {"fc1.biased"}, "hidden", kGeluVersion));
  HXRT_RETURN_IF_ERROR(
      add_node(g, "fc2", "MatMul", {"hidden", "fc2.weight"}, "fc2.out", kMatMulVersion));  // (batch, 10)
  HXRT_RETURN_IF_ERROR(add_node(g, "fc2.add", "Add", {"fc2.out", "fc2.bias"}, "logits", kAddVersion));
  HXRT_RETURN_IF_ERROR(add_node(g, "softmax", "Softmax", {"logits"}, "probs", kSoftmaxVersion, softmax));
  HXRT_RETURN_IF_ERROR(g.mark_output("probs"));
  return g;
}

// Conv (3x3, pad 1, bias) → BatchNormalization → Relu, named `prefix`.conv/.bn/.relu; returns the output name.
Result<std::string> add_conv_bn_relu(Graph& g, const std::string& prefix, const std::string& input, int in_channels,
                                     std::mt19937& rng) {
  const int64_t fan_in = int64_t{in_channels} * 3 * 3;
  HXRT_RETURN_IF_ERROR(add_weight(g, prefix + ".weight", layer_weight({kCnnChannels, in_channels, 3, 3}, fan_in, rng)));
  HXRT_RETURN_IF_ERROR(add_weight(g, prefix + ".bias", layer_weight({kCnnChannels}, fan_in, rng)));
  HXRT_RETURN_IF_ERROR(add_weight(g, prefix + ".bn.scale", HostTensor::random_f32({kCnnChannels}, rng, 0.5f, 1.5f)));
  HXRT_RETURN_IF_ERROR(add_weight(g, prefix + ".bn.bias", HostTensor::random_f32({kCnnChannels}, rng, -0.5f, 0.5f)));
  HXRT_RETURN_IF_ERROR(add_weight(g, prefix + ".bn.mean", HostTensor::random_f32({kCnnChannels}, rng, -0.5f, 0.5f)));
  HXRT_RETURN_IF_ERROR(add_weight(g, prefix + ".bn.var", HostTensor::random_f32({kCnnChannels}, rng, 0.5f, 1.5f)));
  graph::AttributeMap conv;
  conv.set("kernel_shape", std::vector<int64_t>{3, 3});
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.set("strides", std::vector<int64_t>{1, 1});
  graph::AttributeMap bn;
  bn.set("epsilon", 1e-5);
  HXRT_RETURN_IF_ERROR(add_node(g, prefix + ".conv", "Conv", {input, prefix + ".weight", prefix + ".bias"},
                                prefix + ".conv.out", kConvVersion, conv));
  HXRT_RETURN_IF_ERROR(add_node(
      g, prefix + ".bn", "BatchNormalization",
      {prefix + ".conv.out", prefix + ".bn.scale", prefix + ".bn.bias", prefix + ".bn.mean", prefix + ".bn.var"},
      prefix + ".bn.out", kBatchNormVersion, bn));
  HXRT_RETURN_IF_ERROR(add_node(g, prefix + ".relu", "Relu", {prefix + ".bn.out"}, prefix + ".out", kReluVersion));
  return prefix + ".out";
}

Result<Graph> make_cnn_block() {
  std::mt19937 rng(5678);
  Graph g("cnn_block");
  HXRT_RETURN_IF_ERROR(g.add_input("x", {DType::kF32, {1, kCnnInChannels, kCnnSize, kCnnSize}}).status());
  HXRT_ASSIGN_OR_RETURN(const std::string h,
                        add_conv_bn_relu(g, "block1", "x", kCnnInChannels, rng));                   // (1, 16, 32, 32)
  HXRT_ASSIGN_OR_RETURN(const std::string y, add_conv_bn_relu(g, "block2", h, kCnnChannels, rng));  // (1, 16, 32, 32)
  HXRT_RETURN_IF_ERROR(g.mark_output(y));
  return g;
}

// Two towers over one input, joined at the end: the planner runs them on two streams.
Result<Graph> make_two_tower() {
  std::mt19937 rng(91011);
  Graph g("two_tower");
  HXRT_RETURN_IF_ERROR(g.add_input("x", {DType::kF32, {Dim::symbol("batch"), kMlpIn}}).status());
  for (const std::string tower : {"a", "b"}) {
    HXRT_RETURN_IF_ERROR(add_weight(g, tower + ".fc1.weight", layer_weight({kMlpIn, kTowerWidth}, kMlpIn, rng)));
    HXRT_RETURN_IF_ERROR(add_weight(g, tower + ".fc1.bias", layer_weight({kTowerWidth}, kMlpIn, rng)));
    HXRT_RETURN_IF_ERROR(
        add_weight(g, tower + ".fc2.weight", layer_weight({kTowerWidth, kTowerOut}, kTowerWidth, rng)));
    HXRT_RETURN_IF_ERROR(
        add_node(g, tower + ".fc1", "MatMul", {"x", tower + ".fc1.weight"}, tower + ".fc1.out", kMatMulVersion));
    HXRT_RETURN_IF_ERROR(add_node(g, tower + ".fc1.add", "Add", {tower + ".fc1.out", tower + ".fc1.bias"},
                                  tower + ".fc1.biased", kAddVersion));
    if (tower == "a") {
      HXRT_RETURN_IF_ERROR(add_node(g, "a.act", "Gelu", {"a.fc1.biased"}, "a.hidden", kGeluVersion));
    } else {
      HXRT_RETURN_IF_ERROR(add_node(g, "b.act", "Relu", {"b.fc1.biased"}, "b.hidden", kReluVersion));
    }
    HXRT_RETURN_IF_ERROR(add_node(g, tower + ".fc2", "MatMul", {tower + ".hidden", tower + ".fc2.weight"},
                                  tower + ".out", kMatMulVersion));
  }
  graph::AttributeMap softmax;
  softmax.set("axis", int64_t{-1});
  HXRT_RETURN_IF_ERROR(add_node(g, "join", "Add", {"a.out", "b.out"}, "logits", kAddVersion));
  HXRT_RETURN_IF_ERROR(add_node(g, "softmax", "Softmax", {"logits"}, "probs", kSoftmaxVersion, softmax));
  HXRT_RETURN_IF_ERROR(g.mark_output("probs"));
  return g;
}

// Infers every value's shape (so the file carries them and the graph is known to be well-formed), then writes it.
Status write_graph(Graph graph, const ops::OpSchemaRegistry& schemas, const std::filesystem::path& path) {
  std::vector<ops::DimCheck> checks;
  HXRT_RETURN_IF_ERROR_CTX(schemas.infer_graph(graph, &checks), "inferring shapes of example '{}'", graph.name());
  HXRT_RETURN_IF_ERROR(formats::write_graph_file(graph, path.string()));
  fmt::print("wrote {} ({} nodes, {} bytes)\n", path.string(), graph.num_nodes(), std::filesystem::file_size(path));
  return ok_status();
}

Status write_input(const HostTensor& tensor, const std::filesystem::path& path) {
  HXRT_RETURN_IF_ERROR(formats::write_npy(path.string(), tensor));
  fmt::print("wrote {} ({}{}, {} bytes)\n", path.string(), tensor.dtype, tensor.shape,
             std::filesystem::file_size(path));
  return ok_status();
}

// Inputs and graphs that `hxrt run` must reject with a clear message.
Status make_test_files(const std::filesystem::path& dir) {
  std::mt19937 rng(7);
  HXRT_RETURN_IF_ERROR(write_input(HostTensor::random_f32({4, kMlpIn / 2}, rng), dir / "mlp_input_wrong_width.npy"));
  HXRT_RETURN_IF_ERROR(
      write_input(HostTensor::i32({4, kMlpIn}, std::vector<int32_t>(4 * kMlpIn, 1)), dir / "mlp_input_i32.npy"));
  HXRT_ASSIGN_OR_RETURN(std::vector<std::byte> bytes, formats::serialize_npy(HostTensor::random_f32({4, kMlpIn}, rng)));
  bytes.resize(bytes.size() - 100);
  const std::filesystem::path truncated = dir / "truncated.npy";
  std::FILE* file = std::fopen(truncated.string().c_str(), "wb");
  if (file == nullptr) return unavailable("cannot create '{}'", truncated.string());
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (std::fclose(file) != 0 || !written) return unavailable("cannot write '{}'", truncated.string());
  fmt::print("wrote {} ({} bytes, cut inside the data)\n", truncated.string(), bytes.size());

  HostTensor nan_input = HostTensor::random_f32({4, kMlpIn}, rng);
  reinterpret_cast<float*>(nan_input.bytes.data())[kMlpIn + 5] = std::nanf("");
  HXRT_RETURN_IF_ERROR(write_input(nan_input, dir / "mlp_input_nan.npy"));

  Graph g("unsupported");
  HXRT_RETURN_IF_ERROR(g.add_input("x", {DType::kF32, {4, kMlpIn}}).status());
  HXRT_RETURN_IF_ERROR(add_node(g, "fancy", "FancyOp", {"x"}, "y", 1));
  HXRT_RETURN_IF_ERROR(g.mark_output("y"));
  HXRT_RETURN_IF_ERROR(formats::write_graph_file(g, (dir / "unsupported_op.hxrt").string()));
  fmt::print("wrote {}\n", (dir / "unsupported_op.hxrt").string());
  return ok_status();
}

Status make_examples(const std::filesystem::path& dir, bool test_files) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return unavailable("cannot create directory '{}': {}", dir.string(), error.message());
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ops::Registries> registries,
                        ops::make_registries(ops::RegistriesOptions{.builtin_fusions = false}));
  const ops::OpSchemaRegistry& schemas = registries->schemas;

  HXRT_ASSIGN_OR_RETURN(Graph mlp, make_mlp());
  HXRT_RETURN_IF_ERROR(write_graph(std::move(mlp), schemas, dir / "mlp.hxrt"));
  HXRT_ASSIGN_OR_RETURN(Graph cnn, make_cnn_block());
  HXRT_RETURN_IF_ERROR(write_graph(std::move(cnn), schemas, dir / "cnn_block.hxrt"));
  HXRT_ASSIGN_OR_RETURN(Graph towers, make_two_tower());
  HXRT_RETURN_IF_ERROR(write_graph(std::move(towers), schemas, dir / "two_tower.hxrt"));

  std::mt19937 rng(42);
  HXRT_RETURN_IF_ERROR(write_input(HostTensor::random_f32({4, kMlpIn}, rng), dir / "mlp_input.npy"));
  HXRT_RETURN_IF_ERROR(
      write_input(HostTensor::random_f32({1, kCnnInChannels, kCnnSize, kCnnSize}, rng), dir / "cnn_input.npy"));
  HXRT_RETURN_IF_ERROR(write_input(HostTensor::random_f32({kTowerBatch, kMlpIn}, rng), dir / "two_tower_input.npy"));
  return test_files ? make_test_files(dir) : ok_status();
}

}  // namespace
}  // namespace hxrt::tools

int main(int argc, char** argv) {
  CLI::App app{"hxrt-make-examples: write the example graphs and inputs (deterministic)"};
  std::string out_dir = "examples";
  app.add_option("--out-dir", out_dir, "Directory to write into")->capture_default_str();
  bool test_files = false;
  app.add_flag("--test-files", test_files, "Also write the broken inputs the CLI tests use");
  CLI11_PARSE(app, argc, argv);
  hxrt::Status status = hxrt::tools::make_examples(out_dir, test_files);
  if (!status.ok()) {
    fmt::print(stderr, "hxrt-make-examples: {}\n", status.to_string());
    return 1;
  }
  return 0;
}
