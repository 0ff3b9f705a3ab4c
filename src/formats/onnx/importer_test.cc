// The ONNX importer on bad input: every malformed model is a Status that names the file and the node, value or
// field at fault, never a crash (formats/onnx.h, "Errors"). The models are built here with the protobuf classes
// (<onnx/onnx_pb.h>), each from a valid one with one thing broken; run-time input checks go through runtime::Model.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "formats/onnx/converter.h"
#include "hxrt/formats/onnx.h"
#include "hxrt/kernels/builtin_registries.h"
#include "hxrt/runtime/model.h"

namespace hxrt::formats {
namespace {

namespace pb = ::onnx;

constexpr const char* kName = "bad.onnx";

void add_tensor_value_info(pb::ValueInfoProto* info, const std::string& name, int32_t elem_type,
                           const std::vector<int64_t>& dims) {
  info->set_name(name);
  pb::TypeProto::Tensor* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  pb::TensorShapeProto* shape = tensor->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

pb::NodeProto* add_node(pb::GraphProto* graph, const std::string& name, const std::string& op_type,
                        const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  pb::NodeProto* node = graph->add_node();
  node->set_name(name);
  node->set_op_type(op_type);
  for (const std::string& in : inputs) node->add_input(in);
  for (const std::string& out : outputs) node->add_output(out);
  return node;
}

// y = Relu(x + w): x f32 [2, 3] input, w f32 [2, 3] initializer; IR 8, ai.onnx opset `opset`.
pb::ModelProto valid_model(int opset = 17) {
  pb::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("importer_test");
  pb::OperatorSetIdProto* id = model.add_opset_import();
  id->set_domain("");
  id->set_version(opset);
  pb::GraphProto* graph = model.mutable_graph();
  graph->set_name("g");
  add_tensor_value_info(graph->add_input(), "x", pb::TensorProto::FLOAT, {2, 3});
  pb::TensorProto* w = graph->add_initializer();
  w->set_name("w");
  w->set_data_type(pb::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  for (int i = 0; i < 6; ++i) w->add_float_data(0.5f * static_cast<float>(i) - 1.0f);
  add_node(graph, "add", "Add", {"x", "w"}, {"s"});
  add_node(graph, "relu", "Relu", {"s"}, {"y"});
  add_tensor_value_info(graph->add_output(), "y", pb::TensorProto::FLOAT, {2, 3});
  return model;
}

std::string serialize(const pb::ModelProto& model) {
  std::string bytes;
  EXPECT_TRUE(model.SerializeToString(&bytes));
  return bytes;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

class OnnxImporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<ops::Registries>> registries = kernels::make_builtin_registries();
    ASSERT_TRUE(registries.ok()) << registries.status().to_string();
    registries_ = std::move(registries).value();
    dir_ = std::filesystem::temp_directory_path() / ("hxrt_onnx_importer_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  OnnxImportOptions options() const { return {.schemas = &registries_->schemas}; }

  Result<OnnxImport> import(const pb::ModelProto& model) {
    const std::string bytes = serialize(model);
    return import_onnx(as_bytes(bytes), options(), kName);
  }

  // Writes `model` as dir/name and returns the path.
  std::string write(const pb::ModelProto& model, const std::string& name = "model.onnx") {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    const std::string bytes = serialize(model);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  // The import fails with `code`, and its message names each of `parts`.
  template <typename T>
  static void expect_error(const Result<T>& result, StatusCode code, const std::vector<std::string>& parts) {
    ASSERT_FALSE(result.ok()) << "expected " << status_code_name(code);
    const std::string text = result.status().to_string();
    EXPECT_EQ(result.status().code(), code) << text;
    for (const std::string& part : parts)
      EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' in " << text;
  }

  std::unique_ptr<ops::Registries> registries_;
  std::filesystem::path dir_;
};

TEST_F(OnnxImporterTest, TheValidModelImports) {
  Result<OnnxImport> imported = import(valid_model());
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  EXPECT_EQ(imported->inputs, std::vector<std::string>{"x"});
  ASSERT_EQ(imported->outputs.size(), 1u);
  EXPECT_EQ(imported->outputs[0].name, "y");
}

TEST_F(OnnxImporterTest, EveryTruncationIsAStatusNamingTheFile) {
  const std::string bytes = serialize(valid_model());
  int failures = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string prefix = bytes.substr(0, n);
    Result<OnnxImport> imported = import_onnx(as_bytes(prefix), options(), kName);
    if (imported.ok()) continue;  // a cut at a field boundary is another valid (smaller) model
    ++failures;
    EXPECT_NE(imported.status().to_string().find(kName), std::string::npos)
        << n << ": " << imported.status().to_string();
  }
  EXPECT_GT(failures, static_cast<int>(bytes.size()) / 2);
  // Cut inside the graph's last field: the protobuf does not parse.
  expect_error(import_onnx(as_bytes(bytes.substr(0, bytes.size() - 3)), options(), kName), StatusCode::kInvalidArgument,
               {kName, "does not parse"});
}

TEST_F(OnnxImporterTest, MalformedProtobufIsAStatus) {
  const std::vector<std::string> inputs = {
      "this is not an ONNX model",
      std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),  // a varint of 11 bytes
      std::string("\x3a\xff\xff\xff\xff\x0f", 6),                       // the graph: a length of 4 GiB
      std::string("\x07", 1),                                           // wire type 7 does not exist
  };
  for (const std::string& bytes : inputs) {
    expect_error(import_onnx(as_bytes(bytes), options(), kName), StatusCode::kInvalidArgument, {kName});
  }
  // Valid protobuf, not a model: an empty message imports no opset and has no graph.
  expect_error(import_onnx(as_bytes(std::string()), options(), kName), StatusCode::kUnimplemented,
               {kName, "IR version 0"});
}

TEST_F(OnnxImporterTest, ModelLevelFieldsAreChecked) {
  pb::ModelProto model = valid_model();
  model.set_ir_version(99);
  expect_error(import(model), StatusCode::kUnimplemented, {kName, "IR version 99"});
  model = valid_model();
  model.mutable_opset_import(0)->set_domain("com.example");
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "no ai.onnx opset"});
  model = valid_model();
  model.clear_graph();
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "no graph"});
}

