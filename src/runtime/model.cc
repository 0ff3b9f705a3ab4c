#include "hxrt/runtime/model.h"

#include <algorithm>
#include <deque>
#include <set>
#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/formats/graph_file.h"
#include "hxrt/kernels/builtin_registries.h"

namespace hxrt::runtime {

// One plan of an ONNX model imported at bind time (Note [ONNX models]).
struct OnnxVariant {
  std::string key;  // the inputs' shapes and the bytes of the values the import needed
  std::unique_ptr<formats::OnnxImport> import;
  std::shared_ptr<const ExecutionPlan> plan;
  std::unique_ptr<Executor> executor;
};

struct Model::OnnxState {
  std::string path;
  std::shared_ptr<const formats::OnnxModelFile> file;  // parsed once; bind-time imports share its weights
  ModelOptions options;
  std::unique_ptr<Session> fold_session;  // constant folding on the host
  std::deque<OnnxVariant> variants;       // bind-time imports, newest last
  std::set<std::string> needed;           // inputs whose values the bind-time import needs
  ~OnnxState() {
    for (OnnxVariant& v : variants) v.executor.reset();
  }
};

Model::Model() = default;

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const ModelOptions& options) {
  if (formats::is_onnx_path(path)) return load_onnx(path, options);
  HXRT_ASSIGN_OR_RETURN(graph::Graph graph, formats::read_graph_file(path, {.verify_weights = options.verify_weights}));
  Result<std::unique_ptr<Model>> model = create(std::move(graph), options);
  if (!model.ok()) return std::move(model).take_status().with_context(fmt::format("loading graph file '{}'", path));
  return model;
}

Status Model::open(const ModelOptions& options) {
  registries_ = options.registries;
  if (registries_ == nullptr) {
    HXRT_ASSIGN_OR_RETURN(own_registries_, kernels::make_builtin_registries());
    registries_ = own_registries_.get();
  }
  const hal::DriverRegistry* drivers = options.drivers;
  if (drivers == nullptr) {
    own_drivers_ = std::make_unique<hal::DriverRegistry>();
    HXRT_RETURN_IF_ERROR(hal::register_builtin_drivers(*own_drivers_));
    drivers = own_drivers_.get();
  }
  drivers_ = drivers;
  HXRT_ASSIGN_OR_RETURN(session_, Session::create(*drivers, options.device, SessionOptions{.name = options.name}));
  // A fallback of the main device's kind has no kernel the main device lacks: no split, and no second device.
  const std::string_view fallback_driver = std::string_view(options.fallback_device).substr(0, options.fallback_device.find(':'));
  HXRT_ASSIGN_OR_RETURN(hal::Driver * main_driver, drivers->find(
      std::string_view(options.device).substr(0, options.device.find(':'))));
  if (!options.fallback_device.empty()) {
    HXRT_ASSIGN_OR_RETURN(hal::Driver * driver, drivers->find(fallback_driver));
    if (driver->kind() != main_driver->kind()) {
      HXRT_ASSIGN_OR_RETURN(fallback_session_,
                            Session::create(*drivers, options.fallback_device,
                                            SessionOptions{.name = options.name + "-fallback"}));
    }
  }
  if (!options.plan.fallback_ops.empty() && fallback_session_ == nullptr) {
    return invalid_argument("fallback ops ({}) need a fallback device of another kind than '{}'",
                            fmt::join(options.plan.fallback_ops, ", "), options.device);
  }
  return ok_status();
}

