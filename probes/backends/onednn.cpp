// onednn: oneDNN convolutions, matmul and reductions (kernels/cpu/onednn_backend.cpp).
#include "probes/backends/common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "contract/results.hpp"  // shown_safely
#include "kernels/cpu/onednn_backend.hpp"

namespace detaudit {

namespace {

Promise promise_onednn(const Spec&, const Spec&, const std::map<std::string, std::string>&) {
  // oneDNN's guide ("Primitive Attributes: deterministic"): most primitives are run-to-run
  // deterministic in a fixed environment, but "some implementations rely on non-deterministic
  // constructs such as atomic operations"; bitwise run-to-run results are guaranteed only with the
  // deterministic attribute, which oneDNN 2.6 (the version detaudit builds against) does not have.
  // So nothing is promised, whatever the thread count. The isa key is a cap (ONEDNN_MAX_CPU_ISA): an
  // ISA the CPU lacks falls back to a lower one, so there is no requirement either.
  return nothing("oneDNN guarantees bitwise run-to-run results only with its deterministic attribute (not in 2.6)");
}

void environment_onednn(const Spec& t, std::map<std::string, std::string>* env) {
  (*env)["ONEDNN_MAX_CPU_ISA"] = t.get("isa", "ALL");
  (*env)["DNNL_MAX_CPU_ISA"] = t.get("isa", "ALL");
}
BackendOr make_onednn_backend(const Spec& t) {
  return make_onednn(OnednnOptions{threads_of(t)},
                     t.get("layout", "plain") == "blocked" ? OnednnConvLayout::kBlocked : OnednnConvLayout::kPlain);
}

std::vector<SuiteTarget> suite_targets_onednn(const std::string& suite) {
  std::vector<SuiteTarget> v;
  if (suite == "quick") {
    for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE"}) v.push_back({fmt::format("onednn?isa={}&threads=1", isa)});
    v.push_back({"onednn?isa=AVX2&threads=1&layout=blocked"});
  } else if (suite == "full") {
    for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE", "ALL"}) {
      v.push_back({fmt::format("onednn?isa={}&threads=1", isa)});
      v.push_back({fmt::format("onednn?isa={}&threads=1&layout=blocked", isa)});
    }
    v.push_back({"onednn?isa=ALL&threads=2"});
  }
  return v;
}

}  // namespace

