// runtime::Model on an ONNX model planned at bind time (a Reshape whose shape is a graph input): prepare() plans
// it without running, run() gives the reshaped input, and import_onnx() imports it without planning — with the
// bind-time needs when the values are missing, with the values bound as constants when they are given.
#include "hxrt/runtime/model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

namespace hxrt::runtime {
namespace {

std::string temp_model_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("hxrt_model_onnx_test_{}_{}.onnx", name, ::getpid()))
      .string();
}

// start, limit, delta: i64 scalars -> Range -> y. Its converter asks for one value at a time.
std::string write_range_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("range");
  onnx::NodeProto* node = g->add_node();
  node->set_name("range");
  node->set_op_type("Range");
  for (const char* name : {"start", "limit", "delta"}) {
    onnx::ValueInfoProto* info = g->add_input();
    info->set_name(name);
    info->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
    info->mutable_type()->mutable_tensor_type()->mutable_shape();
    node->add_input(name);
  }
  node->add_output("y");
  g->add_output()->set_name("y");
  const std::string path = temp_model_path("range");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  EXPECT_TRUE(model.SerializeToOstream(&out));
  return path;
}

// x: f32[batch, 6], shape: i64[2] -> Reshape -> y.
std::string write_reshape_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("reshape_bind");
  const auto add_input = [&](const std::string& name, int elem_type, std::vector<std::string> dims) {
    onnx::ValueInfoProto* info = g->add_input();
    info->set_name(name);
    onnx::TypeProto::Tensor* t = info->mutable_type()->mutable_tensor_type();
    t->set_elem_type(elem_type);
    for (const std::string& d : dims) {
      if (d[0] >= '0' && d[0] <= '9') {
        t->mutable_shape()->add_dim()->set_dim_value(std::stoll(d));
      } else {
        t->mutable_shape()->add_dim()->set_dim_param(d);
      }
    }
  };
  add_input("x", onnx::TensorProto::FLOAT, {"batch", "6"});
  add_input("shape", onnx::TensorProto::INT64, {"2"});
  onnx::NodeProto* node = g->add_node();
  node->set_name("reshape");
  node->set_op_type("Reshape");
  node->add_input("x");
  node->add_input("shape");
  node->add_output("y");
  g->add_output()->set_name("y");
  g->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  const std::string path = temp_model_path("reshape");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  EXPECT_TRUE(model.SerializeToOstream(&out));
  return path;
}

class ModelOnnxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = write_reshape_model();
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-2.0F, 2.0F);
    std::vector<float> values(12);
    for (float& v : values) v = dist(rng);
    inputs_.emplace("x", HostTensor::f32(Shape({2, 6}), values));
    inputs_.emplace("shape", HostTensor::i64(Shape({2}), {3, 4}));
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string path_;
  TensorMap inputs_;
};

TEST_F(ModelOnnxTest, PrepareThenRunAtBindTime) {
  Result<std::unique_ptr<Model>> model = Model::load(path_);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  ASSERT_NE((*model)->onnx_import(), nullptr);
  ASSERT_TRUE((*model)->onnx_import()->bind_time.has_value());
  EXPECT_EQ((*model)->onnx_import()->bind_time->input_values, std::vector<std::string>{"shape"});
  ASSERT_EQ((*model)->onnx_import()->input_types.size(), 2U);
  EXPECT_EQ((*model)->onnx_import()->input_types[0].to_string(), "f32[batch, 6]");
  EXPECT_FALSE((*model)->has_plan());
  EXPECT_EQ((*model)->plan_onnx_import(), nullptr);

  TensorMap missing = inputs_;
  missing.erase("shape");
  EXPECT_EQ((*model)->prepare(missing).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*model)->has_plan());

  ASSERT_TRUE((*model)->prepare(inputs_).ok());
  ASSERT_TRUE((*model)->has_plan());
  ASSERT_NE((*model)->plan_onnx_import(), nullptr);
  EXPECT_FALSE((*model)->plan_onnx_import()->bind_time.has_value());
  EXPECT_EQ((*model)->plan_onnx_import()->nodes.size(), 1U);

  // Reshape keeps the elements in order: the reference is the input's bytes.
  Result<TensorMap> outputs = (*model)->run(inputs_);
  ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
  const HostTensor& y = outputs->at("y");
  EXPECT_EQ(y.shape, Shape({3, 4}));
  ASSERT_EQ(y.bytes.size(), inputs_.at("x").bytes.size());
  EXPECT_EQ(std::memcmp(y.bytes.data(), inputs_.at("x").bytes.data(), y.bytes.size()), 0);
  ASSERT_TRUE((*model)->close().ok());
}

TEST_F(ModelOnnxTest, ImportWithoutPlanning) {
  Result<formats::OnnxImport> needs = Model::import_onnx(path_);
  ASSERT_TRUE(needs.ok()) << needs.status().to_string();
  ASSERT_TRUE(needs->bind_time.has_value());
  EXPECT_EQ(needs->bind_time->input_values, std::vector<std::string>{"shape"});

  // Only the value the import needs: `x` stays an input with its symbolic batch; `shape` is bound.
  TensorMap shape_only{{"shape", inputs_.at("shape")}};
  Result<formats::OnnxImport> bound = Model::import_onnx(path_, shape_only);
  ASSERT_TRUE(bound.ok()) << bound.status().to_string();
  ASSERT_FALSE(bound->bind_time.has_value());
  const graph::Graph& g = bound->graph;
  ASSERT_EQ(g.inputs().size(), 1U);
  EXPECT_EQ(g.value(g.inputs()[0]).desc.to_string(), "f32[batch, 6]");
  ASSERT_EQ(g.outputs().size(), 1U);
  EXPECT_EQ(g.value(g.outputs()[0]).desc.to_string(), "f32[3, 4]");
  EXPECT_TRUE(g.validate().ok());
}

// Each run binds every value the import asks for, and the plans are keyed by all of them: a new limit is a new plan.
TEST(ModelOnnxRangeTest, BindsEveryValueTheImportNeeds) {
  const std::string path = write_range_model();
  Result<std::unique_ptr<Model>> model = Model::load(path);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const auto scalar = [](int64_t v) { return HostTensor::i64(Shape(), {v}); };
  for (const auto& [limit, expected] : {std::pair<int64_t, std::vector<int64_t>>{7, {1, 3, 5}},
                                        std::pair<int64_t, std::vector<int64_t>>{10, {1, 3, 5, 7, 9}}}) {
    Result<TensorMap> outputs = (*model)->run({{"start", scalar(1)}, {"limit", scalar(limit)}, {"delta", scalar(2)}});
    ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
    EXPECT_EQ(outputs->at("y").to_i64(), expected) << "limit " << limit;
  }
  ASSERT_TRUE((*model)->close().ok());
  std::filesystem::remove(path);
}

TEST_F(ModelOnnxTest, BadFileIsAnError) {
  {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out << "not a model";
  }
  EXPECT_EQ(Model::load(path_).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Model::import_onnx(path_).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hxrt::runtime