TEST_F(OnnxImporterTest, MissingInitializerIsADanglingInput) {
  pb::ModelProto model = valid_model();
  model.mutable_graph()->clear_initializer();
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "node 'add'", "Add", "'w'", "neither"});
}

TEST_F(OnnxImporterTest, GraphOutputProducedByNoNode) {
  pb::ModelProto model = valid_model();
  model.mutable_graph()->mutable_output(0)->set_name("nowhere");
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "graph output 'nowhere'"});
}

TEST_F(OnnxImporterTest, InitializerErrorsNameTheInitializer) {
  pb::ModelProto model = valid_model();
  model.mutable_graph()->mutable_initializer(0)->add_float_data(9.0f);  // 7 values for [2, 3]
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "'w'", "float_data holds 7 values"});
  model = valid_model();
  *model.mutable_graph()->add_initializer() = model.graph().initializer(0);
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "'w'", "twice"});
  model = valid_model();
  model.mutable_graph()->mutable_initializer(0)->set_data_type(pb::TensorProto::COMPLEX64);
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "'w'", "COMPLEX64"});
  model = valid_model();
  model.mutable_graph()->mutable_initializer(0)->set_dims(0, -2);
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "'w'", "bad dims"});
}

TEST_F(OnnxImporterTest, ACycleIsReported) {
  pb::ModelProto model = valid_model();
  pb::GraphProto* graph = model.mutable_graph();
  graph->clear_node();
  add_node(graph, "first", "Add", {"x", "b"}, {"a"});
  add_node(graph, "second", "Relu", {"a"}, {"b"});
  add_node(graph, "relu", "Relu", {"a"}, {"y"});
  expect_error(import(model), StatusCode::kFailedPrecondition, {kName, "node 'first'", "'b'", "cycle"});
}

