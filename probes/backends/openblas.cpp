// openblas: OpenBLAS sgemm/dgemm and im2col convolutions (kernels/cpu/openblas_backend.cpp).
#include "probes/backends/common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "contract/results.hpp"  // shown_safely
#include "kernels/cpu/openblas_backend.hpp"

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

bool equal_ignoring_case(const std::string& a, const std::string& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// A record of an OpenBLAS run, as kernels/cpu/openblas_backend.cpp writes it: named "openblas?threads=N" with the
// target's threads; its remark names the core it ran, the core the target pinned (auto: the one OpenBLAS chose,
// which the worker's CPU decides; a name of OpenBLAS's own spelling, which it matches without regard to case, so
// core=CooperLake runs as "Cooperlake"), through the environment the worker was given, with the threads asked for
// in effect; its config is the machine's OpenBLAS build but for the core it names.
std::string claims_openblas(const Spec& t, const std::string& spelled, const std::string& remark,
                            const std::map<std::string, std::string>& d, const nlohmann::json& machine) {
  const std::string core = t.get("core", "auto"), threads = t.get("threads", "1");
  if (const std::string want = "openblas?threads=" + threads; spelled != want)
    return fmt::format("it names itself \"{}\", but an OpenBLAS backend of {} names itself {}",
                       shown_safely(spelled.substr(0, 60)), t.str(), want);
  static const std::set<std::string> kKeys = {"corename", "config", "threads", "threads_effective", "coretype_env"};
  for (auto& [k, v] : d)
    if (!kKeys.count(k)) return fmt::format("details.{} is no setting an OpenBLAS backend reports", shown_safely(k.substr(0, 40)));
  // (a cell that did not run reports none; one that ran, all)
  for (auto& k : kKeys)
    if (!d.empty() && !d.count(k)) return fmt::format("details.{} is missing, but an OpenBLAS backend that ran reports it", k);
  auto at = [&](const char* k) { return d.count(k) ? d.at(k) : std::string(); };
  // The core: the details' (a cell that ran), else the remark's (one that did not run describes the backend made).
  const std::string corename = d.count("corename") ? at("corename")
                               : remark.starts_with("OpenBLAS core ") ? remark.substr(14)
                                                                      : std::string();
  if (d.count("corename") || !remark.empty()) {
    if (remark != "OpenBLAS core " + corename)
      return fmt::format("the remark \"({})\" is not the core its details name (OpenBLAS core {})",
                         shown_safely(remark.substr(0, 60)), shown_safely(corename.substr(0, 40)));
    if (core != "auto" && !equal_ignoring_case(corename, core))
      return fmt::format("{} \"{}\", but its target pins core {}", d.count("corename") ? "details.corename is" : "it ran core",
                         shown_safely(corename.substr(0, 40)), core);
    // (auto: a core name as OpenBLAS spells them, such as "Haswell" or "Opteron(SSE3)")
    if (corename.empty() || corename.size() > 20 ||
        !std::all_of(corename.begin(), corename.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '(' || c == ')'; }))
      return fmt::format("\"{}\" is no OpenBLAS core name", shown_safely(corename.substr(0, 40)));
  }
  if (d.count("config")) {
    // The machine's build string names the core the machine's own process resolved; the cell's names its own.
    auto lib = [&](const char* k) {
      return machine.is_object() && machine.contains("libraries") && machine["libraries"].is_object() &&
                     machine["libraries"].contains(k) && machine["libraries"][k].is_string()
                 ? machine["libraries"][k].get<std::string>()
                 : std::string();
    };
    const std::string build = lib("openblas"), build_core = lib("openblas_core");
    // (the machine's own core is the one its build string names, as OpenBLAS writes it)
    if (build.starts_with("OpenBLAS ") && !build_core.empty() && build.find(" " + build_core + " ") == std::string::npos)
      return fmt::format("the machine's openblas_core \"{}\" is not the core its OpenBLAS build names ({})",
                         shown_safely(build_core.substr(0, 40)), shown_safely(build.substr(0, 80)));
    std::string want;
    if (const size_t pos = build.find(" " + build_core + " "); !build_core.empty() && pos != std::string::npos)
      want = build.substr(0, pos + 1) + corename + build.substr(pos + 1 + build_core.size());
    const std::string config = at("config");
    if (!want.empty() ? config != want
                      : !config.starts_with("OpenBLAS ") || config.find(" " + corename + " ") == std::string::npos)
      return fmt::format("details.config \"{}\" is not {}", shown_safely(config.substr(0, 80)),
                         want.empty() ? "an OpenBLAS build string naming the core it ran"
                                      : "the machine's OpenBLAS build (" + shown_safely(build.substr(0, 80)) +
                                            ") with the core it ran");
  }
  if (d.count("coretype_env") && at("coretype_env") != (core == "auto" ? "" : core))
    return fmt::format("details.coretype_env is \"{}\", but its target's worker runs with OPENBLAS_CORETYPE {}",
                       shown_safely(at("coretype_env").substr(0, 40)), core == "auto" ? "unset" : core);
  if (d.count("threads_effective") && at("threads_effective") != threads)
    return fmt::format("details.threads_effective is \"{}\", but its target pins {} threads",
                       shown_safely(at("threads_effective").substr(0, 40)), threads);
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
