// Writes the small ONNX models and .npy inputs the CLI tests run `hxrt run|inspect|profile|convert` on
// (tools/CMakeLists.txt), built with the ModelProto classes of <onnx/onnx_pb.h>:
//
//   relu_add.onnx     x: f32[batch, 4] -> Relu -> "layer/relu:0" -> Add(b) -> "out/y:0"; a Constant output
//                     "folded/c" (folded at import) and an Identity output "x_copy" (an alias of the input).
//                     Output names hold '/' and ':' as exported models' do.
//   reshape_bind.onnx x: f32[batch, 6], shape: i64[2] -> Reshape -> y: the graph depends on the value of `shape`,
//                     so it is imported at bind time.
//   unsupported.onnx  one node of an op no converter serves (FancyOp).
//   not_onnx.onnx     bytes that are not a protobuf ModelProto.
//   relu_add_x.npy    f32[2, 4] {-1, 2, -3, 4, 5, -6, 7, -8}: out/y:0 = relu(x) + 0.5 =
//                     {0.5, 2.5, 0.5, 4.5, 5.5, 0.5, 7.5, 0.5}
//   reshape_x.npy     f32[2, 6] 0..11;  reshape_shape.npy i64[2] {3, 4}: y = f32[3, 4] 0..11
//
//   hxrt-make-onnx-test-models --out-dir DIR
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "hxrt/base/host_tensor.h"
#include "hxrt/formats/npy.h"

namespace {

using hxrt::HostTensor;
using hxrt::Shape;

constexpr int kOpset = 17;
constexpr int kIrVersion = 8;

onnx::ModelProto new_model(const std::string& graph_name) {
  onnx::ModelProto model;
  model.set_ir_version(kIrVersion);
  model.set_producer_name("hxrt-make-onnx-test-models");
  model.set_producer_version("1");
  model.add_opset_import()->set_version(kOpset);
  model.mutable_graph()->set_name(graph_name);
  return model;
}

// A tensor value info; a negative dim is the symbol `symbol`.
void add_value_info(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                    int elem_type, const std::vector<int64_t>& dims, const std::string& symbol = "") {
  onnx::ValueInfoProto* info = list->Add();
  info->set_name(name);
  onnx::TypeProto::Tensor* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  for (int64_t d : dims) {
    onnx::TensorShapeProto::Dimension* dim = tensor->mutable_shape()->add_dim();
    if (d < 0) {
      dim->set_dim_param(symbol);
    } else {
      dim->set_dim_value(d);
    }
  }
}

onnx::NodeProto* add_node(onnx::GraphProto* graph, const std::string& name, const std::string& op_type,
                          const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  onnx::NodeProto* node = graph->add_node();
  node->set_name(name);
  node->set_op_type(op_type);
  for (const std::string& in : inputs) node->add_input(in);
  for (const std::string& out : outputs) node->add_output(out);
  return node;
}

void set_float_tensor(onnx::TensorProto* tensor, const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<float>& values) {
  tensor->set_name(name);
  tensor->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) tensor->add_dims(d);
  for (float v : values) tensor->add_float_data(v);
}

onnx::ModelProto relu_add() {
  onnx::ModelProto model = new_model("relu_add");
  onnx::GraphProto* g = model.mutable_graph();
  add_value_info(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {-1, 4}, "batch");
  set_float_tensor(g->add_initializer(), "b", {4}, {0.5F, 0.5F, 0.5F, 0.5F});
  add_node(g, "relu", "Relu", {"x"}, {"layer/relu:0"});
  add_node(g, "add", "Add", {"layer/relu:0", "b"}, {"out/y:0"});
  onnx::NodeProto* constant = add_node(g, "const", "Constant", {}, {"folded/c"});
  onnx::AttributeProto* value = constant->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  set_float_tensor(value->mutable_t(), "c", {2}, {1.0F, 2.0F});
  add_node(g, "copy", "Identity", {"x"}, {"x_copy"});
  add_value_info(g->mutable_output(), "out/y:0", onnx::TensorProto::FLOAT, {-1, 4}, "batch");
  add_value_info(g->mutable_output(), "folded/c", onnx::TensorProto::FLOAT, {2});
  add_value_info(g->mutable_output(), "x_copy", onnx::TensorProto::FLOAT, {-1, 4}, "batch");
  return model;
}

onnx::ModelProto reshape_bind() {
  onnx::ModelProto model = new_model("reshape_bind");
  onnx::GraphProto* g = model.mutable_graph();
  add_value_info(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {-1, 6}, "batch");
  add_value_info(g->mutable_input(), "shape", onnx::TensorProto::INT64, {2});
  add_node(g, "reshape", "Reshape", {"x", "shape"}, {"y"});
  add_value_info(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {-1, -1}, "n");
  return model;
}

onnx::ModelProto unsupported() {
  onnx::ModelProto model = new_model("unsupported");
  onnx::GraphProto* g = model.mutable_graph();
  add_value_info(g->mutable_input(), "x", onnx::TensorProto::FLOAT, {2, 4});
  add_node(g, "fancy", "FancyOp", {"x"}, {"y"});
  add_value_info(g->mutable_output(), "y", onnx::TensorProto::FLOAT, {2, 4});
  return model;
}

bool write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

bool write_model(const std::string& path, const onnx::ModelProto& model) {
  std::string bytes;
  return model.SerializeToString(&bytes) && write_bytes(path, bytes);
}

bool write_tensor(const std::string& path, const HostTensor& tensor) {
  const hxrt::Status status = hxrt::formats::write_npy(path, tensor);
  if (!status.ok()) fmt::print(stderr, "{}\n", status.to_string());
  return status.ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes the ONNX models and .npy inputs of the CLI tests"};
  std::string out_dir;
  app.add_option("--out-dir", out_dir, "Folder to write into (must exist)")->required();
  CLI11_PARSE(app, argc, argv);
  const auto at = [&](const std::string& name) { return out_dir + "/" + name; };
  std::vector<float> iota12(12);
  for (size_t i = 0; i < iota12.size(); ++i) iota12[i] = static_cast<float>(i);
  const bool ok =
      write_model(at("relu_add.onnx"), relu_add()) && write_model(at("reshape_bind.onnx"), reshape_bind()) &&
      write_model(at("unsupported.onnx"), unsupported()) &&
      write_bytes(at("not_onnx.onnx"), "this file is not an ONNX model\n") &&
      write_tensor(at("relu_add_x.npy"), HostTensor::f32(Shape({2, 4}), {-1, 2, -3, 4, 5, -6, 7, -8})) &&
      write_tensor(at("reshape_x.npy"), HostTensor::f32(Shape({2, 6}), iota12)) &&
      write_tensor(at("reshape_shape.npy"), HostTensor::i64(Shape({2}), {3, 4}));
  if (!ok) {
    fmt::print(stderr, "hxrt-make-onnx-test-models: cannot write into '{}'\n", out_dir);
    return 1;
  }
  fmt::print("wrote the ONNX test models into {}\n", out_dir);
  return 0;
}
