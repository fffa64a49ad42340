// Fuzzes the worker request parser (probes/worker.hpp): any text must be accepted or rejected with a
// message, never throw. An accepted request holds canonical specs (they parse again to themselves) and
// one index per item.
#include <string>

#include "probes/worker.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  detaudit::WorkerRequest req;
  if (detaudit::Status st = detaudit::parse_worker_request(text, &req); !st) {
    if (st.message().empty()) detaudit::fuzz::fail("rejected without a message", text);
    return 0;
  }
  if (req.repeats < 1 || req.repeats > detaudit::kMaxRepeats) detaudit::fuzz::fail("repeats out of range", text);
  if (req.indices.size() != req.items.size()) detaudit::fuzz::fail("one index per item", text);
  detaudit::Spec s;
  if (!detaudit::parse_target(req.target.str(), &s).is_ok() || s.str() != req.target.str())
    detaudit::fuzz::fail("target is not canonical", req.target.str());
  for (const auto& it : req.items)
    if (!detaudit::parse_workload(it.workload.str(), &s).is_ok() || s.str() != it.workload.str())
      detaudit::fuzz::fail("workload is not canonical", it.workload.str());
  return 0;
}
