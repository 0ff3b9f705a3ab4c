#include "hxrt/runtime/model.h"

#include <string_view>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hxrt/formats/graph_file.h"
#include "hxrt/kernels/builtin_registries.h"

namespace hxrt::runtime {

Result<std::unique_ptr<Model>> Model::load(const std::string& path, const ModelOptions& options) {
  HXRT_ASSIGN_OR_RETURN(graph::Graph graph, formats::read_graph_file(path, {.verify_weights = options.verify_weights}));
  Result<std::unique_ptr<Model>> model = create(std::move(graph), options);
  if (!model.ok()) return std::move(model).take_status().with_context(fmt::format("loading graph file '{}'", path));
  return model;
}

Result<std::unique_ptr<Model>> Model::create(graph::Graph graph, const ModelOptions& options) {
  std::unique_ptr<Model> model(new Model());
  model->registries_ = options.registries;
  if (model->registries_ == nullptr) {
    HXRT_ASSIGN_OR_RETURN(model->own_registries_, kernels::make_builtin_registries());
    model->registries_ = model->own_registries_.get();
  }
  const hal::DriverRegistry* drivers = options.drivers;
  if (drivers == nullptr) {
    model->own_drivers_ = std::make_unique<hal::DriverRegistry>();
    HXRT_RETURN_IF_ERROR(hal::register_builtin_drivers(*model->own_drivers_));
    drivers = model->own_drivers_.get();
  }
  HXRT_ASSIGN_OR_RETURN(model->session_,
                        Session::create(*drivers, options.device, SessionOptions{.name = options.name}));
  const hal::DeviceInfo& device = model->session_->device().info();

  PlanOptions plan_options = options.plan;
  plan_options.fallback_device = nullptr;
  plan_options.tuner = nullptr;
  // A fallback of the main device's kind has no kernel the main device lacks: no split, and no second device.
  const std::string_view fallback_driver = std::string_view(options.fallback_device).substr(0, options.fallback_device.find(':'));
  HXRT_ASSIGN_OR_RETURN(hal::Driver * main_driver, drivers->find(
      std::string_view(options.device).substr(0, options.device.find(':'))));
  if (!options.fallback_device.empty()) {
    HXRT_ASSIGN_OR_RETURN(hal::Driver * driver, drivers->find(fallback_driver));
    if (driver->kind() != main_driver->kind()) {
      HXRT_ASSIGN_OR_RETURN(model->fallback_session_,
                            Session::create(*drivers, options.fallback_device,
                                            SessionOptions{.name = options.name + "-fallback"}));
      plan_options.fallback_device = &model->fallback_session_->device().info();
    }
  }
  if (!plan_options.fallback_ops.empty() && plan_options.fallback_device == nullptr) {
    return invalid_argument("fallback ops ({}) need a fallback device of another kind than '{}'",
                            fmt::join(plan_options.fallback_ops, ", "), options.device);
  }
  std::unique_ptr<KernelTuner> tuner;
  if (options.tune_cache != nullptr) {
    HXRT_ASSIGN_OR_RETURN(tuner, KernelTuner::create(model->session_->device(), *options.tune_cache, options.tuner));
    plan_options.tuner = tuner.get();
  }

  HXRT_ASSIGN_OR_RETURN(std::unique_ptr<ExecutionPlan> plan,
                        ExecutionPlan::build(std::move(graph), device, PlanContext::of(*model->registries_), plan_options));
  model->plan_ = std::move(plan);
  if (tuner != nullptr) model->tuning_report_ = tuner->report();
  if (model->plan_->fallback_device() == nullptr) model->fallback_session_.reset();
  return model;
}

Model::~Model() = default;

Result<Executor*> Model::executor() {
  if (closed_) return failed_precondition("Model '{}' is closed", plan_->graph().name());
  if (executor_ == nullptr) {
    HXRT_ASSIGN_OR_RETURN(executor_, Executor::create(*session_, plan_, fallback_session_.get()));
  }
  return executor_.get();
}

Result<TensorMap> Model::run(const TensorMap& inputs, const RunOptions& options) {
  HXRT_ASSIGN_OR_RETURN(Executor * executor, this->executor());
  return executor->run(inputs, options);
}

std::vector<std::string> Model::input_names() const {
  std::vector<std::string> names;
  for (graph::ValueId id : graph().inputs()) names.push_back(graph().value(id).name);
  return names;
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> names;
  for (graph::ValueId id : graph().outputs()) names.push_back(graph().value(id).name);
  return names;
}

Result<TeardownReport> Model::close() {
  closed_ = true;
  executor_.reset();  // returns its arena and weights to the sessions' pools first
  if (fallback_session_ != nullptr) {
    Result<TeardownReport> fallback = fallback_session_->close();
    if (!fallback.ok()) return std::move(fallback).take_status().with_context("closing the fallback session");
  }
  return session_->close();
}

}  // namespace hxrt::runtime