Result<std::shared_ptr<const ExecutionPlan>> Model::build_plan(graph::Graph graph, const ModelOptions& options) {
  PlanOptions plan_options = options.plan;
  plan_options.fallback_device = fallback_session_ != nullptr ? &fallback_session_->device().info() : nullptr;
  plan_options.tuner = nullptr;
  std::unique_ptr<KernelTuner> tuner;
  if (options.tune_cache != nullptr) {
    HXRT_ASSIGN_OR_RETURN(tuner, KernelTuner::create(session_->device(), *options.tune_cache, options.tuner));
    plan_options.tuner = tuner.get();
  }
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                        ExecutionPlan::build(std::move(graph), session_->device().info(),
                                             PlanContext::of(*registries_), plan_options));
  if (tuner != nullptr) tuning_report_ = tuner->report();
  return std::shared_ptr<const ExecutionPlan>(std::move(plan));
}

Result<std::unique_ptr<Model>> Model::create(graph::Graph graph, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  HXRT_RETURN_IF_ERROR(model->open(options));
  HXRT_ASSIGN_OR_RETURN(model->plan_, model->build_plan(std::move(graph), options));
  if (model->plan_->fallback_device() == nullptr) model->fallback_session_.reset();
  return model;
}

Model::~Model() = default;

const ExecutionPlan& Model::plan() const {
  HXRT_CHECK(plan_ != nullptr, "Model::plan(): the ONNX model is planned when it first runs (check has_plan())");
  return *plan_;
}

std::string Model::describe() const {
  if (plan_ != nullptr) return plan_->describe();
  const formats::OnnxBindTimeNeeds& needs = *onnx_import_->bind_time;
  const std::string on = needs.input_values.empty()
                             ? std::string("the shapes of its inputs")
                             : fmt::format("the values of input(s) {}", fmt::join(needs.input_values, ", "));
  return fmt::format("planned at bind time: the graph depends on {} ({}); each run imports and plans it for its "
                     "inputs' shapes{}, kept for the next run with the same ones\n",
                     on, needs.reason, needs.input_values.empty() ? "" : " and those values");
}

Result<Executor*> Model::executor() {
  if (closed_) return failed_precondition("Model '{}' is closed", plan_ != nullptr ? plan_->graph().name() : "onnx");
  if (plan_ == nullptr) return failed_precondition("the ONNX model is planned when it first runs (Note [ONNX models])");
  if (executor_ == nullptr) {
    HXRT_ASSIGN_OR_RETURN(executor_, Executor::create(*session_, plan_, fallback_session_.get()));
  }
  return executor_.get();
}

Result<TensorMap> Model::run(const TensorMap& inputs, const RunOptions& options) {
  if (onnx_ != nullptr) return run_onnx(inputs, options);
  HXRT_ASSIGN_OR_RETURN(Executor * executor, this->executor());
  return executor->run(inputs, options);
}

std::vector<std::string> Model::input_names() const {
  if (onnx_import_ != nullptr) return onnx_import_->inputs;
  std::vector<std::string> names;
  for (graph::ValueId id : graph().inputs()) names.push_back(graph().value(id).name);
  return names;
}

std::vector<std::string> Model::output_names() const {
  if (onnx_import_ != nullptr) {
    std::vector<std::string> names;
    for (const formats::OnnxOutput& o : onnx_import_->outputs) names.push_back(o.name);
    return names;
  }
  std::vector<std::string> names;
  for (graph::ValueId id : graph().outputs()) names.push_back(graph().value(id).name);
  return names;
}

Result<TeardownReport> Model::close() {
  closed_ = true;
  if (onnx_ != nullptr) {
    onnx_->variants.clear();
    if (onnx_->fold_session != nullptr) HXRT_RETURN_IF_ERROR(onnx_->fold_session->close().status());
    onnx_->fold_session.reset();
  }
  executor_.reset();  // returns its arena and weights to the sessions' pools first
  if (fallback_session_ != nullptr) {
    Result<TeardownReport> fallback = fallback_session_->close();
    if (!fallback.ok()) return std::move(fallback).take_status().with_context("closing the fallback session");
  }
  return session_->close();
}


