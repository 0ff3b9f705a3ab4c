#include "hxrt/base/status.h"

#include <cstdio>
#include <cstdlib>

#include "hxrt/base/check.h"

namespace hxrt {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kOutOfMemory: return "OUT_OF_MEMORY";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_unique<State>(State{code, std::move(message), {}});
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

const std::vector<std::string>& Status::context() const {
  static const std::vector<std::string> kEmpty;
  return state_ ? state_->context : kEmpty;
}

Status& Status::with_context(std::string line) & {
  if (state_) state_->context.push_back(std::move(line));
  return *this;
}

Status&& Status::with_context(std::string line) && {
  if (state_) state_->context.push_back(std::move(line));
  return std::move(*this);
}

std::string Status::to_string() const {
  if (!state_) return "OK";
  std::string out = fmt::format("{}: {}", status_code_name(state_->code), state_->message);
  for (const std::string& line : state_->context) {
    out += "\n  while ";
    out += line;
  }
  return out;
}

namespace detail {

void die_on_bad_result(const Status& status) {
  check_failed("result.ok()", __FILE__, __LINE__, "value() of a failed Result: " + status.to_string());
}

void check_failed(const char* condition, const char* file, int line, const std::string& message) {
  std::fprintf(stderr, "hxrt: check failed: %s at %s:%d%s%s\n", condition, file, line, message.empty() ? "" : ": ",
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace detail
}  // namespace hxrt
