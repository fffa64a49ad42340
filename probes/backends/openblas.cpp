// openblas: OpenBLAS sgemm/dgemm and im2col convolutions (kernels/cpu/openblas_backend.cpp).
#include "probes/backends/common.hpp"

#include <fmt/format.h>

#include "kernels/cpu/vendor.hpp"

namespace detaudit {

namespace {

// The core types OpenBLAS 0.3.21 recognises, and the instruction sets the kernels of each use. It
// silently runs an unknown name (and "SapphireRapids") as Cooperlake, so only names it knows are
// accepted, and the core it really ran is recorded per observation. Running a core's kernels on a CPU
// without its instruction sets dies with SIGILL: EXPECTED, not a failure.
// Sources (OpenBLAS sources, read through the search index): Makefile.x86_64 compiles each core's
// kernels (DYNAMIC_ARCH: per TARGET_CORE) with the instruction sets that core has -- -msse3, -mssse3,
// -msse4.1, -mavx, -mavx2 from its HAVE_* flags; SKYLAKEX with -march=skylake-avx512 (AVX-512
// F/CD/BW/DQ/VL: listed as F, which every CPU but the Xeon Phi pairs with the rest), COOPERLAKE with
// -march=cooperlake (adds AVX512_BF16); the hand-written kernels of kernel/x86_64/KERNEL.<CORE> use
// FMA3 (Haswell, Zen: vfmadd231), FMA4 (Bulldozer to Excavator: the *_bulldozer / *_piledriver
// kernels) and SSE4A (Barcelona). driver/others/dynamic.c picks the same cores by these features when
// it detects the CPU itself (core=auto), so auto has no requirement.
struct OpenblasCore {
  const char* name;
  std::vector<std::string> requirements;
};
const std::vector<OpenblasCore>& openblas_cores() {
  static const std::vector<OpenblasCore> cores = {
      {"auto", {}},  // OpenBLAS picks a core this CPU runs
      {"Prescott", {"SSE3"}},
      {"Core2", {"SSSE3"}},
      {"Penryn", {"SSE4.1"}},
      {"Dunnington", {"SSE4.1"}},
      {"Nehalem", {"SSE4.1"}},
      {"Atom", {"SSSE3"}},
      {"Nano", {"SSSE3"}},
      {"Sandybridge", {"AVX"}},
      {"Haswell", {"AVX2", "FMA"}},
      {"Zen", {"AVX2", "FMA"}},
      {"SkylakeX", {"AVX-512F"}},
      {"CooperLake", {"AVX-512F", "AVX-512 BF16"}},
      {"Barcelona", {"SSE4A"}},
      {"Opteron", {}},  // SSE2 kernels: every x86-64 CPU has SSE2
      {"Bulldozer", {"AVX", "FMA4", "XOP"}},
      {"Piledriver", {"AVX", "FMA", "FMA4", "XOP"}},
      {"Steamroller", {"AVX", "FMA", "FMA4", "XOP"}},
      {"Excavator", {"AVX", "FMA", "FMA4", "XOP"}},
  };
  return cores;
}
std::vector<std::string> openblas_core_names() {
  std::vector<std::string> v;
  for (auto& c : openblas_cores()) v.push_back(c.name);
  return v;
}
std::vector<std::string> openblas_core_requirements(const std::string& core) {
  for (auto& c : openblas_cores())
    if (core == c.name) return c.requirements;
  return {};
}

Promise promise_openblas(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  const int64_t threads = t.get_int("threads", 1);
  Promise p;
  // OpenBLAS documents no reproducibility rule; this is detaudit's reading of its code. One thread: one
  // kernel (the core type's) in one summation order. Several threads: the partition is static --
  // driver/level3/level3_thread.c and gemm_thread_m.c split C into ranges of M and N
  // (blas_quickdivide over the thread count), each thread runs the whole K loop of its range in order,
  // and the threaded level-1 kernels (sdot) split n into fixed blocks whose partials add in thread
  // order. So the bits are fixed for a (core, threads) pair and may differ between pairs: no class.
  if (threads == 1)
    p = deterministic("OpenBLAS code: one thread runs one kernel in one summation order");
  else
    p = deterministic(fmt::format("OpenBLAS code: {} threads split the work statically (M/N ranges, never K)", threads));
  p.requirements = openblas_core_requirements(t.get("core", "auto"));
  return p;
}

void environment_openblas(const Spec& t, std::map<std::string, std::string>* env) {
  std::string core = t.get("core", "auto");
  (*env)["OPENBLAS_CORETYPE"] = core == "auto" ? "" : core;
}
BackendOr make_openblas_backend(const Spec& t) { return make_openblas(OpenblasOptions{threads_of(t)}); }

std::vector<SuiteTarget> suite_targets_openblas(const std::string& suite) {
  std::vector<SuiteTarget> v;
  if (suite == "quick") {
    // SkylakeX needs AVX-512 and Bulldozer FMA4/XOP: on most CPUs one of them dies with SIGILL, which
    // the suite records and goes past.
    for (const char* core : {"Haswell", "SkylakeX", "Sandybridge", "Nehalem", "Core2", "Bulldozer"})
      v.push_back({fmt::format("openblas?core={}&threads=1", core)});
    v.push_back({"openblas?core=Haswell&threads=2"});
  } else if (suite == "full") {
    for (const char* core : {"Haswell", "Zen", "SkylakeX", "CooperLake", "Sandybridge", "Nehalem", "Core2", "Penryn",
                             "Dunnington", "Prescott", "Atom", "Nano", "Barcelona", "Bulldozer", "Excavator"})
      v.push_back({fmt::format("openblas?core={}&threads=1", core)});
    for (int t : {2, 4}) v.push_back({fmt::format("openblas?core=Haswell&threads={}", t)});
  }
  return v;
}

// A record of an OpenBLAS run: its remark names the core it ran, the core the target pinned (auto: the one
// OpenBLAS chose, which the worker's CPU decides), through the environment the worker was given, with the
// threads asked for in effect.
std::string claims_openblas(const Spec& t, const std::string& remark, const std::map<std::string, std::string>& d,
                            const nlohmann::json&) {
  const std::string core = t.get("core", "auto");
  auto at = [&](const char* k) { return d.count(k) ? d.at(k) : std::string(); };
  if (d.count("corename") && remark != "OpenBLAS core " + at("corename"))
    return fmt::format("the remark \"({})\" is not the core its details name (OpenBLAS core {})", remark.substr(0, 60),
                       at("corename").substr(0, 40));
  if (core != "auto" && d.count("corename") && at("corename") != core)
    return fmt::format("details.corename is \"{}\", but its target pins core {}", at("corename").substr(0, 40), core);
  if (d.count("coretype_env") && at("coretype_env") != (core == "auto" ? "" : core))
    return fmt::format("details.coretype_env is \"{}\", but its target's worker runs with OPENBLAS_CORETYPE {}",
                       at("coretype_env").substr(0, 40), core == "auto" ? "unset" : core);
  if (d.count("threads_effective") && at("threads_effective") != t.get("threads", "1"))
    return fmt::format("details.threads_effective is \"{}\", but its target pins {} threads",
                       at("threads_effective").substr(0, 40), t.get("threads", "1"));
  return "";
}

void describe_openblas(nlohmann::json* libs) {
  (*libs)["openblas"] = openblas_version_string();
  (*libs)["openblas_core"] = openblas_corename();
}

}  // namespace

BackendEntry openblas_backend() {
  BackendEntry e;
  e.name = "openblas";
  e.keys = {key_one_of("core", "auto", openblas_core_names()), key_int_in("threads", "1", 1, 256)};
  e.environment = environment_openblas;
  e.make = make_openblas_backend;
  e.summary = "OpenBLAS sgemm/dgemm, conv2d by im2col+gemm; core= sets OPENBLAS_CORETYPE";
  e.libraries = {"openblas"};
  e.build = {"openblas_core"};  // the core (kernel set) OpenBLAS resolved on this CPU
  e.applicable = always;
  e.promise = promise_openblas;
  e.suite_targets = suite_targets_openblas;
  e.describe_machine = describe_openblas;
  e.claims = claims_openblas;
  return e;
}

}  // namespace detaudit
