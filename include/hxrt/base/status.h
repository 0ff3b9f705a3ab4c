// Status and Result<T>: hxrt's one error type.
//
// Every fallible public function returns a Status or a Result<T>; hxrt throws no exceptions across its API.
// A Status carries a canonical code, a message and a context chain: each layer that passes an error up may add
// one line saying what it was doing ("while planning node 'attn.7'"), so the final report reads from the failing
// call outwards. An OK Status holds no allocation, so returning OK costs a null pointer.
//
// Thread-safety: Status and Result are value types (thread-compatible).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

namespace hxrt {

// Canonical error codes. The numbering is part of the C ABI (hxrt.h) and never changes.
enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,     // the caller passed something malformed; retrying the same call fails again
  kNotFound = 2,            // a named thing (driver, kernel, tensor, file) does not exist
  kAlreadyExists = 3,       // registration of something that is already there
  kOutOfMemory = 4,         // an allocation could not be served (device, pool or budget)
  kOutOfRange = 5,          // an index or offset past the end of a valid range
  kUnavailable = 6,         // a driver, device or library is absent on this machine
  kUnimplemented = 7,       // the operation exists in the contract but this backend does not provide it
  kDeadlineExceeded = 8,    // a wait or synchronize timed out; the work may still complete later
  kAborted = 9,             // work was cancelled (stream abort, session teardown)
  kFailedPrecondition = 10, // the object is not in a state that allows the call (failed stream, unrecorded event)
  kDataLoss = 11,           // a file or buffer is truncated or corrupted
  kInternal = 12,           // an invariant of hxrt itself broke; a bug
};

// "INVALID_ARGUMENT" and so on; never null.
std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  std::string_view message() const { return state_ ? std::string_view(state_->message) : std::string_view(); }
  // Context lines, innermost first.
  const std::vector<std::string>& context() const;

  // Adds one context line (what the caller was doing) and returns *this; no-op on OK.
  Status& with_context(std::string line) &;
  Status&& with_context(std::string line) &&;

  // "CODE: message" followed by "\n  while <context>" for each context line.
  std::string to_string() const;

  // Explicitly discards a Status whose failure the caller has decided not to act on.
  void ignore() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
    std::vector<std::string> context;
  };
  std::unique_ptr<State> state_;
};

inline Status ok_status() { return Status(); }

// Formatting constructors: `return invalid_argument("shape {} has rank {}", s, r);`
#define HXRT_DEFINE_STATUS_FACTORY(fn, code)                                            \
  template <typename... Args>                                                           \
  Status fn(fmt::format_string<Args...> format, Args&&... args) {                       \
    return Status(StatusCode::code, fmt::format(format, std::forward<Args>(args)...)); \
  }
HXRT_DEFINE_STATUS_FACTORY(invalid_argument, kInvalidArgument)
HXRT_DEFINE_STATUS_FACTORY(not_found, kNotFound)
HXRT_DEFINE_STATUS_FACTORY(already_exists, kAlreadyExists)
HXRT_DEFINE_STATUS_FACTORY(out_of_memory, kOutOfMemory)
HXRT_DEFINE_STATUS_FACTORY(out_of_range, kOutOfRange)
HXRT_DEFINE_STATUS_FACTORY(unavailable, kUnavailable)
HXRT_DEFINE_STATUS_FACTORY(unimplemented, kUnimplemented)
HXRT_DEFINE_STATUS_FACTORY(deadline_exceeded, kDeadlineExceeded)
HXRT_DEFINE_STATUS_FACTORY(aborted, kAborted)
HXRT_DEFINE_STATUS_FACTORY(failed_precondition, kFailedPrecondition)
HXRT_DEFINE_STATUS_FACTORY(data_loss, kDataLoss)
HXRT_DEFINE_STATUS_FACTORY(internal_error, kInternal)
#undef HXRT_DEFINE_STATUS_FACTORY

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : storage_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : storage_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(storage_).ok()) {
      storage_ = Status(StatusCode::kInternal, "Result constructed from an OK Status without a value");
    }
  }

  bool ok() const { return std::holds_alternative<T>(storage_); }
  // The error, or OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(storage_); }
  Status take_status() && { return ok() ? Status() : std::move(std::get<Status>(storage_)); }

  // Accessing the value of a failed Result is a programmer error and aborts with the Status.
  T& value() & {
    check_ok();
    return std::get<T>(storage_);
  }
  const T& value() const& {
    check_ok();
    return std::get<T>(storage_);
  }
  T&& value() && {
    check_ok();
    return std::get<T>(std::move(storage_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check_ok() const;
  std::variant<T, Status> storage_;
};

namespace detail {
[[noreturn]] void die_on_bad_result(const Status& status);
}  // namespace detail

template <typename T>
void Result<T>::check_ok() const {
  if (!ok()) detail::die_on_bad_result(std::get<Status>(storage_));
}

}  // namespace hxrt

// Evaluates `expr` (a Status); returns it from the enclosing function when it is not OK.
#define HXRT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::hxrt::Status hxrt_status_tmp_ = (expr);       \
    if (!hxrt_status_tmp_.ok()) return hxrt_status_tmp_; \
  } while (false)

// Like HXRT_RETURN_IF_ERROR, adding a context line built from the remaining fmt arguments.
#define HXRT_RETURN_IF_ERROR_CTX(expr, ...)                                                   \
  do {                                                                                        \
    ::hxrt::Status hxrt_status_tmp_ = (expr);                                                 \
    if (!hxrt_status_tmp_.ok()) return std::move(hxrt_status_tmp_).with_context(fmt::format(__VA_ARGS__)); \
  } while (false)

#define HXRT_CONCAT_INNER_(a, b) a##b
#define HXRT_CONCAT_(a, b) HXRT_CONCAT_INNER_(a, b)

// `HXRT_ASSIGN_OR_RETURN(auto buffer, device.allocate(n, kind));` declares/assigns lhs from a Result or returns
// its Status.
#define HXRT_ASSIGN_OR_RETURN(lhs, expr) HXRT_ASSIGN_OR_RETURN_IMPL_(HXRT_CONCAT_(hxrt_result_, __LINE__), lhs, expr)
#define HXRT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).take_status(); \
  lhs = std::move(tmp).value()
