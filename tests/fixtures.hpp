// Shared test fixtures: canonical specs, fingerprints, an observation builder and a machine description,
// so the tests build their inputs one way.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "contract/observation.hpp"
#include "contract/verdict.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"

namespace detaudit {

// A Status as a test reads it: true when ok; its message in *err either way ("" when ok), so that
// `ASSERT_TRUE(succeeded(f(x), &err)) << err` shows why it failed and `EXPECT_FALSE(...)` can check
// the message.
inline bool succeeded(const Status& st, std::string* err) {
  *err = st.message();
  return st.is_ok();
}

}  // namespace detaudit

namespace detaudit::test {

// The canonical text of a target or workload spec (the test fails when it does not parse).
inline std::string canon_target(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target(text, &s), &err)) << err;
  return s.str();
}
inline std::string canon_workload(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload(text, &s), &err)) << err;
  return s.str();
}

// What a judging command prints on stdout when it could not run: its verdict line alone, ERROR with the
// error (the same line is on stderr).
inline bool only_error_verdict(const std::string& out) {
  return out.rfind("verdict: ERROR  fail=0 warn=0 skip=0  report=-  error: ", 0) == 0 &&
         out.find('\n') == out.size() - 1;
}

// A fingerprint of 32 hex digits, all `digit`.
inline std::string fingerprint(char digit) { return std::string(32, digit); }

// A verdict by its name as results.json spells it ("PASS", ...); "" is a cell not judged.
inline std::optional<Verdict> verdict_named(const std::string& name) {
  Verdict v;
  if (name.empty() || !parse_verdict(name, &v)) return std::nullopt;
  return v;
}

// An observation that ran (status ok): one repeat per fingerprint, the distinct ones counted, not judged.
// What a worker records of the backend a host target ran (its description and settings), as the backend made
// here gives them where that is free of side effects (cpu, cpu-ref); OpenBLAS and oneDNN (whose backends would
// set the test process's thread counts) as their backends write them on the machine of machine_json() (core
// Haswell where the target leaves it to OpenBLAS; the widest of SSE4.1, AVX and AVX2 the cap allows). A GPU
// target's record is left as it is.
inline void describe_as_recorded(Observation* o) {
  Spec t;
  if (!parse_target(o->target, &t).is_ok()) return;
  const BackendEntry* e = find_backend(t.name);
  if (!e || e->device != DeviceKind::kHost || e->imported) return;
  const std::string threads = t.get("threads", "1");
  if (t.name == "openblas") {
    const std::string pinned = t.get("core", "auto"), core = pinned == "auto" ? "Haswell" : pinned;
    o->describe = "openblas?threads=" + threads + " (OpenBLAS core " + core + ")";
    o->details = {{"corename", core}, {"config", "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY " + core + " MAX_THREADS=64"},
                  {"threads", threads}, {"threads_effective", threads}, {"coretype_env", pinned == "auto" ? "" : pinned}};
    return;
  }
  if (t.name == "onednn") {
    const std::string cap = t.get("isa", "ALL"), layout = t.get("layout", "plain");
    const std::string isa = cap == "SSE41" ? "sse41" : cap == "AVX" ? "avx" : "avx2";
    o->describe = std::string("onednn?") + (layout == "blocked" ? "layout=blocked&" : "") + "threads=" + threads +
                  " (oneDNN 2.6.0, isa " + isa + ")";
    o->details = {{"isa_env", cap},        {"effective_isa", isa}, {"impl", "gemm:jit"},
                  {"threads", threads},    {"conv_layout", layout}, {"omp_set_num_threads", "called"}};
    return;
  }
  if (!e->made_here) {
    o->describe = t.str();
    return;
  }
  if (BackendOr b = make_target_backend(t); b) {
    o->describe = (*b)->describe();
    for (auto& [k, v] : (*b)->details()) o->details[k] = v;
  }
}

inline Observation ran(const std::string& workload, const std::string& target, std::vector<std::string> fps) {
  Observation o;
  o.workload = workload;
  o.target = target;
  o.repeats = int(fps.size());
  o.fingerprints = std::move(fps);
  o.distinct = count_distinct(o.fingerprints);
  // Each repeat timed, as the worker times it: a time of its own per observation made (two runs are never timed
  // alike to the nanosecond, which is how a copy of one run is told from a second run).
  static int made = 0;
  ++made;
  for (size_t i = 0; i < o.fingerprints.size(); ++i) o.seconds.push_back(1e-3 + double(made) * 1e-9 + double(i) * 1e-6);
  describe_as_recorded(&o);
  // Not compared with an oracle, and saying why, as a run whose worker could not use the oracle entry does.
  o.details["oracle_problem"] = "no oracle in this test";
  return o;
}

// An observation that did not run: its status (crashed, timeout, skipped, error), why, and the repeats
// it was asked for; no fingerprints, not judged.
inline Observation not_run(const std::string& workload, const std::string& target, ObsStatus status,
                           const std::string& reason, int repeats) {
  Observation o;
  o.workload = workload;
  o.target = target;
  o.status = status;
  o.reason = reason;
  o.repeats = repeats;
  return o;
}

// A machine fingerprint as probes/env.cpp writes one: a CPU with AVX2 and FMA, OpenBLAS, oneDNN, the
// CUDA runtime and driver, cuBLAS, and one H200.
inline nlohmann::json machine_json() {
  return {{"cpu_model", "Test CPU 9000"},
          {"cpu_features", {"sse4.1", "avx", "avx2", "fma"}},
          {"cores", 2},
          {"libraries",
           {{"openblas", "0.3.21"}, {"openblas_core", "Haswell"}, {"onednn", "2.6.0"}, {"cuda_runtime", 12040},
            {"cuda_driver", 12060}, {"cublas", "12.4.5"}}},
          {"gpus", {{{"index", 0}, {"name", "NVIDIA H200"}, {"compute_capability", "9.0"}, {"sm_count", 132}}}},
          {"cuda", "available"}};
}

}  // namespace detaudit::test