TEST_F(OnnxImporterTest, UnknownOpNamesNodeOpDomainAndOpset) {
  pb::ModelProto model = valid_model();
  model.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  expect_error(import(model), StatusCode::kNotFound, {kName, "node 'relu'", "NoSuchOp", "ai.onnx", "opset 17"});

  // An op of another domain, imported at opset 3.
  model = valid_model();
  pb::OperatorSetIdProto* id = model.add_opset_import();
  id->set_domain("com.example");
  id->set_version(3);
  model.mutable_graph()->mutable_node(1)->set_domain("com.example");
  model.mutable_graph()->mutable_node(1)->set_op_type("Custom");
  expect_error(import(model), StatusCode::kNotFound,
               {kName, "node 'relu'", "com.example.Custom", "'com.example'", "opset 3"});

  // A domain the model imports no opset for.
  model = valid_model();
  model.mutable_graph()->mutable_node(1)->set_domain("com.other");
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "node 'relu'", "'com.other'"});
}

TEST_F(OnnxImporterTest, UnsupportedOpsetNamesTheSupportedRanges) {
  // Erf exists from opset 9: a model at opset 8 has no Erf.
  pb::ModelProto model = valid_model(8);
  model.mutable_graph()->mutable_node(1)->set_op_type("Erf");
  expect_error(import(model), StatusCode::kNotFound, {kName, "node 'relu'", "Erf", "opset 8", "ai.onnx", "9+"});

  // A registry that serves Relu at opsets 6 to 13 only.
  onnx::ConverterRegistry converters;
  ASSERT_TRUE(converters
                  .add({.op_type = "Relu",
                        .since_version = 6,
                        .end_version = 13,
                        .convert = [](onnx::ConversionContext& ctx) { return ctx.alias_output(0, ctx.input(0)); }})
                  .ok());
  ASSERT_TRUE(onnx::register_core_converters(converters).ok());
  OnnxImportOptions narrow = options();
  narrow.converters = &converters;
  pb::ModelProto relu_only = valid_model();
  relu_only.mutable_graph()->clear_node();
  add_node(relu_only.mutable_graph(), "relu", "Relu", {"x"}, {"y"});
  const std::string bytes = serialize(relu_only);
  expect_error(import_onnx(as_bytes(bytes), narrow, kName), StatusCode::kNotFound,
               {kName, "node 'relu'", "Relu", "opset 17", "6-13"});
}

TEST_F(OnnxImporterTest, AttributeOfAnUnsupportedType) {
  pb::ModelProto model = valid_model();
  pb::AttributeProto* attr = model.mutable_graph()->mutable_node(1)->add_attribute();
  attr->set_name("graph_attr");
  attr->set_type(pb::AttributeProto::GRAPH);
  attr->mutable_g()->set_name("sub");
  expect_error(import(model), StatusCode::kUnimplemented, {kName, "node 'relu'", "attribute 'graph_attr'"});
}

TEST_F(OnnxImporterTest, GraphInputWithoutShape) {
  pb::ModelProto model = valid_model();
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  expect_error(import(model), StatusCode::kUnimplemented, {kName, "graph input 'x'", "no shape"});
  model = valid_model();
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(
      pb::TensorProto::STRING);
  expect_error(import(model), StatusCode::kInvalidArgument, {kName, "graph input 'x'", "STRING"});
  model = valid_model();
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_sequence_type();
  expect_error(import(model), StatusCode::kUnimplemented, {kName, "graph input 'x'", "not a tensor"});
}

