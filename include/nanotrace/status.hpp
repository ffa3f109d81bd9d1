// Status and Result<T>: how nanotrace reports errors. No exceptions cross the public API;
// every fallible call returns one of these, marked [[nodiscard]]. An error carries a code and
// a one-line message fit to print after "nanotrace: ".
//
// Thread safety: values; safe to copy between threads.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace nanotrace {

enum class StatusCode {
  kOk = 0,
  kNotFound,         // no such process, segment, file or event
  kInvalidArgument,  // a bad option or expression from the caller
  kCorrupt,          // a segment or file failed validation
  kIoError,          // a system call failed (errno in the message)
  kUnsupported,      // a version or feature this build does not know
  kBusy,             // the resource is held by someone else (e.g. another consumer)
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Invalid(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status Busy(std::string m) { return {StatusCode::kBusy, std::move(m)}; }
  // An I/O error from errno: "<what>: <strerror(err)>".
  static Status FromErrno(const std::string& what, int err);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: REQUIRES: !status.ok()

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace nanotrace
