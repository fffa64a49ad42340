// Fuzzes the export manifest reader (suites/external.hpp, `detaudit import DIR`): the input is written as
// DIR/manifest.json and read as import reads it. Any bytes must give a status with a one-line message,
// never an exception or a crash; an accepted manifest names at least one workload, none twice. The text
// @VERSION@ stands for this build's version, so the seeds stay valid when the version changes. Entries
// whose inputs would take more than 64 MiB are left out before the reader runs: the reader generates a
// spec's inputs to compare their fingerprint, and its memory guard (refusing what the machine cannot hold)
// is tested by the SafeFiles tests, not within a fuzzer's memory limit.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "probes/spec.hpp"
#include "probes/workload.hpp"
#include "suites/external.hpp"
#include "tests/fuzz/fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    std::string d = detaudit::fuzz::scratch_path("-manifest");
    std::filesystem::create_directories(d);
    return d;
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t at; (at = text.find("@VERSION@")) != std::string::npos;) text.replace(at, 9, DETAUDIT_VERSION);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_object() && j.contains("workloads") && j["workloads"].is_array()) {
    for (const auto& w : j["workloads"]) {
      detaudit::Spec spec;
      if (w.is_object() && w.contains("spec") && w["spec"].is_string() &&
          detaudit::parse_workload(w["spec"].get<std::string>(), &spec).is_ok() &&
          detaudit::estimate_memory(spec).total() > double(64 << 20))
        return 0;
    }
  }
  detaudit::fuzz::write_scratch(dir + "/manifest.json", reinterpret_cast<const uint8_t*>(text.data()), text.size());
  std::vector<detaudit::Spec> specs;
  const detaudit::Status st = detaudit::read_manifest_specs(dir, &specs);
  if (!st.is_ok()) {
    if (st.message().empty()) detaudit::fuzz::fail("rejected without a message", "");
    if (st.message().find('\n') != std::string::npos)
      detaudit::fuzz::fail("a message of more than one line", st.message());
    return 0;
  }
  if (specs.empty()) detaudit::fuzz::fail("an accepted manifest without workloads", text);
  std::set<std::string> seen;
  for (const auto& s : specs)
    if (!seen.insert(s.str()).second) detaudit::fuzz::fail("a workload accepted twice", s.str());
  return 0;
}
