// Status: what every kernel, library and device call returns, and StatusOr<T>: a value or the Status
// that says why there is none. These are the library's one error style: library code never exits,
// never throws across this boundary and never returns a process exit code; the CLI alone turns a
// Status into an exit code (cli/common.hpp, fail). [[nodiscard]]: a Status or StatusOr that
// is dropped is a compiler warning, so a failure cannot be lost by forgetting to look at it.
//
// Codes: kInvalid is bad input (a malformed spec, a corrupt file; the CLI exits 2), kUnsupported and
// kUnavailable say a target cannot run a cell here (recorded as a skip), kError is an environment or
// I/O failure (exit 2), kInterrupted says a signal stopped a long run after saving what it finished
// (exit 3).
#pragma once
#include <cassert>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace detaudit {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk = 0, kUnsupported, kInvalid, kUnavailable, kError, kInterrupted };

  Status() = default;
  static Status ok() { return {}; }
  static Status unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
  static Status invalid(std::string m) { return {Code::kInvalid, std::move(m)}; }
  static Status unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status error(std::string m) { return {Code::kError, std::move(m)}; }
  static Status interrupted(std::string m) { return {Code::kInterrupted, std::move(m)}; }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The same failure with `prefix` in front of its message ("results.json: " + ...); ok stays ok.
  Status prefixed(const std::string& prefix) const {
    return is_ok() ? Status{} : Status{code_, prefix + message_};
  }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// A value, or the failure that stands in its place. Constructed from a T (ok) or from a failed Status;
// a StatusOr made from an ok Status is a programming error and becomes kError rather than an ok
// without a value.
template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit, so `return value;` works
  // Anything a T is made from (a std::unique_ptr<Derived> for a std::unique_ptr<Base>), in one step.
  template <class U, class = std::enable_if_t<std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
                                              !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT: implicit, as above
  StatusOr(Status st)                                         // NOLINT: implicit, so `return Status::...;` works
      : status_(st.is_ok() ? Status::error("internal: StatusOr built from an ok Status") : std::move(st)) {}

  bool is_ok() const { return status_.is_ok(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }

  T& value() & { assert(value_); return *value_; }
  const T& value() const& { assert(value_); return *value_; }
  T&& value() && { assert(value_); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

#define DETAUDIT_RETURN_IF_ERROR(expr)        \
  do {                                        \
    ::detaudit::Status _st = (expr);          \
    if (!_st.is_ok()) return _st;             \
  } while (0)

}  // namespace detaudit
