// onednn: oneDNN convolutions, matmul and reductions (kernels/cpu/onednn_backend.cpp).
#include "probes/backends/common.hpp"

#include <fmt/format.h>

#include "kernels/cpu/vendor.hpp"

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

// A record of a oneDNN run: its remark names the library (the machine's version, where the record has one) and
// the instruction set it dispatched to; the cap and the convolution layout are the target's, through the
// environment the worker was given.
std::string claims_onednn(const Spec& t, const std::string& remark, const std::map<std::string, std::string>& d,
                          const nlohmann::json& libraries) {
  auto at = [&](const char* k) { return d.count(k) ? d.at(k) : std::string(); };
  const std::string version = libraries.is_object() && libraries.contains("onednn") && libraries["onednn"].is_string()
                                  ? libraries["onednn"].get<std::string>()
                                  : "";
  if (d.count("effective_isa") && !remark.ends_with(", isa " + at("effective_isa")))
    return fmt::format("the remark \"({})\" does not end with the instruction set its details name (isa {})",
                       remark.substr(0, 60), at("effective_isa").substr(0, 40));
  if (!remark.empty() && (!remark.starts_with("oneDNN ") || (!version.empty() && !remark.starts_with("oneDNN " + version + ", isa "))))
    return fmt::format("the remark \"({})\" does not name the oneDNN of the machine ({})", remark.substr(0, 60),
                       version.empty() ? "oneDNN <version>, isa <isa>" : version);
  if (d.count("isa_env") && at("isa_env") != t.get("isa", "ALL"))
    return fmt::format("details.isa_env is \"{}\", but its target's worker runs with ONEDNN_MAX_CPU_ISA {}",
                       at("isa_env").substr(0, 40), t.get("isa", "ALL"));
  if (d.count("conv_layout") && at("conv_layout") != t.get("layout", "plain"))
    return fmt::format("details.conv_layout is \"{}\", but its target runs layout={}", at("conv_layout").substr(0, 40),
                       t.get("layout", "plain"));
  if (d.count("omp_set_num_threads") && at("omp_set_num_threads") != "called" &&
      at("omp_set_num_threads") != "not found (OMP_NUM_THREADS only)")
    return fmt::format("details.omp_set_num_threads is \"{}\", which oneDNN's backend never reports",
                       at("omp_set_num_threads").substr(0, 40));
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
