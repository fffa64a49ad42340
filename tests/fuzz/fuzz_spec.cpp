// Fuzzes the spec parser (probes/spec.hpp): parse_target and parse_workload on any string. A spec that
// parses must print (str()) to a spec that parses again to the same text; a rejected one must say why.
#include <string>

#include "probes/spec.hpp"
#include "tests/fuzz/fuzz_util.hpp"

namespace {

using Parser = detaudit::Status (*)(const std::string&, detaudit::Spec*);

void check(Parser parse, const char* what, const std::string& text) {
  detaudit::Spec s;
  if (detaudit::Status st = parse(text, &s); !st) {
    if (st.message().empty()) detaudit::fuzz::fail("rejected without a message", std::string(what) + ": " + text);
    return;
  }
  const std::string canon = s.str();
  detaudit::Spec again;
  if (detaudit::Status st = parse(canon, &again); !st)
    detaudit::fuzz::fail("canonical text does not parse",
                         std::string(what) + ": '" + text + "' -> '" + canon + "': " + st.message());
  if (again.str() != canon)
    detaudit::fuzz::fail("canonical text is not a fixed point",
                         std::string(what) + ": '" + text + "' -> '" + canon + "' -> '" + again.str() + "'");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  check(detaudit::parse_target, "target", text);
  check(detaudit::parse_workload, "workload", text);
  return 0;
}