namespace {

// The instruction sets oneDNN 2.6 dispatches to (kernels/cpu/onednn_backend.cpp's names), each above the ones
// before it, with the CPU features (as probes/env.cpp names them) each needs at least. avx512_mic and
// avx512_mic_4ops (Xeon Phi) are no subset of avx512_core: only an uncapped run (ALL) reaches them.
struct OnednnIsa {
  const char* name;
  std::vector<const char*> features;
};
const std::vector<OnednnIsa>& onednn_isas() {
  static const std::vector<OnednnIsa> isas = {
      {"sse41", {"sse4.1"}},
      {"avx", {"avx"}},
      {"avx2", {"avx2"}},
      {"avx2_vnni", {"avx2"}},
      {"avx512_mic", {"avx512f"}},
      {"avx512_mic_4ops", {"avx512f"}},
      {"avx512_core", {"avx512f", "avx512bw"}},
      {"avx512_core_vnni", {"avx512f", "avx512bw", "avx512vnni"}},
      {"avx512_core_bf16", {"avx512f", "avx512bw", "avx512vnni", "avx512bf16"}},
      {"avx512_core_amx", {"avx512f", "avx512bw", "avx512vnni", "avx512bf16"}},
  };
  return isas;
}
// Its place in that order, -1 for none.
int onednn_isa_rank(const std::string& name) {
  const auto& v = onednn_isas();
  for (size_t i = 0; i < v.size(); ++i)
    if (name == v[i].name) return int(i);
  return -1;
}
// The highest instruction set a cap (the isa key, ONEDNN_MAX_CPU_ISA's spelling) lets oneDNN dispatch to.
int onednn_cap_rank(const std::string& cap) {
  if (cap == "ALL") return int(onednn_isas().size()) - 1;
  std::string lower = cap;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  return onednn_isa_rank(lower);
}

// A record of a oneDNN run, as kernels/cpu/onednn_backend.cpp writes it: named by its layout (when blocked) and
// threads; its remark names the machine's oneDNN and the instruction set it dispatched to, one at most the cap
// the target sets and one the machine's CPU has; the implementation of the primitive it ran last is oneDNN's
// name for one, naming no instruction set above that one; the cap and the convolution layout are the target's,
// through the environment the worker was given.
std::string claims_onednn(const Spec& t, const std::string& spelled, const std::string& remark,
                          const std::map<std::string, std::string>& d, const nlohmann::json& machine) {
  const std::string cap = t.get("isa", "ALL"), layout = t.get("layout", "plain");
  if (const std::string want = std::string("onednn?") + (layout == "blocked" ? "layout=blocked&" : "") +
                               "threads=" + t.get("threads", "1");
      spelled != want)
    return fmt::format("it names itself \"{}\", but a oneDNN backend of {} names itself {}",
                       shown_safely(spelled.substr(0, 60)), t.str(), want);
  static const std::set<std::string> kKeys = {"isa_env", "effective_isa", "impl", "threads", "conv_layout",
                                              "omp_set_num_threads"};
  for (auto& [k, v] : d)
    if (!kKeys.count(k)) return fmt::format("details.{} is no setting a oneDNN backend reports", shown_safely(k.substr(0, 40)));
  // (a cell that did not run reports none; one that ran, all)
  for (auto& k : kKeys)
    if (!d.empty() && !d.count(k)) return fmt::format("details.{} is missing, but a oneDNN backend that ran reports it", k);
  auto at = [&](const char* k) { return d.count(k) ? d.at(k) : std::string(); };
  const nlohmann::json no;
  const nlohmann::json& libs =
      machine.is_object() && machine.contains("libraries") && machine["libraries"].is_object() ? machine["libraries"] : no;
  const std::string version = libs.contains("onednn") && libs["onednn"].is_string() ? libs["onednn"].get<std::string>() : "";
  if (!remark.empty() || d.count("effective_isa")) {
    // The instruction set: the details' (a cell that ran), else the remark's (one that did not run describes the
    // backend made).
    const size_t said = remark.rfind(", isa ");
    const std::string isa = d.count("effective_isa") ? at("effective_isa")
                            : said != std::string::npos ? remark.substr(said + 6)
                                                        : std::string();
    if (!version.empty() ? remark != "oneDNN " + version + ", isa " + isa
                         : !remark.starts_with("oneDNN ") || !remark.ends_with(", isa " + isa))
      return fmt::format("the remark \"({})\" is not \"oneDNN {}, isa {}\" (the machine's oneDNN and the instruction set "
                         "its details name)",
                         shown_safely(remark.substr(0, 60)), version.empty() ? "<version>" : version,
                         shown_safely(isa.substr(0, 40)));
    const int rank = onednn_isa_rank(isa);
    if (rank < 0) return fmt::format("instruction set \"{}\" is none oneDNN dispatches to", shown_safely(isa.substr(0, 40)));
    if (rank > onednn_cap_rank(cap) || (cap != "ALL" && isa.starts_with("avx512_mic")))
      return fmt::format("instruction set {} is above the cap {} its target sets", isa, cap);
    if (machine.is_object() && machine.contains("cpu_features") && machine["cpu_features"].is_array())
      for (const char* f : onednn_isas()[size_t(rank)].features)
        if (std::none_of(machine["cpu_features"].begin(), machine["cpu_features"].end(),
                         [&](const nlohmann::json& x) { return x == f; }))
          return fmt::format("instruction set {} needs {}, which the machine's CPU lacks", isa, f);
    // The implementation: oneDNN's name ("brg:avx512_core", "x64:gemm:jit", "ref:any"), any instruction set it
    // names at most the one dispatched to.
    if (d.count("impl")) {
      const std::string impl = at("impl");
      if (impl.empty() || impl.size() > 80 || !std::all_of(impl.begin(), impl.end(), [](char c) {
            return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
                   c == '_' || c == ':';
          }))
        return fmt::format("details.impl \"{}\" is no name oneDNN gives an implementation", shown_safely(impl.substr(0, 80)));
      for (size_t from = 0; from <= impl.size();) {
        const size_t to = std::min(impl.find(':', from), impl.size());
        const std::string word = impl.substr(from, to - from);
        int named = -1;  // the highest instruction set the word begins with ("avx512_core_bf16_amx_int8" and the like)
        for (size_t i = 0; i < onednn_isas().size(); ++i)
          if (word.starts_with(onednn_isas()[i].name)) named = int(i);
        if (named > rank)
          return fmt::format("details.impl \"{}\" runs {}, above the instruction set it dispatched to ({})",
                             impl, onednn_isas()[size_t(named)].name, isa);
        from = to + 1;
      }
    }
  }
  if (d.count("isa_env") && at("isa_env") != cap)
    return fmt::format("details.isa_env is \"{}\", but its target's worker runs with ONEDNN_MAX_CPU_ISA {}",
                       shown_safely(at("isa_env").substr(0, 40)), cap);
  if (d.count("conv_layout") && at("conv_layout") != layout)
    return fmt::format("details.conv_layout is \"{}\", but its target runs layout={}", shown_safely(at("conv_layout").substr(0, 40)),
                       layout);
  if (d.count("omp_set_num_threads") && at("omp_set_num_threads") != "called" &&
      at("omp_set_num_threads") != "not found (OMP_NUM_THREADS only)")
    return fmt::format("details.omp_set_num_threads is \"{}\", which oneDNN's backend never reports",
                       shown_safely(at("omp_set_num_threads").substr(0, 40)));
  return "";
}

}  // namespace

BackendEntry onednn_backend() {
  BackendEntry e;
  e.name = "onednn";
  // ONEDNN_MAX_CPU_ISA values detaudit accepts.
  e.keys = {key_one_of("isa", "ALL",
                       {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI", "AVX512_CORE_BF16",
                        "AVX512_CORE_AMX", "ALL"}),
            key_int_in("threads", "1", 1, 256),
            key_one_of("layout", "plain", {"plain", "blocked"})};
  e.environment = environment_onednn;
  e.make = make_onednn_backend;
  e.summary = "oneDNN conv2d, matmul, reductions; isa= sets ONEDNN_MAX_CPU_ISA; layout=blocked lets conv pick its own";
  e.libraries = {"onednn"};
  e.build = {"onednn_isa"};  // the instruction set oneDNN dispatches to on this CPU
  e.applicable = always;
  e.promise = promise_onednn;
  e.suite_targets = suite_targets_onednn;
  e.describe_machine = [](nlohmann::json* libs) {
    (*libs)["onednn"] = onednn_version_string();
    (*libs)["onednn_isa"] = onednn_effective_isa();
  };
  e.claims = claims_onednn;
  return e;
}

}  // namespace detaudit
