// The C API (include/hxrt/hxrt.h) over the C++ runtime. Every entry point checks its arguments, runs the C++ call
// inside guard() (a C caller never sees an exception) and turns a Status into a code plus the thread's last
// error message.
//
// Handles own C++ objects; a session knows its buffers and events, so closing it first (a C program's usual
// mistake) leaves them as orphans that report FAILED_PRECONDITION and are still freed safely, and the close's leak
// report names what was still live (Note [Orphaned handles]).
#include "hxrt/hxrt.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hxrt/hal/driver.h"
#include "hxrt/llm/json_schema.h"
#include "hxrt/llm/llm.h"
#include "hxrt/runtime/model.h"
#include "hxrt/runtime/session.h"

#ifndef HXRT_VERSION_STRING
#define HXRT_VERSION_STRING "unknown"
#endif

struct hxrt_stream {
  hxrt::hal::Stream* stream = nullptr;
  hxrt_session* session = nullptr;
};

struct hxrt_event {
  hxrt::hal::Event* event = nullptr;
  hxrt_session* session = nullptr;  // null once the session closed
};

struct hxrt_buffer {
  hxrt_session* session = nullptr;                // null once the session closed
  hxrt::memory::Allocation allocation;            // pool memory, or
  std::unique_ptr<hxrt::hal::Buffer> registered;  // a host registration
  hxrt::hal::BufferView view() const { return registered ? hxrt::hal::BufferView(*registered) : allocation.view(); }
};

struct hxrt_session {
  hxrt::hal::DriverRegistry drivers;
  std::unique_ptr<hxrt::runtime::Session> session;
  std::map<std::string, std::unique_ptr<hxrt_stream>, std::less<>> streams;
  std::set<hxrt_buffer*> buffers;
  std::set<hxrt_event*> events;
};

struct hxrt_tensors {
  std::vector<std::pair<std::string, hxrt::HostTensor>> tensors;
};

