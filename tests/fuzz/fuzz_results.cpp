// Fuzzes the results.json loader (contract/results.hpp): load_results on any bytes must answer true or
// false with a message, never throw. A file it accepts must save and load again to the same JSON (compared
// as text: a NaN loss is written as null and read back as NaN, and NaN != NaN).
#include <string>

#include "contract/results.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = detaudit::fuzz::scratch_path("-results.json");
  static const std::string again_path = detaudit::fuzz::scratch_path("-results-again.json");
  detaudit::fuzz::write_scratch(path, data, size);
  detaudit::Results r;
  if (detaudit::Status st = detaudit::load_results(path, &r); !st) {
    if (st.message().empty()) detaudit::fuzz::fail("rejected without a message", "");
    return 0;
  }
  const std::string first = detaudit::to_json(r).dump();
  if (detaudit::Status st = detaudit::save_results(again_path, r); !st)
    detaudit::fuzz::fail("cannot save what was loaded", st.message());
  detaudit::Results again;
  if (detaudit::Status st = detaudit::load_results(again_path, &again); !st)
    detaudit::fuzz::fail("saved results do not load", st.message());
  if (const std::string second = detaudit::to_json(again).dump(); second != first)
    detaudit::fuzz::fail("results change on a save/load round trip", first + "\n->\n" + second);
  return 0;
}