// The initializer w stored in dir/weights.bin at `offset`.
pb::ModelProto external_model(const std::string& location, int64_t offset, int64_t length) {
  pb::ModelProto model = valid_model();
  pb::TensorProto* w = model.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(pb::TensorProto::EXTERNAL);
  auto add = [&](const std::string& key, const std::string& value) {
    pb::StringStringEntryProto* entry = w->add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  add("location", location);
  add("offset", std::to_string(offset));
  add("length", std::to_string(length));
  return model;
}

TEST_F(OnnxImporterTest, ExternalData) {
  {
    std::ofstream out(dir_ / "weights.bin", std::ios::binary);
    const std::vector<float> w = {1, 2, 3, 4, 5, 6, 7, 8};  // 32 bytes; w needs 24
    out.write(reinterpret_cast<const char*>(w.data()), static_cast<std::streamsize>(w.size() * sizeof(float)));
  }
  Result<OnnxImport> good = import_onnx_file(write(external_model("weights.bin", 8, 24)), options());
  ASSERT_TRUE(good.ok()) << good.status().to_string();

  const std::string missing = write(external_model("absent.bin", 0, 24));
  expect_error(import_onnx_file(missing, options()), StatusCode::kNotFound, {missing, "absent.bin", "'w'"});
  const std::string past_end = write(external_model("weights.bin", 16, 24));
  expect_error(import_onnx_file(past_end, options()), StatusCode::kInvalidArgument,
               {past_end, "'w'", "offset 16 length 24", "file of 32"});
  const std::string wrong_length = write(external_model("weights.bin", 0, 20));
  expect_error(import_onnx_file(wrong_length, options()), StatusCode::kInvalidArgument,
               {wrong_length, "'w'", "length 20"});
  const std::string huge_offset = write(external_model("weights.bin", int64_t{1} << 62, 24));
  expect_error(import_onnx_file(huge_offset, options()), StatusCode::kInvalidArgument, {huge_offset, "'w'"});
  const std::string escapes = write(external_model("../weights.bin", 0, 24));
  expect_error(import_onnx_file(escapes, options()), StatusCode::kInvalidArgument,
               {escapes, "'w'", "leaves the model's folder"});

  pb::ModelProto not_a_number = external_model("weights.bin", 0, 24);
  not_a_number.mutable_graph()->mutable_initializer(0)->mutable_external_data(1)->set_value("eight");
  const std::string bad_offset = write(not_a_number);
  expect_error(import_onnx_file(bad_offset, options()), StatusCode::kInvalidArgument,
               {bad_offset, "'w'", "'offset'", "'eight'"});
}

TEST_F(OnnxImporterTest, MissingFile) {
  const std::string path = (dir_ / "absent.onnx").string();
  expect_error(import_onnx_file(path, options()), StatusCode::kNotFound, {path});
  Result<std::unique_ptr<runtime::Model>> model = runtime::Model::load(path);
  expect_error(model, StatusCode::kNotFound, {path});
}

TEST_F(OnnxImporterTest, WrongInputDtypeAndRankAtRun) {
  Result<std::unique_ptr<runtime::Model>> model = runtime::Model::load(write(valid_model()));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const std::vector<float> six = {1, -2, 3, -4, 5, -6};

  Result<runtime::TensorMap> good = (*model)->run({{"x", HostTensor::f32(Shape({2, 3}), six)}});
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  const std::vector<float> y = good->at("y").to_f32();
  ASSERT_EQ(y.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(y[i], std::max(0.0f, six[i] + 0.5f * static_cast<float>(i) - 1.0f));

  expect_error((*model)->run({{"x", HostTensor::i64(Shape({2, 3}), {1, 2, 3, 4, 5, 6})}}), StatusCode::kInvalidArgument,
               {"'x'", "i64"});
  expect_error((*model)->run({{"x", HostTensor::f32(Shape({1, 2, 3}), six)}}), StatusCode::kInvalidArgument, {"'x'"});
  expect_error((*model)->run({{"x", HostTensor::f32(Shape({3, 2}), six)}}), StatusCode::kInvalidArgument, {"'x'"});
  expect_error((*model)->run({}), StatusCode::kInvalidArgument, {"'x'"});
  expect_error((*model)->run({{"x", HostTensor::f32(Shape({2, 3}), six)}, {"z", HostTensor::f32(Shape({1}), {1})}}),
               StatusCode::kInvalidArgument, {"'z'"});
}

}  // namespace
}  // namespace hxrt::formats