struct hxrt_model {
  std::unique_ptr<hxrt::runtime::Model> model;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

struct hxrt_llm {
  std::unique_ptr<hxrt::llm::Llm> llm;
  std::atomic<bool> cancel{false};
};

namespace {

using hxrt::Result;
using hxrt::Status;
using hxrt::StatusCode;

thread_local std::string g_last_error;

hxrt_status fail(const Status& status) {
  g_last_error = status.to_string();
  return static_cast<hxrt_status>(status.code());
}

hxrt_status fail(StatusCode code, std::string message) {
  return fail(Status(code, std::move(message)));
}

template <typename F>
hxrt_status guard(const char* function, F&& body) {
  try {
    Status status = body();
    if (!status.ok()) return fail(std::move(status).with_context(function));
    return HXRT_OK;
  } catch (const std::bad_alloc&) {
    return fail(StatusCode::kOutOfMemory, fmt::format("{}: out of host memory", function));
  } catch (const std::exception& e) {
    return fail(StatusCode::kInternal, fmt::format("{}: {}", function, e.what()));
  } catch (...) {
    return fail(StatusCode::kInternal, fmt::format("{}: unknown exception", function));
  }
}

Status null_argument(const char* name) {
  return hxrt::invalid_argument("'{}' is NULL", name);
}

hxrt::hal::Duration duration_of(int64_t timeout_ns) {
  if (timeout_ns == HXRT_INFINITE) return hxrt::hal::kInfinite;
  return std::chrono::nanoseconds(std::max<int64_t>(timeout_ns, 0));
}

char* copy_string(std::string_view text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return out;
}

void copy_field(char* field, size_t capacity, std::string_view text) {
  const size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(field, text.data(), n);
  field[n] = '\0';
}

Status open_session(const hxrt_session* handle) {
  if (handle == nullptr) return hxrt::failed_precondition("the session of this handle was closed");
  return hxrt::ok_status();
}

Result<hxrt::HostTensor> host_tensor_of(const hxrt_tensor& t) {
  if (t.dtype < HXRT_F32 || t.dtype > HXRT_BOOL)
    return hxrt::invalid_argument("tensor '{}': dtype {} is not an hxrt_dtype", t.name, static_cast<int>(t.dtype));
  if (t.rank < 0 || t.rank > HXRT_MAX_RANK) {
    return hxrt::invalid_argument("tensor '{}': rank {} is outside [0, {}]", t.name, t.rank, HXRT_MAX_RANK);
  }
  if (t.data == nullptr && t.bytes > 0) return hxrt::invalid_argument("tensor '{}': data is NULL", t.name);
  Result<hxrt::Shape> shape = hxrt::Shape::make(std::span<const int64_t>(t.dims, static_cast<size_t>(t.rank)));
  if (!shape.ok()) return std::move(shape).take_status().with_context(fmt::format("tensor '{}'", t.name));
  const auto* bytes = static_cast<const std::byte*>(t.data);
  return hxrt::HostTensor::make(static_cast<hxrt::DType>(t.dtype), *shape,
                                std::vector<std::byte>(bytes, bytes + t.bytes));
}

Status view_of(const std::string& name, const hxrt::HostTensor& tensor, hxrt_tensor* out) {
  const auto dtype = static_cast<int>(tensor.dtype);
  if (dtype > HXRT_BOOL)
    return hxrt::unimplemented("tensor '{}' has dtype {}, which the C API does not carry", name, tensor.dtype);
  if (tensor.shape.rank() > HXRT_MAX_RANK)
    return hxrt::unimplemented("tensor '{}' has rank {} > {}", name, tensor.shape.rank(), HXRT_MAX_RANK);
  *out = hxrt_tensor{};
  out->name = name.c_str();
  out->dtype = static_cast<hxrt_dtype>(dtype);
  out->rank = static_cast<int32_t>(tensor.shape.rank());
  for (int i = 0; i < tensor.shape.rank(); ++i) out->dims[i] = tensor.shape.dims()[static_cast<size_t>(i)];
  out->data = tensor.bytes.data();
  out->bytes = tensor.bytes.size();
  return hxrt::ok_status();
}

// roles[i] said contents[i]: InvalidArgument for no messages or a NULL role or content.
Result<std::vector<hxrt::llm::ChatMessage>> chat_messages_of(const char* const* roles, const char* const* contents,
                                                             size_t message_count) {
  if (message_count == 0) return hxrt::invalid_argument("a chat needs at least one message");
  if (roles == nullptr) return null_argument("roles");
  if (contents == nullptr) return null_argument("contents");
  std::vector<hxrt::llm::ChatMessage> messages;
  for (size_t i = 0; i < message_count; ++i) {
    if (roles[i] == nullptr || contents[i] == nullptr) {
      return hxrt::invalid_argument("message {} has a NULL role or content", i);
    }
    messages.push_back({roles[i], contents[i]});
  }
  return messages;
}

Result<hxrt::llm::GenerateOptions> generate_options_of(hxrt_llm* llm, const hxrt_generate_options* in) {
  hxrt_generate_options defaults;
  hxrt_generate_options_init(&defaults);
  const hxrt_generate_options& o = in != nullptr ? *in : defaults;
  hxrt::llm::GenerateOptions options;
  options.max_tokens = o.max_tokens;
  options.sampling.temperature = o.temperature;
  options.sampling.top_k = o.top_k;
  options.sampling.top_p = o.top_p;
  options.sampling.min_p = o.min_p;
  options.sampling.repetition_penalty = o.repetition_penalty;
  options.sampling.seed = o.seed;
  if (o.stop_count > 0 && o.stop == nullptr) return null_argument("options->stop");
  for (size_t i = 0; i < o.stop_count; ++i) {
    if (o.stop[i] == nullptr) return hxrt::invalid_argument("options->stop[{}] is NULL", i);
    options.stop.emplace_back(o.stop[i]);
  }
  options.timeout = duration_of(o.timeout_ns);
  if (o.grammar != nullptr && o.json_schema != nullptr) {
    return hxrt::invalid_argument("options: grammar and json_schema are exclusive");
  }
  if (o.grammar != nullptr || o.json_schema != nullptr) {
    std::string gbnf = o.grammar != nullptr ? std::string(o.grammar) : std::string();
    if (o.json_schema != nullptr) {
      HXRT_ASSIGN_OR_RETURN(gbnf, hxrt::llm::json_schema_to_gbnf(o.json_schema));
    }
    HXRT_ASSIGN_OR_RETURN(options.grammar, hxrt::llm::parse_gbnf(gbnf));
  }
  if (o.on_text != nullptr) {
    options.on_text = [callback = o.on_text, user = o.user_data](std::string_view piece) {
      return callback(user, piece.data(), piece.size()) != 0;
    };
  }
  options.cancel = &llm->cancel;
  return options;
}

hxrt_finish_reason finish_of(hxrt::llm::FinishReason reason) {
  switch (reason) {
    case hxrt::llm::FinishReason::kEos: return HXRT_FINISH_EOS;
    case hxrt::llm::FinishReason::kStopToken: return HXRT_FINISH_STOP;
    case hxrt::llm::FinishReason::kCallback: return HXRT_FINISH_CALLBACK;
    case hxrt::llm::FinishReason::kCancelled: return HXRT_FINISH_CANCELLED;
    default: return HXRT_FINISH_LENGTH;
  }
}

Status fill_generation(Result<hxrt::llm::Generation> result, hxrt_generation* out) {
  HXRT_RETURN_IF_ERROR(result.status());
  out->text = copy_string(result->text);
  out->finish = finish_of(result->finish);
  out->prompt_tokens = result->prompt_tokens;
  out->completion_tokens = result->completion_tokens;
  return hxrt::ok_status();
}

}  // namespace

extern "C" {

// ---- Library ----

uint32_t hxrt_abi_version(void) {
  return HXRT_ABI_VERSION;
}
const char* hxrt_version_string(void) {
  return HXRT_VERSION_STRING;
}

const char* hxrt_status_name(hxrt_status status) {
  if (status < HXRT_OK || status > HXRT_INTERNAL) return "UNKNOWN";
  return hxrt::status_code_name(static_cast<StatusCode>(status)).data();
}

const char* hxrt_last_error_message(void) {
  return g_last_error.c_str();
}
void hxrt_string_free(char* string) {
  std::free(string);
}

// ---- Devices ----

namespace {
Result<std::vector<hxrt::hal::DeviceInfo>> all_devices() {
  hxrt::hal::DriverRegistry drivers;
  HXRT_RETURN_IF_ERROR(hxrt::hal::register_builtin_drivers(drivers));
  return drivers.available_devices();
}
}  // namespace

hxrt_status hxrt_device_count(size_t* count) {
  return guard("hxrt_device_count", [&]() -> Status {
    if (count == nullptr) return null_argument("count");
    HXRT_ASSIGN_OR_RETURN(std::vector<hxrt::hal::DeviceInfo> devices, all_devices());
    *count = devices.size();
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_device_get(size_t index, hxrt_device_info* info) {
  return guard("hxrt_device_get", [&]() -> Status {
    if (info == nullptr) return null_argument("info");
    HXRT_ASSIGN_OR_RETURN(std::vector<hxrt::hal::DeviceInfo> devices, all_devices());
    if (index >= devices.size()) return hxrt::out_of_range("device {} of {}", index, devices.size());
    const hxrt::hal::DeviceInfo& d = devices[index];
    *info = hxrt_device_info{};
    copy_field(info->name, sizeof(info->name), hxrt::hal::device_spec(d));
    copy_field(info->description, sizeof(info->description), d.name);
    copy_field(info->kind, sizeof(info->kind), hxrt::hal::device_kind_name(d.kind));
    info->memory_bytes = d.memory_bytes;
    info->compute_units = d.compute_units;
    info->host_addressable = d.host_addressable ? 1 : 0;
    return hxrt::ok_status();
  });
}

// ---- Sessions ----

hxrt_status hxrt_session_create(const char* device, hxrt_session** session) {
  return guard("hxrt_session_create", [&]() -> Status {
    if (session == nullptr) return null_argument("session");
    *session = nullptr;
    auto handle = std::make_unique<hxrt_session>();
    HXRT_RETURN_IF_ERROR(hxrt::hal::register_builtin_drivers(handle->drivers));
    HXRT_ASSIGN_OR_RETURN(handle->session,
                          hxrt::runtime::Session::create(handle->drivers, device != nullptr ? device : "cpu",
                                                         hxrt::runtime::SessionOptions{.name = "capi"}));
    *session = handle.release();
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_session_synchronize(hxrt_session* session, int64_t timeout_ns) {
  return guard("hxrt_session_synchronize", [&]() -> Status {
    if (session == nullptr) return null_argument("session");
    return session->session->synchronize(duration_of(timeout_ns));
  });
}

// Note [Orphaned handles]: closing a session closes the C++ session first (its report counts the buffers and
// events still live), then detaches every buffer and event handle: their C++ objects go with the session, the
// handles stay until the caller frees them, and any other use of them is FAILED_PRECONDITION.
hxrt_status hxrt_session_close(hxrt_session* session, int* clean, char** report) {
  if (clean != nullptr) *clean = 0;
  if (report != nullptr) *report = nullptr;
  if (session == nullptr) return fail(null_argument("session"));
  std::unique_ptr<hxrt_session> owned(session);
  return guard("hxrt_session_close", [&]() -> Status {
    Result<hxrt::runtime::TeardownReport> teardown = owned->session->close();
    for (hxrt_buffer* buffer : owned->buffers) {
      buffer->registered.reset();
      buffer->session = nullptr;
    }
    for (hxrt_event* event : owned->events) event->session = nullptr;
    HXRT_RETURN_IF_ERROR(teardown.status());
    if (clean != nullptr) *clean = teardown->clean() ? 1 : 0;
    if (report != nullptr) *report = copy_string(teardown->to_string());
    return hxrt::ok_status();
  });
}

void hxrt_session_destroy(hxrt_session* session) {
  if (session != nullptr) (void)hxrt_session_close(session, nullptr, nullptr);
}

// ---- Streams and events ----

hxrt_status hxrt_session_stream(hxrt_session* session, const char* name, hxrt_stream** stream) {
  return guard("hxrt_session_stream", [&]() -> Status {
    if (session == nullptr) return null_argument("session");
    if (stream == nullptr) return null_argument("stream");
    const std::string key = name != nullptr ? name : "";
    auto it = session->streams.find(key);
    if (it == session->streams.end()) {
      hxrt::hal::Stream* s = &session->session->default_stream();
      if (!key.empty()) {
        HXRT_ASSIGN_OR_RETURN(s, session->session->stream(key));
      }
      it = session->streams.emplace(key, std::make_unique<hxrt_stream>(hxrt_stream{s, session})).first;
    }
    *stream = it->second.get();
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_stream_synchronize(hxrt_stream* stream, int64_t timeout_ns) {
  return guard("hxrt_stream_synchronize", [&]() -> Status {
    if (stream == nullptr) return null_argument("stream");
    return stream->stream->synchronize(duration_of(timeout_ns));
  });
}

hxrt_status hxrt_event_create(hxrt_session* session, hxrt_event** event) {
  return guard("hxrt_event_create", [&]() -> Status {
    if (session == nullptr) return null_argument("session");
    if (event == nullptr) return null_argument("event");
    *event = nullptr;
    HXRT_ASSIGN_OR_RETURN(hxrt::hal::Event * e, session->session->create_event());
    auto handle = std::make_unique<hxrt_event>(hxrt_event{e, session});
    session->events.insert(handle.get());
    *event = handle.release();
    return hxrt::ok_status();
  });
}

void hxrt_event_destroy(hxrt_event* event) {
  if (event == nullptr) return;
  if (event->session != nullptr) {
    event->session->events.erase(event);
    event->session->session->destroy_event(event->event).ignore();
  }
  delete event;
}

hxrt_status hxrt_stream_record(hxrt_stream* stream, hxrt_event* event) {
  return guard("hxrt_stream_record", [&]() -> Status {
    if (stream == nullptr) return null_argument("stream");
    if (event == nullptr) return null_argument("event");
    HXRT_RETURN_IF_ERROR(open_session(event->session));
    return stream->stream->record(*event->event);
  });
}

hxrt_status hxrt_stream_wait(hxrt_stream* stream, hxrt_event* event, int64_t timeout_ns) {
  return guard("hxrt_stream_wait", [&]() -> Status {
    if (stream == nullptr) return null_argument("stream");
    if (event == nullptr) return null_argument("event");
    HXRT_RETURN_IF_ERROR(open_session(event->session));
    return stream->stream->wait(*event->event, duration_of(timeout_ns));
  });
}

hxrt_status hxrt_event_synchronize(hxrt_event* event, int64_t timeout_ns) {
  return guard("hxrt_event_synchronize", [&]() -> Status {
    if (event == nullptr) return null_argument("event");
    HXRT_RETURN_IF_ERROR(open_session(event->session));
    return event->event->synchronize(duration_of(timeout_ns));
  });
}

hxrt_status hxrt_event_elapsed_ns(hxrt_event* start, hxrt_event* end, int64_t* ns) {
  return guard("hxrt_event_elapsed_ns", [&]() -> Status {
    if (start == nullptr) return null_argument("start");
    if (end == nullptr) return null_argument("end");
    if (ns == nullptr) return null_argument("ns");
    HXRT_RETURN_IF_ERROR(open_session(start->session));
    HXRT_RETURN_IF_ERROR(open_session(end->session));
    HXRT_ASSIGN_OR_RETURN(hxrt::hal::Duration elapsed, end->event->elapsed_since(*start->event));
    *ns = elapsed.count();
    return hxrt::ok_status();
  });
}

// ---- Buffers ----

hxrt_status hxrt_buffer_allocate(hxrt_session* session, hxrt_stream* stream, size_t bytes, hxrt_buffer** buffer) {
  return guard("hxrt_buffer_allocate", [&]() -> Status {
    if (session == nullptr) return null_argument("session");
    if (buffer == nullptr) return null_argument("buffer");
    *buffer = nullptr;
    hxrt::hal::Stream& s = stream != nullptr ? *stream->stream : session->session->default_stream();
    auto handle = std::make_unique<hxrt_buffer>();
    HXRT_ASSIGN_OR_RETURN(handle->allocation, session->session->pool().allocate(bytes, s, "capi"));
    handle->session = session;
    session->buffers.insert(handle.get());
    *buffer = handle.release();
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_buffer_register_host(hxrt_session* session, void* host, size_t bytes, hxrt_buffer** buffer) {
  return guard("hxrt_buffer_register_host", [&]() -> Status {
    if (session == nullptr) return null_argument("session");
    if (host == nullptr) return null_argument("host");
    if (buffer == nullptr) return null_argument("buffer");
    *buffer = nullptr;
    auto handle = std::make_unique<hxrt_buffer>();
    HXRT_ASSIGN_OR_RETURN(handle->registered, session->session->device().register_host(host, bytes));
    handle->session = session;
    session->buffers.insert(handle.get());
    *buffer = handle.release();
    return hxrt::ok_status();
  });
}

size_t hxrt_buffer_size(const hxrt_buffer* buffer) {
  return buffer != nullptr && buffer->session != nullptr ? buffer->view().size : 0;
}

namespace {
Result<hxrt::hal::BufferView> range_of(const hxrt_buffer* buffer, size_t offset, size_t bytes) {
  if (buffer == nullptr) return null_argument("buffer");
  HXRT_RETURN_IF_ERROR(open_session(buffer->session));
  const hxrt::hal::BufferView view = buffer->view();
  if (offset > view.size || bytes > view.size - offset) {
    return hxrt::out_of_range("range [{}, {}) is outside the {}-byte buffer", offset, offset + bytes, view.size);
  }
  return view.subview(offset, bytes);
}
}  // namespace

hxrt_status hxrt_buffer_copy_from_host(hxrt_stream* stream, hxrt_buffer* buffer, size_t offset, const void* host,
                                       size_t bytes) {
  return guard("hxrt_buffer_copy_from_host", [&]() -> Status {
    if (stream == nullptr) return null_argument("stream");
    if (host == nullptr) return null_argument("host");
    HXRT_ASSIGN_OR_RETURN(hxrt::hal::BufferView view, range_of(buffer, offset, bytes));
    return stream->stream->copy_from_host(view, host);
  });
}

hxrt_status hxrt_buffer_copy_to_host(hxrt_stream* stream, const hxrt_buffer* buffer, size_t offset, void* host,
                                     size_t bytes) {
  return guard("hxrt_buffer_copy_to_host", [&]() -> Status {
    if (stream == nullptr) return null_argument("stream");
    if (host == nullptr) return null_argument("host");
    HXRT_ASSIGN_OR_RETURN(hxrt::hal::BufferView view, range_of(buffer, offset, bytes));
    return stream->stream->copy_to_host(host, view);
  });
}

hxrt_status hxrt_buffer_fill(hxrt_stream* stream, hxrt_buffer* buffer, size_t offset, size_t bytes, uint8_t value) {
  return guard("hxrt_buffer_fill", [&]() -> Status {
    if (stream == nullptr) return null_argument("stream");
    HXRT_ASSIGN_OR_RETURN(hxrt::hal::BufferView view, range_of(buffer, offset, bytes));
    return stream->stream->fill(view, value, 1);
  });
}

hxrt_status hxrt_buffer_free(hxrt_buffer* buffer) {
  if (buffer == nullptr) return HXRT_OK;
  std::unique_ptr<hxrt_buffer> owned(buffer);
  return guard("hxrt_buffer_free", [&]() -> Status {
    if (owned->session == nullptr) return hxrt::ok_status();  // orphaned: its memory went with the session
    owned->session->buffers.erase(owned.get());
    if (owned->registered) {
      owned->registered.reset();
      return hxrt::ok_status();
    }
    return owned->session->session->pool().free(owned->allocation);
  });
}

// ---- Tensors ----

size_t hxrt_tensors_count(const hxrt_tensors* tensors) {
  return tensors != nullptr ? tensors->tensors.size() : 0;
}

hxrt_status hxrt_tensors_get(const hxrt_tensors* tensors, size_t index, hxrt_tensor* tensor) {
  return guard("hxrt_tensors_get", [&]() -> Status {
    if (tensors == nullptr) return null_argument("tensors");
    if (tensor == nullptr) return null_argument("tensor");
    if (index >= tensors->tensors.size()) return hxrt::out_of_range("tensor {} of {}", index, tensors->tensors.size());
    const auto& [name, value] = tensors->tensors[index];
    return view_of(name, value, tensor);
  });
}

hxrt_status hxrt_tensors_find(const hxrt_tensors* tensors, const char* name, hxrt_tensor* tensor) {
  return guard("hxrt_tensors_find", [&]() -> Status {
    if (tensors == nullptr) return null_argument("tensors");
    if (name == nullptr) return null_argument("name");
    if (tensor == nullptr) return null_argument("tensor");
    std::vector<std::string> names;
    for (const auto& [n, value] : tensors->tensors) {
      if (n == name) return view_of(n, value, tensor);
      names.push_back(n);
    }
    return hxrt::not_found("no tensor '{}' (there are: {})", name, fmt::join(names, ", "));
  });
}

void hxrt_tensors_free(hxrt_tensors* tensors) {
  delete tensors;
}

// ---- Models ----

void hxrt_model_options_init(hxrt_model_options* options) {
  if (options == nullptr) return;
  *options = hxrt_model_options{};
  options->fuse = 1;
}

hxrt_status hxrt_model_load(const char* path, const hxrt_model_options* options, hxrt_model** model) {
  return guard("hxrt_model_load", [&]() -> Status {
    if (path == nullptr) return null_argument("path");
    if (model == nullptr) return null_argument("model");
    *model = nullptr;
    hxrt_model_options o;
    hxrt_model_options_init(&o);
    if (options != nullptr) o = *options;
    hxrt::runtime::ModelOptions model_options;
    model_options.device = o.device != nullptr ? o.device : "cpu";
    model_options.fallback_device = o.fallback_device != nullptr ? o.fallback_device : "";
    model_options.plan.fuse = o.fuse != 0;
    auto handle = std::make_unique<hxrt_model>();
    HXRT_ASSIGN_OR_RETURN(handle->model, hxrt::runtime::Model::load(path, model_options));
    if (o.profile != 0) handle->model->session().profiler().set_enabled(true);
    handle->inputs = handle->model->input_names();
    handle->outputs = handle->model->output_names();
    *model = handle.release();
    return hxrt::ok_status();
  });
}

void hxrt_model_destroy(hxrt_model* model) {
  delete model;
}

size_t hxrt_model_input_count(const hxrt_model* model) {
  return model != nullptr ? model->inputs.size() : 0;
}
size_t hxrt_model_output_count(const hxrt_model* model) {
  return model != nullptr ? model->outputs.size() : 0;
}

const char* hxrt_model_input_name(const hxrt_model* model, size_t index) {
  return model != nullptr && index < model->inputs.size() ? model->inputs[index].c_str() : nullptr;
}

const char* hxrt_model_output_name(const hxrt_model* model, size_t index) {
  return model != nullptr && index < model->outputs.size() ? model->outputs[index].c_str() : nullptr;
}

hxrt_status hxrt_model_describe(const hxrt_model* model, char** text) {
  return guard("hxrt_model_describe", [&]() -> Status {
    if (model == nullptr) return null_argument("model");
    if (text == nullptr) return null_argument("text");
    *text = copy_string(model->model->describe());
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_model_run(hxrt_model* model, const hxrt_tensor* inputs, size_t input_count, int64_t timeout_ns,
                           hxrt_tensors** outputs) {
  return guard("hxrt_model_run", [&]() -> Status {
    if (model == nullptr) return null_argument("model");
    if (outputs == nullptr) return null_argument("outputs");
    if (inputs == nullptr && input_count > 0) return null_argument("inputs");
    *outputs = nullptr;
    hxrt::runtime::TensorMap map;
    for (size_t i = 0; i < input_count; ++i) {
      if (inputs[i].name == nullptr) return hxrt::invalid_argument("inputs[{}].name is NULL", i);
      HXRT_ASSIGN_OR_RETURN(hxrt::HostTensor tensor, host_tensor_of(inputs[i]));
      if (!map.emplace(inputs[i].name, std::move(tensor)).second) {
        return hxrt::invalid_argument("input '{}' is given twice", inputs[i].name);
      }
    }
    hxrt::runtime::RunOptions run_options;
    run_options.timeout = duration_of(timeout_ns);
    HXRT_ASSIGN_OR_RETURN(hxrt::runtime::TensorMap results, model->model->run(map, run_options));
    auto handle = std::make_unique<hxrt_tensors>();
    for (auto& [name, tensor] : results) handle->tensors.emplace_back(name, std::move(tensor));
    *outputs = handle.release();
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_model_write_trace(const hxrt_model* model, const char* path) {
  return guard("hxrt_model_write_trace", [&]() -> Status {
    if (model == nullptr) return null_argument("model");
    if (path == nullptr) return null_argument("path");
    return model->model->session().profiler().write_chrome_trace(path);
  });
}

// ---- LLMs ----

void hxrt_llm_options_init(hxrt_llm_options* options) {
  if (options == nullptr) return;
  *options = hxrt_llm_options{};
  options->kv_tokens = 4096;
  options->tensor_parallel = 1;
  options->pipeline_parallel = 1;
}

void hxrt_generate_options_init(hxrt_generate_options* options) {
  if (options == nullptr) return;
  const hxrt::llm::SamplingParams sampling;
  *options = hxrt_generate_options{};
  options->max_tokens = 128;
  options->temperature = 0.0f;
  options->top_k = sampling.top_k;
  options->top_p = sampling.top_p;
  options->min_p = sampling.min_p;
  options->repetition_penalty = sampling.repetition_penalty;
  options->seed = sampling.seed;
  options->timeout_ns = HXRT_INFINITE;
}

hxrt_status hxrt_llm_load(const hxrt_llm_options* options, hxrt_llm** llm) {
  return guard("hxrt_llm_load", [&]() -> Status {
    if (llm == nullptr) return null_argument("llm");
    *llm = nullptr;
    hxrt_llm_options o;
    hxrt_llm_options_init(&o);
    if (options != nullptr) o = *options;
    hxrt::llm::LlmOptions llm_options;
    llm_options.model = o.model != nullptr ? o.model : "";
    llm_options.device = o.device != nullptr ? o.device : "cpu";
    llm_options.threads = o.threads;
    llm_options.chat_template = o.chat_template != nullptr ? o.chat_template : "";
    if (o.kv_tokens <= 0) return hxrt::invalid_argument("kv_tokens {} must be > 0", o.kv_tokens);
    llm_options.engine.kv_budget_tokens = o.kv_tokens;
    llm_options.engine.speculative.draft_max = o.draft_max;  // Engine::create checks its range
    llm_options.tensor_parallel = o.tensor_parallel == 0 ? 1 : o.tensor_parallel;
    llm_options.pipeline_parallel = o.pipeline_parallel == 0 ? 1 : o.pipeline_parallel;
    auto handle = std::make_unique<hxrt_llm>();
    HXRT_ASSIGN_OR_RETURN(handle->llm, hxrt::llm::Llm::load(llm_options));
    *llm = handle.release();
    return hxrt::ok_status();
  });
}

void hxrt_llm_destroy(hxrt_llm* llm) {
  delete llm;
}

int hxrt_llm_is_leader(const hxrt_llm* llm) {
  return llm != nullptr && llm->llm->leader() ? 1 : 0;
}

hxrt_status hxrt_llm_follow(hxrt_llm* llm) {
  return guard("hxrt_llm_follow", [&]() -> Status {
    if (llm == nullptr) return null_argument("llm");
    return llm->llm->follow();
  });
}

hxrt_status hxrt_llm_generate(hxrt_llm* llm, const char* prompt, const hxrt_generate_options* options,
                              hxrt_generation* generation) {
  return guard("hxrt_llm_generate", [&]() -> Status {
    if (generation != nullptr) *generation = hxrt_generation{};  // set on every path, so freeing text is safe
    if (llm == nullptr) return null_argument("llm");
    if (prompt == nullptr) return null_argument("prompt");
    if (generation == nullptr) return null_argument("generation");
    HXRT_ASSIGN_OR_RETURN(hxrt::llm::GenerateOptions o, generate_options_of(llm, options));
    llm->cancel.store(false);
    return fill_generation(llm->llm->generate(prompt, o), generation);
  });
}

hxrt_status hxrt_llm_apply_chat_template(hxrt_llm* llm, const char* const* roles, const char* const* contents,
                                         size_t message_count, int add_generation_prompt, char** text) {
  return guard("hxrt_llm_apply_chat_template", [&]() -> Status {
    if (llm == nullptr) return null_argument("llm");
    if (text == nullptr) return null_argument("text");
    *text = nullptr;
    HXRT_ASSIGN_OR_RETURN(std::vector<hxrt::llm::ChatMessage> messages,
                          chat_messages_of(roles, contents, message_count));
    HXRT_ASSIGN_OR_RETURN(std::string rendered,
                          llm->llm->tokenizer().apply_chat_template(messages, add_generation_prompt != 0));
    *text = copy_string(rendered);
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_llm_chat(hxrt_llm* llm, const char* const* roles, const char* const* contents, size_t message_count,
                          const hxrt_generate_options* options, hxrt_generation* generation) {
  return guard("hxrt_llm_chat", [&]() -> Status {
    if (generation != nullptr) *generation = hxrt_generation{};  // set on every path, so freeing text is safe
    if (llm == nullptr) return null_argument("llm");
    if (generation == nullptr) return null_argument("generation");
    HXRT_ASSIGN_OR_RETURN(std::vector<hxrt::llm::ChatMessage> messages,
                          chat_messages_of(roles, contents, message_count));
    HXRT_ASSIGN_OR_RETURN(hxrt::llm::GenerateOptions o, generate_options_of(llm, options));
    llm->cancel.store(false);
    return fill_generation(llm->llm->chat(messages, o), generation);
  });
}

void hxrt_llm_cancel(hxrt_llm* llm) {
  if (llm != nullptr) llm->cancel.store(true);
}

hxrt_status hxrt_llm_tokenize(hxrt_llm* llm, const char* text, int32_t* tokens, size_t capacity, size_t* count) {
  return guard("hxrt_llm_tokenize", [&]() -> Status {
    if (llm == nullptr) return null_argument("llm");
    if (text == nullptr) return null_argument("text");
    if (count == nullptr) return null_argument("count");
    if (tokens == nullptr && capacity > 0) return null_argument("tokens");
    HXRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids,
                          llm->llm->tokenizer().encode(text, hxrt::llm::EncodeOptions{.add_special = true}));
    *count = ids.size();
    std::copy_n(ids.begin(), std::min(capacity, ids.size()), tokens);
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_llm_set_profiling(hxrt_llm* llm, int enabled) {
  return guard("hxrt_llm_set_profiling", [&]() -> Status {
    if (llm == nullptr) return null_argument("llm");
    llm->llm->session().profiler().set_enabled(enabled != 0);
    return hxrt::ok_status();
  });
}

hxrt_status hxrt_llm_write_trace(const hxrt_llm* llm, const char* path) {
  return guard("hxrt_llm_write_trace", [&]() -> Status {
    if (llm == nullptr) return null_argument("llm");
    if (path == nullptr) return null_argument("path");
    return llm->llm->session().profiler().write_chrome_trace(path);
  });
}

}  // extern "C"