namespace {

graph::TensorValue to_value(HostTensor t) {
  return graph::TensorValue{.dtype = t.dtype, .shape = t.shape, .data = std::move(t.bytes)};
}

HostTensor to_host(const graph::TensorValue& v) {
  return HostTensor{.dtype = v.dtype, .shape = v.shape, .bytes = v.data};
}

// The Model's inputs that the plan's graph takes (the others were bound as constants at import).
TensorMap graph_inputs(const ExecutionPlan& plan, const TensorMap& inputs) {
  TensorMap out;
  for (graph::ValueId id : plan.graph().inputs()) {
    const std::string& name = plan.graph().value(id).name;
    if (auto it = inputs.find(name); it != inputs.end()) out.emplace(name, it->second);
  }
  return out;
}

Result<TensorMap> onnx_outputs(const formats::OnnxImport& import, const TensorMap& inputs, TensorMap results) {
  TensorMap out;
  for (const formats::OnnxOutput& o : import.outputs) {
    if (o.constant) {
      out.emplace(o.name, to_host(*o.constant));
    } else if (!o.input.empty()) {
      auto it = inputs.find(o.input);
      if (it == inputs.end()) return invalid_argument("missing input '{}'", o.input);
      out.emplace(o.name, it->second);
    } else {
      auto it = results.find(o.value);
      if (it == results.end()) return internal_error("the plan produced no output '{}'", o.value);
      out.emplace(o.name, it->second);
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load_onnx(const std::string& path, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  HXRT_RETURN_IF_ERROR(model->open(options));
  model->onnx_ = std::make_unique<OnnxState>();
  OnnxState& state = *model->onnx_;
  state.path = path;
  state.options = options;
  HXRT_ASSIGN_OR_RETURN(state.fold_session,
                        Session::create(*model->drivers_, "cpu", SessionOptions{.name = options.name + "-fold"}));
  formats::OnnxImportOptions import_options{.schemas = &model->registries_->schemas};
  Model* self = model.get();
  import_options.evaluate = [self](graph::Graph graph) { return self->fold(std::move(graph)); };
  HXRT_ASSIGN_OR_RETURN(state.file, formats::OnnxModelFile::open(path));
  HXRT_ASSIGN_OR_RETURN(formats::OnnxImport import, state.file->import(import_options));
  model->onnx_import_ = std::make_unique<formats::OnnxImport>(std::move(import));
  if (model->onnx_import_->bind_time) {
    state.needed.insert(model->onnx_import_->bind_time->input_values.begin(),
                        model->onnx_import_->bind_time->input_values.end());
  } else {
    Result<std::shared_ptr<const ExecutionPlan>> plan = model->build_plan(std::move(model->onnx_import_->graph), options);
    if (!plan.ok()) return std::move(plan).take_status().with_context(fmt::format("planning ONNX model '{}'", path));
    model->plan_ = std::move(plan).value();
    if (model->plan_->fallback_device() == nullptr) model->fallback_session_.reset();
  }
  return model;
}

Result<std::vector<graph::TensorValue>> Model::fold(graph::Graph graph) {
  const std::string name = graph.name();
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                        ExecutionPlan::build(std::move(graph), onnx_->fold_session->device().info(),
                                             PlanContext::of(*registries_), PlanOptions{}));
  std::shared_ptr<const ExecutionPlan> shared(std::move(plan));
  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor, Executor::create(*onnx_->fold_session, shared));
  HXRT_ASSIGN_OR_RETURN(TensorMap results, executor->run({}));
  std::vector<graph::TensorValue> values;
  for (graph::ValueId id : shared->graph().outputs()) {
    auto it = results.find(shared->graph().value(id).name);
    if (it == results.end()) return internal_error("folding '{}' produced no output '{}'", name, shared->graph().value(id).name);
    values.push_back(to_value(std::move(it->second)));
  }
  return values;
}

Result<TensorMap> Model::run_onnx(const TensorMap& inputs, const RunOptions& options) {
  if (closed_) return failed_precondition("the ONNX model '{}' is closed", onnx_->path);
  for (const std::string& name : onnx_import_->inputs) {
    if (inputs.find(name) == inputs.end()) return invalid_argument("missing input '{}'", name);
  }
  for (const auto& [name, tensor] : inputs) {
    if (std::find(onnx_import_->inputs.begin(), onnx_import_->inputs.end(), name) == onnx_import_->inputs.end()) {
      return invalid_argument("the model has no input '{}' (inputs: {})", name, fmt::join(onnx_import_->inputs, ", "));
    }
  }
  if (!onnx_import_->bind_time) {
    HXRT_ASSIGN_OR_RETURN(Executor * executor, this->executor());
    HXRT_ASSIGN_OR_RETURN(TensorMap results, executor->run(graph_inputs(*plan_, inputs), options));
    return onnx_outputs(*onnx_import_, inputs, std::move(results));
  }
  // Bind-time import, keyed by every input's dtype and shape and the bytes of the inputs whose values it needs. A
  // converter asks for one value at a time, so an import may name more inputs than the first one did: they join
  // the set, and the import runs again.
  auto variant_key = [&] {
    std::string key;
    for (const auto& [name, tensor] : inputs) key += fmt::format("{}:{}{};", name, tensor.dtype, tensor.shape);
    for (const std::string& name : onnx_->needed) {
      const HostTensor& t = inputs.find(name)->second;
      key.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
      key += ';';
    }
    return key;
  };
  for (int attempt = 0;; ++attempt) {
    const std::string key = variant_key();
    auto found = std::find_if(onnx_->variants.begin(), onnx_->variants.end(),
                              [&](const OnnxVariant& v) { return v.key == key; });
    if (found != onnx_->variants.end()) break;
    formats::OnnxImportOptions import_options{.schemas = &registries_->schemas};
    import_options.evaluate = [this](graph::Graph graph) { return fold(std::move(graph)); };
    for (const auto& [name, tensor] : inputs) import_options.input_shapes.emplace(name, tensor.shape);
    for (const std::string& name : onnx_->needed) {
      import_options.input_values.emplace(name, to_value(inputs.find(name)->second));
    }
    HXRT_ASSIGN_OR_RETURN(formats::OnnxImport import, onnx_->file->import(import_options));
    if (import.bind_time) {
      const size_t before = onnx_->needed.size();
      onnx_->needed.insert(import.bind_time->input_values.begin(), import.bind_time->input_values.end());
      if (onnx_->needed.size() == before || attempt > 64) {
        return internal_error("the ONNX model '{}' still needs bind-time values after binding {}: {}", onnx_->path,
                              fmt::join(onnx_->needed, ", "), import.bind_time->reason);
      }
      continue;
    }
    OnnxVariant v;
    v.key = key;
    Result<std::shared_ptr<const ExecutionPlan>> plan = build_plan(std::move(import.graph), onnx_->options);
    if (!plan.ok()) {
      return std::move(plan).take_status().with_context(fmt::format("planning ONNX model '{}' at bind time", onnx_->path));
    }
    v.plan = std::move(plan).value();
    v.import = std::make_unique<formats::OnnxImport>(std::move(import));
    HXRT_ASSIGN_OR_RETURN(v.executor, Executor::create(*session_, v.plan, fallback_session_.get()));
    if (onnx_->variants.size() >= kMaxOnnxSpecializations) onnx_->variants.pop_front();
    onnx_->variants.push_back(std::move(v));
    break;
  }
  const std::string key = variant_key();
  auto variant = std::find_if(onnx_->variants.begin(), onnx_->variants.end(),
                              [&](const OnnxVariant& v) { return v.key == key; });
  plan_ = variant->plan;
  HXRT_ASSIGN_OR_RETURN(TensorMap results, variant->executor->run(graph_inputs(*variant->plan, inputs), options));
  return onnx_outputs(*variant->import, inputs, std::move(results));
}
}  // namespace hxrt::runtime
