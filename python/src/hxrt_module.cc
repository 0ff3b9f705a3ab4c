// _hxrt: the Python extension under the `hxrt` package (python/hxrt/__init__.py is the user-facing surface).
//
// Binds the same surface as the C API (include/hxrt/hxrt.h) over the C++ one, with numpy arrays for tensors:
// devices, sessions, graph models (named arrays in, named arrays out: outputs are handed over without a copy) and
// LLMs whose generation runs on a thread of its own while Python iterates over the text pieces it streams. Every
// call that waits on a device releases the GIL. A failed Status raises the hxrt.Error subclass of its code (made in
// python/hxrt/_errors.py) with the whole message chain.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "hxrt/hal/driver.h"
#include "hxrt/llm/json_schema.h"
#include "hxrt/llm/llm.h"
#include "hxrt/runtime/model.h"
#include "hxrt/runtime/session.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// A failed Status on its way to Python (translated in NB_MODULE).
struct StatusError {
  hxrt::Status status;
};

void check(hxrt::Status status) {
  if (!status.ok()) throw StatusError{std::move(status)};
}

template <typename T>
T take(hxrt::Result<T> result) {
  if (!result.ok()) throw StatusError{std::move(result).take_status()};
  return std::move(result).value();
}

hxrt::hal::Duration timeout_of(std::optional<double> seconds) {
  if (!seconds) return hxrt::hal::kInfinite;
  return std::chrono::duration_cast<hxrt::hal::Duration>(std::chrono::duration<double>(std::max(0.0, *seconds)));
}

// ---- Tensors ----

hxrt::DType dtype_of(const nb::dlpack::dtype& t, const std::string& name) {
  using Code = nb::dlpack::dtype_code;
  const auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return hxrt::DType::kF32;
    if (code == Code::Float && t.bits == 16) return hxrt::DType::kF16;
    if (code == Code::Int && t.bits == 64) return hxrt::DType::kI64;
    if (code == Code::Int && t.bits == 32) return hxrt::DType::kI32;
    if (code == Code::Int && t.bits == 8) return hxrt::DType::kI8;
    if (code == Code::UInt && t.bits == 8) return hxrt::DType::kU8;
    if (code == Code::Bool && t.bits == 8) return hxrt::DType::kBool;
  }
  throw StatusError{hxrt::invalid_argument("input '{}': numpy dtype (code {}, {} bits) has no hxrt dtype "
                                           "(float32, float16, int64, int32, int8, uint8, bool)",
                                           name, static_cast<int>(t.code), static_cast<int>(t.bits))};
}

nb::dlpack::dtype dlpack_of(hxrt::DType dtype, const std::string& name) {
  switch (dtype) {
    case hxrt::DType::kF32: return nb::dtype<float>();
    case hxrt::DType::kF16: return nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case hxrt::DType::kI64: return nb::dtype<int64_t>();
    case hxrt::DType::kI32: return nb::dtype<int32_t>();
    case hxrt::DType::kI8: return nb::dtype<int8_t>();
    case hxrt::DType::kU8: return nb::dtype<uint8_t>();
    case hxrt::DType::kBool: return nb::dtype<bool>();
    default: break;
  }
  throw StatusError{hxrt::unimplemented("output '{}' has dtype {}, which numpy does not hold", name, dtype)};
}

using AnyArray = nb::ndarray<nb::numpy, nb::c_contig, nb::device::cpu>;

hxrt::HostTensor tensor_of(const std::string& name, const AnyArray& array) {
  const hxrt::DType dtype = dtype_of(array.dtype(), name);
  std::vector<int64_t> dims(array.ndim());
  for (size_t i = 0; i < array.ndim(); ++i) dims[i] = static_cast<int64_t>(array.shape(i));
  hxrt::Shape shape = take(hxrt::Shape::make(dims));
  const auto* bytes = static_cast<const std::byte*>(array.data());
  return take(hxrt::HostTensor::make(dtype, shape, std::vector<std::byte>(bytes, bytes + array.nbytes())));
}

// Hands the tensor's bytes to numpy: the array owns the HostTensor through a capsule.
nb::object array_of(const std::string& name, hxrt::HostTensor tensor) {
  const nb::dlpack::dtype dtype = dlpack_of(tensor.dtype, name);
  auto* owned = new hxrt::HostTensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<hxrt::HostTensor*>(p); });
  std::vector<size_t> shape;
  for (int64_t d : owned->shape.dims()) shape.push_back(static_cast<size_t>(d));
  return nb::cast(nb::ndarray<nb::numpy>(owned->bytes.data(), shape.size(), shape.data(), owner, nullptr, dtype));
}

