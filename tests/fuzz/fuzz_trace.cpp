// Fuzzes the diverge trace reader (suites/diverge.hpp, `detaudit diverge --trace a --trace b`): the input is
// written as both traces and compared; any bytes must give a status with a one-line message, never an
// exception, a crash or an allocation the trace's own lines do not justify. Two equal traces that are
// accepted have no first divergence.
#include <string>

#include "suites/diverge.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string a = detaudit::fuzz::scratch_path("-trace-a.jsonl");
  static const std::string b = detaudit::fuzz::scratch_path("-trace-b.jsonl");
  detaudit::fuzz::write_scratch(a, data, size);
  detaudit::fuzz::write_scratch(b, data, size);
  detaudit::DivergeResult r;
  const detaudit::Status st = detaudit::compare_traces(a, b, &r);
  if (!st.is_ok()) {
    if (st.message().empty()) detaudit::fuzz::fail("rejected without a message", "");
    if (st.message().find('\n') != std::string::npos) detaudit::fuzz::fail("a message of more than one line", st.message());
    return 0;
  }
  if (r.first) detaudit::fuzz::fail("a trace diverges from itself", "");
  return 0;
}
