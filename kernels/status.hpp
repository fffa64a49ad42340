// Status: what every kernel, library and device call returns. Library code never exits or throws
// across this boundary; the CLI turns statuses into exit codes. [[nodiscard]]: a Status that is dropped
// is a compiler warning, so a failure cannot be lost by forgetting to look at it.
#pragma once
#include <string>
#include <utility>

namespace detaudit {

class [[nodiscard]] Status {
 public:
  enum class Code { kOk = 0, kUnsupported, kInvalid, kUnavailable, kError };

  Status() = default;
  static Status ok() { return {}; }
  static Status unsupported(std::string m) { return {Code::kUnsupported, std::move(m)}; }
  static Status invalid(std::string m) { return {Code::kInvalid, std::move(m)}; }
  static Status unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status error(std::string m) { return {Code::kError, std::move(m)}; }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

#define DETAUDIT_RETURN_IF_ERROR(expr)        \
  do {                                        \
    ::detaudit::Status _st = (expr);          \
    if (!_st.is_ok()) return _st;             \
  } while (0)

}  // namespace detaudit