// ---- Sessions ----

class Session {
 public:
  explicit Session(const std::string& device) {
    check(hxrt::hal::register_builtin_drivers(drivers_));
    session_ = take(hxrt::runtime::Session::create(drivers_, device, hxrt::runtime::SessionOptions{.name = "python"}));
  }
  std::string device() const { return session_->device().info().name; }
  void synchronize(std::optional<double> timeout) {
    hxrt::Status status;
    {
      nb::gil_scoped_release release;
      status = session_->synchronize(timeout_of(timeout));
    }
    check(std::move(status));
  }
  // (clean, report)
  std::pair<bool, std::string> close() {
    hxrt::runtime::TeardownReport report = take(session_->close());
    return {report.clean(), report.to_string()};
  }

 private:
  hxrt::hal::DriverRegistry drivers_;
  std::unique_ptr<hxrt::runtime::Session> session_;
};

// ---- Models ----

class Model {
 public:
  Model(const std::string& path, const std::string& device, const std::string& fallback, bool fuse) {
    hxrt::runtime::ModelOptions options;
    options.device = device;
    options.fallback_device = fallback;
    options.plan.fuse = fuse;
    nb::gil_scoped_release release;
    model_ = take(hxrt::runtime::Model::load(path, options));
  }
  std::vector<std::string> inputs() const { return model_->input_names(); }
  std::vector<std::string> outputs() const { return model_->output_names(); }
  std::string describe() const { return model_->describe(); }
  void set_profiling(bool on) { model_->session().profiler().set_enabled(on); }
  void write_trace(const std::string& path) const { check(model_->session().profiler().write_chrome_trace(path)); }

  nb::dict run(const nb::dict& inputs, std::optional<double> timeout) {
    hxrt::runtime::TensorMap map;
    for (auto [key, value] : inputs) {
      const std::string name = nb::cast<std::string>(key);
      AnyArray array;
      if (!nb::try_cast(value, array)) {
        throw StatusError{hxrt::invalid_argument("input '{}' is not a C-contiguous numpy array on the CPU", name)};
      }
      map.emplace(name, tensor_of(name, array));
    }
    hxrt::runtime::RunOptions options;
    options.timeout = timeout_of(timeout);
    hxrt::Result<hxrt::runtime::TensorMap> outputs = hxrt::internal_error("not run");
    {
      nb::gil_scoped_release release;
      outputs = model_->run(map, options);
    }
    nb::dict out;
    for (auto& [name, tensor] : take(std::move(outputs))) out[name.c_str()] = array_of(name, std::move(tensor));
    return out;
  }

 private:
  std::unique_ptr<hxrt::runtime::Model> model_;
};

// ---- LLMs ----

class Llm;

// One generation running on its own thread; Python pulls its pieces. Closing it (or dropping it) cancels the rest.
class Stream {
 public:
  Stream(Llm& llm, std::vector<int32_t> prompt, hxrt::llm::GenerateOptions options);
  ~Stream() { close(); }

  // The next piece; nullopt at the end. Raises the generation's error, if any, at the end.
  std::optional<std::string> next() {
    std::optional<std::string> piece;
    hxrt::Status failure;
    {
      // The GIL goes first, the lock second: a thread holding the lock never waits for the GIL.
      nb::gil_scoped_release release;
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return !pieces_.empty() || done_; });
      if (!pieces_.empty()) {
        piece = std::move(pieces_.front());
        pieces_.pop_front();
      } else if (!result_.ok()) {
        failure = result_.status();
      }
    }
    if (!failure.ok()) throw StatusError{std::move(failure)};
    return piece;
  }

  void close();

  std::string finish_reason() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_ || !result_.ok()) return "";
    switch (result_->finish) {
      case hxrt::llm::FinishReason::kLength: return "length";
      case hxrt::llm::FinishReason::kEos:
      case hxrt::llm::FinishReason::kStopToken: return "stop";
      case hxrt::llm::FinishReason::kCancelled:
      case hxrt::llm::FinishReason::kCallback: return "cancelled";
      default: return "error";
    }
  }
  std::optional<int> usage(bool prompt) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!done_ || !result_.ok()) return std::nullopt;
    return prompt ? result_->prompt_tokens : result_->completion_tokens;
  }

 private:
  Llm& llm_;
  std::atomic<bool> cancel_{false};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::string> pieces_;
  bool done_ = false;
  hxrt::Result<hxrt::llm::Generation> result_ = hxrt::internal_error("running");
  std::thread thread_;
};

