// runtime::Model against the hand-assembled path (registries, session, ExecutionPlan, Executor) on the example
// graphs, the heterogeneous split against the CPU, add_node's default version, and the errors of load and run.
#include "hxrt/runtime/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "hxrt/formats/graph_file.h"
#include "hxrt/formats/npy.h"
#include "hxrt/kernels/builtin_registries.h"

namespace hxrt::runtime {
namespace {

const std::string kExamples = std::string(HXRT_SOURCE_DIR) + "/examples/";

HostTensor example_input(const std::string& name) {
  Result<HostTensor> tensor = formats::read_npy(kExamples + name);
  EXPECT_TRUE(tensor.ok()) << tensor.status().to_string();
  return tensor.ok() ? std::move(tensor).value() : HostTensor{};
}

// The outputs of `graph_file` on `inputs` through the pieces a Model assembles, put together by hand.
TensorMap hand_assembled_run(const std::string& graph_file, const TensorMap& inputs) {
  Result<graph::Graph> graph = formats::read_graph_file(graph_file);
  EXPECT_TRUE(graph.ok()) << graph.status().to_string();
  Result<std::unique_ptr<ops::Registries>> registries = kernels::make_builtin_registries();
  EXPECT_TRUE(registries.ok()) << registries.status().to_string();
  hal::DriverRegistry drivers;
  EXPECT_TRUE(hal::register_builtin_drivers(drivers).ok());
  Result<std::unique_ptr<Session>> session = Session::create(drivers, "cpu");
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  if (!graph.ok() || !registries.ok() || !session.ok()) return {};
  Result<std::unique_ptr<ExecutionPlan>> plan = ExecutionPlan::build(
      std::move(graph).value(), (*session)->device().info(), PlanContext::of(**registries), PlanOptions{});
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return {};
  Result<std::unique_ptr<Executor>> executor =
      Executor::create(**session, std::shared_ptr<const ExecutionPlan>(std::move(plan).value()));
  EXPECT_TRUE(executor.ok()) << executor.status().to_string();
  if (!executor.ok()) return {};
  Result<TensorMap> outputs = (*executor)->run(inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
  return outputs.ok() ? std::move(outputs).value() : TensorMap{};
}

TEST(ModelTest, ExampleGraphsMatchTheHandAssembledPathBitForBit) {
  using Example = std::pair<std::string, std::string>;  // graph file, input file
  for (const auto& [graph_file, input] : std::vector<Example>{{"mlp.hxrt", "mlp_input.npy"},
                                                         {"cnn_block.hxrt", "cnn_input.npy"},
                                                         {"two_tower.hxrt", "two_tower_input.npy"}}) {
    const TensorMap inputs{{"x", example_input(input)}};
    const TensorMap expected = hand_assembled_run(kExamples + graph_file, inputs);
    ASSERT_FALSE(expected.empty()) << graph_file;
    Result<std::unique_ptr<Model>> model = Model::load(kExamples + graph_file);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    EXPECT_EQ((*model)->input_names(), std::vector<std::string>{"x"}) << graph_file;
    Result<TensorMap> outputs = (*model)->run(inputs);
    ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
    ASSERT_EQ(outputs->size(), expected.size()) << graph_file;
    for (const auto& [name, tensor] : expected) {
      ASSERT_TRUE(outputs->contains(name)) << graph_file << " " << name;
      EXPECT_TRUE(outputs->at(name) == tensor) << graph_file << ": output '" << name << "' differs";
    }
    // A second run on the same model gives the same bytes.
    Result<TensorMap> again = (*model)->run(inputs);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_TRUE(*again == *outputs) << graph_file;
    Result<TeardownReport> report = (*model)->close();
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    EXPECT_TRUE(report->clean()) << report->to_string();
  }
}

TEST(ModelTest, ThePlanAndItsExplanationsAreReachable) {
  Result<std::unique_ptr<Model>> model = Model::load(kExamples + "mlp.hxrt");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->output_names(), std::vector<std::string>{"probs"});
  EXPECT_FALSE((*model)->plan().fusion_groups().empty());
  EXPECT_NE((*model)->plan().describe().find("fusion groups"), std::string::npos) << (*model)->plan().describe();
  for (const ExecutionObject& object : (*model)->plan().objects()) EXPECT_FALSE(object.selection_reason.empty());
  EXPECT_EQ((*model)->fallback_session(), nullptr);

  ModelOptions unfused;
  unfused.plan.fuse = false;
  unfused.plan.selection.forced.emplace("fc2", "BatchMatMulV3");
  Result<std::unique_ptr<Model>> forced = Model::load(kExamples + "mlp.hxrt", unfused);
  ASSERT_TRUE(forced.ok()) << forced.status().to_string();
  EXPECT_TRUE((*forced)->plan().fusion_groups().empty());
  bool found = false;
  for (const ExecutionObject& object : (*forced)->plan().objects()) {
    if ((*forced)->graph().node(object.node).name != "fc2") continue;
    found = true;
    EXPECT_EQ(object.kernel->name, "BatchMatMulV3");
  }
  EXPECT_TRUE(found);
}

TEST(ModelTest, OpenClWithTheCpuFallbackMatchesTheCpu) {
  hal::DriverRegistry drivers;
  ASSERT_TRUE(hal::register_builtin_drivers(drivers).ok());
  if (!Session::create(drivers, "opencl").ok()) GTEST_SKIP() << "no OpenCL device";
  const TensorMap inputs{{"x", example_input("mlp_input.npy")}};
  ModelOptions options{.device = "opencl", .fallback_device = "cpu", .drivers = &drivers};
  options.plan.fallback_ops = {"Softmax"};
  Result<std::unique_ptr<Model>> model = Model::load(kExamples + "mlp.hxrt", options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->plan().split().fallback_nodes, 1);
  ASSERT_NE((*model)->fallback_session(), nullptr);
  Result<TensorMap> outputs = (*model)->run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
  const TensorMap expected = hand_assembled_run(kExamples + "mlp.hxrt", inputs);
  ASSERT_TRUE(outputs->contains("probs"));
  const std::vector<float> got = outputs->at("probs").to_f32();
  const std::vector<float> want = expected.at("probs").to_f32();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;

  // Without a fallback device the same forced op is an error, not a silent CPU run.
  ModelOptions no_fallback{.device = "opencl", .drivers = &drivers};
  no_fallback.plan.fallback_ops = {"Softmax"};
  Result<std::unique_ptr<Model>> refused = Model::load(kExamples + "mlp.hxrt", no_fallback);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fallback"), std::string::npos) << refused.status().to_string();
}

// Relu → Softmax with add_node's default version.
graph::Graph latest_version_graph() {
  graph::Graph g("latest");
  EXPECT_TRUE(g.add_input("x", {DType::kF32, graph::SymShape::from(Shape{2, 3})}).ok());
  graph::AttributeMap softmax;
  softmax.set("axis", int64_t{-1});
  EXPECT_TRUE(g.add_node("act", "Relu", std::vector<std::string>{"x"}, std::vector<std::string>{"r"}).ok());
  EXPECT_TRUE(
      g.add_node("sm", "Softmax", std::vector<std::string>{"r"}, std::vector<std::string>{"y"}, softmax).ok());
  EXPECT_TRUE(g.mark_output("y").ok());
  return g;
}

TEST(ModelTest, AddNodeDefaultsToTheOpsCurrentVersion) {
  graph::Graph g = latest_version_graph();
  EXPECT_EQ(g.node(0).version, graph::kLatestVersion);
  EXPECT_EQ(g.node(1).version, graph::kLatestVersion);

  // A graph file holds resolved versions only.
  const std::string path = (std::filesystem::temp_directory_path() / "hxrt_model_test_latest.hxrt").string();
  Status unresolved = formats::write_graph_file(g, path);
  ASSERT_FALSE(unresolved.ok());
  EXPECT_NE(unresolved.message().find("resolve_versions"), std::string::npos) << unresolved.to_string();

  Result<std::unique_ptr<ops::Registries>> registries = kernels::make_builtin_registries();
  ASSERT_TRUE(registries.ok()) << registries.status().to_string();
  ASSERT_TRUE((*registries)->schemas.resolve_versions(g).ok());
  for (graph::NodeId id = 0; id < g.num_nodes(); ++id) {
    const graph::Node& node = g.node(id);
    Result<const ops::OpSchema*> newest = (*registries)->schemas.find(node.op_type, node.domain, graph::kLatestVersion);
    ASSERT_TRUE(newest.ok()) << newest.status().to_string();
    EXPECT_EQ(node.version, (*newest)->since_version) << node.op_type;
    EXPECT_GT(node.version, 1) << node.op_type << ": version 1 is what add_node used to default to";
  }
  ASSERT_TRUE(formats::write_graph_file(g, path).ok());
  Result<graph::Graph> reread = formats::read_graph_file(path);
  ASSERT_TRUE(reread.ok()) << reread.status().to_string();
  EXPECT_EQ(reread->node(1).version, g.node(1).version);
  std::filesystem::remove(path);

  // Planning resolves them too, and the graph runs (the same bytes as the graph with resolved versions).
  Result<std::unique_ptr<Model>> model =
      Model::create(latest_version_graph(), ModelOptions{.registries = registries->get()});
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (const ExecutionObject& object : (*model)->plan().objects()) {
    EXPECT_NE((*model)->graph().node(object.node).version, graph::kLatestVersion);
  }
  std::mt19937 rng(5);
  const TensorMap inputs{{"x", HostTensor::random_f32(Shape{2, 3}, rng)}};
  Result<TensorMap> latest = (*model)->run(inputs);
  ASSERT_TRUE(latest.ok()) << latest.status().to_string();
  Result<std::unique_ptr<Model>> pinned_model =
      Model::create(std::move(g), ModelOptions{.registries = registries->get()});
  ASSERT_TRUE(pinned_model.ok()) << pinned_model.status().to_string();
  Result<TensorMap> pinned = (*pinned_model)->run(inputs);
  ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
  EXPECT_TRUE(*latest == *pinned);
}

TEST(ModelTest, BadFilesDevicesAndInputsAreClearErrors) {
  Result<std::unique_ptr<Model>> missing = Model::load(kExamples + "nonexistent.hxrt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().to_string().find("nonexistent.hxrt"), std::string::npos) << missing.status().to_string();

  const std::string garbage = (std::filesystem::temp_directory_path() / "hxrt_model_test_garbage.hxrt").string();
  {
    std::ofstream out(garbage, std::ios::binary);
    out << "this is not a graph file, only some bytes that are long enough to hold a header................";
  }
  Result<std::unique_ptr<Model>> bad = Model::load(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("hxrt_model_test_garbage.hxrt"), std::string::npos)
      << bad.status().to_string();
  std::filesystem::remove(garbage);

  Result<std::unique_ptr<Model>> no_device = Model::load(kExamples + "mlp.hxrt", ModelOptions{.device = "npu"});
  ASSERT_FALSE(no_device.ok());
  EXPECT_NE(no_device.status().to_string().find("npu"), std::string::npos) << no_device.status().to_string();

  Result<std::unique_ptr<Model>> model = Model::load(kExamples + "mlp.hxrt");
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const HostTensor x = example_input("mlp_input.npy");
  struct Case {
    TensorMap inputs;
    std::string expected;
  };
  std::vector<Case> cases;
  cases.push_back({{}, "missing input 'x'"});
  cases.push_back({{{"x", x}, {"z", x}}, "unknown input 'z'"});
  cases.push_back({{{"x", HostTensor::i32(Shape{4, 64}, std::vector<int32_t>(256, 1))}}, "'x'"});
  std::mt19937 rng(7);
  cases.push_back({{{"x", HostTensor::random_f32(Shape{4, 32}, rng)}}, "axis 1: expected 64, got 32"});
  for (const Case& c : cases) {
    Result<TensorMap> outputs = (*model)->run(c.inputs);
    ASSERT_FALSE(outputs.ok()) << c.expected;
    EXPECT_EQ(outputs.status().code(), StatusCode::kInvalidArgument) << outputs.status().to_string();
    EXPECT_NE(outputs.status().to_string().find(c.expected), std::string::npos) << outputs.status().to_string();
  }
  // The model runs on after the rejected calls.
  Result<TensorMap> outputs = (*model)->run({{"x", x}});
  EXPECT_TRUE(outputs.ok()) << outputs.status().to_string();
}

TEST(ModelTest, AFlippedBitInAWeightIsDataLossAtLoad) {
  std::ifstream in(kExamples + "mlp.hxrt", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  bytes[bytes.size() - 100] ^= 0x10;  // inside the weight section, the file's last part
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("hxrt_flipped_" + std::to_string(::getpid()) + ".hxrt");
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  Result<std::unique_ptr<Model>> verified = Model::load(path.string());
  ASSERT_FALSE(verified.ok());
  EXPECT_EQ(verified.status().code(), StatusCode::kDataLoss) << verified.status().to_string();
  EXPECT_NE(verified.status().to_string().find("checksum"), std::string::npos) << verified.status().to_string();
  ModelOptions fast;
  fast.verify_weights = false;  // the caller's choice: loads, with the flipped weight
  EXPECT_TRUE(Model::load(path.string(), fast).ok());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hxrt::runtime