class Llm {
 public:
  Llm(const std::optional<std::string>& model, const std::string& device, int threads, int64_t kv_tokens,
      int max_sequences, const std::optional<std::string>& chat_template, int draft_max, int tensor_parallel,
      int pipeline_parallel) {
    hxrt::llm::LlmOptions options;
    options.model = model.value_or("");
    options.chat_template = chat_template.value_or("");
    options.device = device;
    options.threads = threads;
    options.engine.kv_budget_tokens = kv_tokens;
    options.engine.max_sequences = max_sequences;
    options.engine.speculative.draft_max = draft_max;  // Note [Speculative decoding] (llm/engine.cc)
    options.tensor_parallel = tensor_parallel;         // docs/scale-out.md
    options.pipeline_parallel = pipeline_parallel;
    nb::gil_scoped_release release;
    llm_ = take(hxrt::llm::Llm::load(options));
  }

  std::string model_path() const { return llm_->model_path(); }
  bool is_leader() const { return llm_->leader(); }
  void follow() {
    hxrt::Status status;
    {
      nb::gil_scoped_release release;
      status = llm_->follow();
    }
    check(std::move(status));
  }
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) const {
    return take(llm_->tokenizer().encode(text, hxrt::llm::EncodeOptions{.add_special = add_special}));
  }
  std::string detokenize(const std::vector<int32_t>& tokens) const { return take(llm_->tokenizer().decode(tokens)); }
  std::string apply_chat_template(const std::vector<std::pair<std::string, std::string>>& messages,
                                  bool add_generation_prompt) const {
    std::vector<hxrt::llm::ChatMessage> chat;
    for (const auto& [role, content] : messages) chat.push_back({role, content});
    return take(llm_->tokenizer().apply_chat_template(chat, add_generation_prompt));
  }
  std::vector<int32_t> chat_tokens(const std::vector<std::pair<std::string, std::string>>& messages) const {
    return take(llm_->tokenizer().encode_chat(apply_chat_template(messages, true)));
  }
  const std::string& chat_template() const { return llm_->tokenizer().chat_template(); }
  void set_profiling(bool on) { llm_->session().profiler().set_enabled(on); }
  void write_trace(const std::string& path) const { check(llm_->session().profiler().write_chrome_trace(path)); }

  Stream* start(std::vector<int32_t> prompt, int max_tokens, float temperature, int top_k, float top_p, float min_p,
                float repetition_penalty, uint64_t seed, std::vector<std::string> stop, bool ignore_eos,
                std::optional<double> timeout, const std::optional<std::string>& grammar) {
    if (busy_.exchange(true)) {
      throw StatusError{hxrt::failed_precondition(
          "another generation is running on this LLM: exhaust or close() its stream first (or load a second LLM)")};
    }
    hxrt::llm::GenerateOptions options;
    options.max_tokens = max_tokens;
    options.sampling = hxrt::llm::SamplingParams{.temperature = temperature,
                                                 .top_k = top_k,
                                                 .top_p = top_p,
                                                 .min_p = min_p,
                                                 .repetition_penalty = repetition_penalty,
                                                 .seed = seed};
    options.stop = std::move(stop);
    options.ignore_eos = ignore_eos;
    options.timeout = timeout_of(timeout);
    if (hxrt::Status valid = options.sampling.validate(); !valid.ok()) {
      busy_ = false;
      throw StatusError{std::move(valid)};
    }
    if (grammar) {  // GBNF text (Note [Grammar-constrained sampling] in llm/engine_outputs.cc)
      hxrt::Result<std::shared_ptr<const hxrt::llm::Grammar>> parsed = hxrt::llm::parse_gbnf(*grammar);
      if (!parsed.ok()) {
        busy_ = false;
        throw StatusError{std::move(parsed).take_status()};
      }
      options.grammar = std::move(parsed).value();
    }
    return new Stream(*this, std::move(prompt), std::move(options));
  }

  hxrt::llm::Llm& llm() { return *llm_; }
  void release() { busy_ = false; }

 private:
  std::unique_ptr<hxrt::llm::Llm> llm_;
  std::atomic<bool> busy_{false};
};

Stream::Stream(Llm& llm, std::vector<int32_t> prompt, hxrt::llm::GenerateOptions options) : llm_(llm) {
  options.cancel = &cancel_;
  options.on_text = [this](std::string_view piece) {
    std::lock_guard<std::mutex> lock(mutex_);
    pieces_.emplace_back(piece);
    cv_.notify_all();
    return true;
  };
  thread_ = std::thread([this, prompt = std::move(prompt), options = std::move(options)]() mutable {
    hxrt::Result<hxrt::llm::Generation> result = llm_.llm().generate_tokens(std::move(prompt), options);
    std::lock_guard<std::mutex> lock(mutex_);
    result_ = std::move(result);
    done_ = true;
    cv_.notify_all();
  });
}

void Stream::close() {
  if (!thread_.joinable()) return;
  cancel_ = true;
  {
    nb::gil_scoped_release release;
    thread_.join();
  }
  llm_.release();
}

}  // namespace

NB_MODULE(_hxrt, m) {
  m.doc() = "hxrt's native extension; use the hxrt package.";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const StatusError& e) {
      nb::object errors = nb::module_::import_("hxrt._errors");
      nb::object cls = errors.attr("error_class")(static_cast<int>(e.status.code()));
      PyErr_SetString(cls.ptr(), e.status.to_string().c_str());
    }
  });

  m.def("json_schema_to_gbnf", [](const std::string& schema) { return take(hxrt::llm::json_schema_to_gbnf(schema)); },
        "schema"_a, "The GBNF grammar of the JSON documents a JSON Schema (as JSON text) accepts.");
  m.def("devices", [] {
    hxrt::hal::DriverRegistry drivers;
    check(hxrt::hal::register_builtin_drivers(drivers));
    nb::list out;
    for (const hxrt::hal::DeviceInfo& d : drivers.available_devices()) {
      nb::dict info;
      info["name"] = hxrt::hal::device_spec(d);
      info["kind"] = std::string(hxrt::hal::device_kind_name(d.kind));
      info["description"] = d.name;
      info["memory_bytes"] = d.memory_bytes;
      info["compute_units"] = d.compute_units;
      info["host_addressable"] = d.host_addressable;
      out.append(info);
    }
    return out;
  });

  nb::class_<Session>(m, "Session")
      .def(nb::init<const std::string&>(), "device"_a = "cpu")
      .def_prop_ro("device", &Session::device)
      .def("synchronize", &Session::synchronize, "timeout"_a = nb::none())
      .def("close", &Session::close);

  nb::class_<Model>(m, "Model")
      .def(nb::init<const std::string&, const std::string&, const std::string&, bool>(), "path"_a, "device"_a = "cpu",
           "fallback_device"_a = "", "fuse"_a = true)
      .def_prop_ro("inputs", &Model::inputs)
      .def_prop_ro("outputs", &Model::outputs)
      .def("describe", &Model::describe)
      .def("run", &Model::run, "inputs"_a, "timeout"_a = nb::none())
      .def("set_profiling", &Model::set_profiling)
      .def("write_trace", &Model::write_trace);

  nb::class_<Stream>(m, "Stream")
      .def("next", &Stream::next)
      .def("close", &Stream::close)
      .def_prop_ro("finish_reason", &Stream::finish_reason)
      .def_prop_ro("prompt_tokens", [](Stream& s) { return s.usage(true); })
      .def_prop_ro("completion_tokens", [](Stream& s) { return s.usage(false); });

  nb::class_<Llm>(m, "LLM")
      .def(nb::init<const std::optional<std::string>&, const std::string&, int, int64_t, int,
                    const std::optional<std::string>&, int, int, int>(),
           "model"_a = nb::none(), "device"_a = "cpu", "threads"_a = 0, "kv_tokens"_a = 4096, "max_sequences"_a = 16,
           "chat_template"_a = nb::none(), "draft_max"_a = 0, "tensor_parallel"_a = 1,
           "pipeline_parallel"_a = 1)
      .def_prop_ro("model_path", &Llm::model_path)
      .def_prop_ro("is_leader", &Llm::is_leader)
      .def("follow", &Llm::follow)
      .def_prop_ro("chat_template", &Llm::chat_template)
      .def("apply_chat_template", &Llm::apply_chat_template)
      .def("tokenize", &Llm::tokenize, "text"_a, "add_special"_a = true)
      .def("detokenize", &Llm::detokenize)
      .def("chat_tokens", &Llm::chat_tokens)
      .def("set_profiling", &Llm::set_profiling)
      .def("write_trace", &Llm::write_trace)
      .def("start", &Llm::start, nb::keep_alive<0, 1>(), nb::rv_policy::take_ownership, "prompt"_a, "max_tokens"_a,
           "temperature"_a, "top_k"_a, "top_p"_a, "min_p"_a, "repetition_penalty"_a, "seed"_a, "stop"_a,
           "ignore_eos"_a, "timeout"_a, "grammar"_a = nb::none());
}
