// The backend registry (probes/registry.hpp): the list of entries, one line per backend, each made in its own
// file of probes/backends/ (its keys, promises, factory, suite and training targets, machine description).
// Every promise there says who makes it; where neither detaudit's code nor the vendor's documentation
// guarantees something, the promise is RunToRun::kNone.
#include "probes/registry.hpp"

#include <algorithm>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "contract/results.hpp"  // shown_safely
#include "contract/spec.hpp"
#include "probes/backends/common.hpp"

namespace detaudit {

namespace {

// The backends, one line each, in --help order: probes/backends/<name>.cpp defines BackendEntry <name>_backend(), its
// kernels are its own files, and CMake builds what those folders hold. Adding a backend is its files and a line here
// (and, for a library found at configure time, its lines in cmake/deps.cmake).
#define DETAUDIT_BACKENDS(X) \
  X(cpu_ref)                 \
  X(cpu)                     \
  X(openblas)                \
  X(onednn)                  \
  X(cuda)                    \
  X(cublas)                  \
  X(cublaslt)                \
  X(cudnn)                   \
  X(external)                \
  X(testing)

#define DETAUDIT_DECLARE_BACKEND(name) BackendEntry name##_backend();
#define DETAUDIT_LIST_BACKEND(name) name##_backend(),

}  // namespace
DETAUDIT_BACKENDS(DETAUDIT_DECLARE_BACKEND)
namespace {

std::vector<BackendEntry> make_registry() { return {DETAUDIT_BACKENDS(DETAUDIT_LIST_BACKEND)}; }

// Requirement -> the name machine_fingerprint()["cpu_features"] lists when the CPU has it.
const std::map<std::string, std::string>& cpu_feature_names() {
  static const std::map<std::string, std::string> m = {
      {"SSE2", "sse2"},   {"SSE3", "sse3"},       {"SSSE3", "ssse3"},       {"SSE4.1", "sse4.1"},
      {"SSE4.2", "sse4.2"}, {"SSE4A", "sse4a"},   {"AVX", "avx"},           {"AVX2", "avx2"},
      {"FMA", "fma"},     {"FMA4", "fma4"},       {"XOP", "xop"},           {"AVX-512F", "avx512f"},
      {"AVX-512 BF16", "avx512bf16"}};
  return m;
}

bool requirement_met(const std::string& req, const nlohmann::json& machine) {
  if (req == kCudaDevice) {
    auto it = machine.find("gpus");
    return it != machine.end() && it->is_array() && !it->empty();
  }
  auto name = cpu_feature_names().find(req);
  if (name == cpu_feature_names().end()) return true;  // nothing to check it against
  auto it = machine.find("cpu_features");
  // A machine whose features are not described (older results, another architecture): the requirement
  // is unknown, and an unknown requirement excuses nothing.
  if (it == machine.end() || !it->is_array()) return true;
  for (auto& f : *it)
    if (f.is_string() && f.get<std::string>() == name->second) return true;
  return false;
}

}  // namespace

const std::vector<DeviceKindEntry>& device_kinds() {
  static const std::vector<DeviceKindEntry> k = {host_device_kind(), cuda_device_kind()};
  return k;
}

const DeviceKindEntry& device_kind_entry(DeviceKind kind) {
  for (auto& k : device_kinds())
    if (k.kind == kind) return k;
  return device_kinds().front();
}

std::string to_string(DeviceKind kind) { return device_kind_entry(kind).name; }

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> r = make_registry();
  return r;
}

const BackendEntry* find_backend(const std::string& name) {
  for (auto& e : backend_registry())
    if (e.name == name) return &e;
  return nullptr;
}

const BackendEntry& oracle_backend() {
  for (auto& e : backend_registry())
    if (e.oracle) return e;
  return backend_registry().front();
}

const BackendEntry& imported_backend() {
  for (auto& e : backend_registry())
    if (e.imported) return e;
  return backend_registry().front();
}

std::vector<std::string> suite_default_targets(const std::string& suite) {
  std::vector<std::string> out;
  for (auto& kind : device_kinds())
    for (bool late : {false, true})
      for (auto& e : backend_registry()) {
        if (e.device != kind.kind || !e.suite_targets) continue;
        for (auto& t : e.suite_targets(suite))
          if (t.late == late) out.push_back(t.target);
      }
  return out;
}

std::vector<std::string> default_training_targets(const std::string& use) {
  std::vector<std::string> out;
  for (auto& e : backend_registry())
    if (e.training_targets)
      for (auto& t : e.training_targets(use)) out.push_back(t);
  return out;
}

bool picks_algorithm(const Spec& t, const Spec& w) {
  const BackendEntry* e = find_backend(t.name);
  if (!e || !e->picks_algorithms || w.name != "conv2d") return false;
  // The pass's algorithm key (cudnn: fwd_algo, bwd_data_algo, bwd_filter_algo) left at auto.
  const std::string key = w.get("pass", "fwd") + "_algo";
  return std::any_of(e->keys.begin(), e->keys.end(), [&](const KeyRule& k) { return k.key == key; }) &&
         t.get(key, "auto") == "auto";
}

std::map<std::string, std::string> target_environment(const Spec& t) {
  std::map<std::string, std::string> env;
  std::string threads = t.get("threads", "1");
  // determinism: every library's thread count is pinned, so no target inherits the caller's.
  env["OMP_NUM_THREADS"] = threads;
  env["OPENBLAS_NUM_THREADS"] = threads;
  const BackendEntry* e = find_backend(t.name);
  if (e && e->environment) e->environment(t, &env);
  return env;
}

BackendOr make_target_backend(const Spec& t) {
  const BackendEntry* e = find_backend(t.name);
  if (e && e->imported)
    return Status::invalid(
        fmt::format("target '{}' cannot be run: its outputs are imported (detaudit import)", t.str()));
  if (!e || !e->make) return Status::invalid("unknown target " + t.name);
  return e->make(t);
}

namespace {

// A backend made here once per target (a cheap one without side effects: BackendEntry::made_here), its name,
// remark and details; kept for the process, as a results file names each target many times.
struct MadeHere {
  std::string name, remark;
  std::map<std::string, std::string> details;
};
const MadeHere* made_here(const Spec& target) {
  static std::mutex m;
  static std::map<std::string, std::optional<MadeHere>> made;
  std::lock_guard<std::mutex> lock(m);
  auto [it, fresh] = made.try_emplace(target.str());
  if (fresh)
    if (BackendOr b = make_target_backend(target); b) {
      const std::string d = (*b)->describe(), n = (*b)->name();
      MadeHere x{n, d.size() > n.size() + 3 ? d.substr(n.size() + 2, d.size() - n.size() - 3) : "", {}};
      for (auto& [k, v] : (*b)->details()) x.details[k] = v;
      it->second = std::move(x);
    }
  return it->second ? &*it->second : nullptr;
}

// The record against the backend made here: its spec is the name, its remark and each setting the made one's,
// but for the instruction set "auto" resolves to (another CPU resolves it otherwise; results check it against
// the machine's), which the remark shows as the details say.
std::string made_here_contradiction(const Spec& target, const std::string& spelled, const std::string& remark,
                                    const std::map<std::string, std::string>& details, bool ran, const char* field) {
  const MadeHere* h = made_here(target);
  if (!h) return "";
  if (spelled != h->name)
    return fmt::format("{} names \"{}\", but its target {} runs as {}", field, shown_safely(spelled.substr(0, 80)),
                       target.str(), h->name);
  std::string want = h->remark;
  if (const auto isa = details.find("isa"); isa != details.end() && h->details.count("isa"))
    if (const size_t at = want.find("isa " + h->details.at("isa").substr(0, h->details.at("isa").find(' ')));
        at != std::string::npos)
      want = want.substr(0, at) + "isa " + isa->second.substr(0, isa->second.find(' '));
  // (a record without the instruction set, a cell that did not run, cannot say which its remark names)
  if ((details.count("isa") || !h->details.count("isa")) && remark != want)
    return fmt::format("{}'s remark is \"({})\", but its target {} describes itself \"({})\"", field,
                       shown_safely(remark.substr(0, 60)), target.str(), want);
  const auto& forced = find_backend(target.name)->forced_details;
  for (auto& [k, v] : details)
    if (!h->details.count(k) && std::find(forced.begin(), forced.end(), k) == forced.end())
      return fmt::format("details.{} is no setting a {} backend reports", shown_safely(k.substr(0, 40)), target.name);
  for (auto& [k, v] : h->details) {
    if (k == "isa") continue;
    const auto it = details.find(k);
    if (it == details.end() ? ran : it->second != v)
      return fmt::format("details.{} is {}, but its target {} reports {}", k,
                         it == details.end() ? std::string("missing") : "\"" + shown_safely(it->second.substr(0, 40)) + "\"",
                         target.str(), v);
  }
  return "";
}

}  // namespace

std::string backend_claims_contradiction(const Spec& target, const std::string& describe,
                                         const std::map<std::string, std::string>& details, bool ran,
                                         const char* field, const nlohmann::json& machine) {
  const BackendEntry* be = find_backend(target.name);
  if (!be || be->imported) return "";
  auto rule_of = [&](const std::string& k) -> const KeyRule* {
    for (auto& r : be->keys)
      if (r.key == k) return &r;
    return nullptr;
  };
  // The value the target asks for ("" where it leaves the key to the library: auto, or a key it has not).
  auto asked = [&](const KeyRule& r) {
    const std::string v = target.get(r.key, r.fallback.empty() ? r.unset : r.fallback);
    return v == "auto" ? std::string() : v;
  };
  for (auto& [k, v] : details) {
    const KeyRule* r = rule_of(k);
    if (!r || v.rfind("unavailable (", 0) == 0) continue;
    if (r->check && !r->check(v).is_ok())
      return fmt::format("details.{} is \"{}\", which is no {} of {} ({})", k, shown_safely(v.substr(0, 40)), k,
                         target.name, r->values);
    if (const std::string want = asked(*r); !want.empty() && v != want)
      return fmt::format("details.{} is \"{}\", but its target {} runs {}={}", k, shown_safely(v.substr(0, 40)),
                         target.str(), k, want);
  }
  for (auto& [k, v] : details)
    if (const size_t at = describe.find("(" + k + " "); at != std::string::npos) {
      const size_t from = at + k.size() + 2;
      if (const std::string said = describe.substr(from, describe.find_first_of(",)", from) - from); said != v)
        return fmt::format("details.{} is \"{}\", but its {} says ({} {})", k, shown_safely(v.substr(0, 40)), field, k,
                           shown_safely(said.substr(0, 40)));
    }
  if (be->device != DeviceKind::kHost) return "";
  // "<spec>" or "<spec> (<remark>)": the spec's name the target's, each key it names the target's value.
  const size_t gap = describe.find(" (");
  const std::string spelled = describe.substr(0, gap);
  Spec named;
  if (!parse_spec_syntax(spelled, &named).is_ok() || named.name != target.name ||
      (gap != std::string::npos && (describe.size() < gap + 3 || describe.back() != ')')))
    return fmt::format("{} \"{}\" is not a description of a {} backend (its spec, then at most one remark in "
                       "parentheses)",
                       field, shown_safely(describe.substr(0, 80)), target.name);
  for (auto& [k, v] : named.params) {
    const KeyRule* r = rule_of(k);
    if (!r)
      return fmt::format("{} \"{}\" names {}, which is no setting of {}", field, shown_safely(describe.substr(0, 80)), k,
                         target.name);
    if (const std::string want = asked(*r); want.empty() ? (r->check && !r->check(v).is_ok()) : v != want)
      return fmt::format("{} \"{}\" runs {}={}, but its target {} runs {}={}", field,
                         shown_safely(describe.substr(0, 80)), k, shown_safely(v.substr(0, 40)), target.str(), k,
                         want.empty() ? r->values : want);
  }
  // The backend's own settings: what the worker adds beside them (the oracle's problem, a trace's warm-up count) or a
  // reader does (a fleet's promise, an import's origin) is not the backend's to report.
  std::map<std::string, std::string> own = details;
  for (const char* k : {"oracle_problem", "warmup_kernels", "fleet_promise", "imported_from", "imported_at"}) own.erase(k);
  if (ran && own.empty() && !be->hidden)
    return fmt::format("details is empty, but a {} backend that ran reports its settings", target.name);
  const std::string remark = gap == std::string::npos ? "" : describe.substr(gap + 2, describe.size() - gap - 3);
  if (be->made_here)
    if (const std::string why = made_here_contradiction(target, spelled, remark, own, ran, field); !why.empty())
      return why;
  if (be->claims)
    if (std::string why = be->claims(target, spelled, remark, own, machine); !why.empty())
      return why.rfind("details.", 0) == 0 ? why : fmt::format("{} \"{}\": {}", field, shown_safely(describe.substr(0, 80)), why);
  return "";
}

bool applicable(const Spec& target, const Spec& workload) {
  const BackendEntry* e = find_backend(target.name);
  return e && (!e->applicable || e->applicable(target, workload));
}

std::vector<Spec> expand_all(const Spec& t) {
  const BackendEntry* e = find_backend(t.name);
  if (!e) return {t};
  for (auto& [k, v] : t.params) {
    if (v != "all") continue;
    auto n = e->all_counts.find(k);
    if (n == e->all_counts.end()) continue;
    std::vector<Spec> out;
    for (int i = 0; i < n->second; ++i) {
      Spec s = t;
      s.set(k, std::to_string(i));
      for (auto& x : expand_all(s)) out.push_back(x);
    }
    return out;
  }
  return {t};
}

Promise promise_for(const Spec& target, const Spec& workload, const nlohmann::json& machine,
                    const std::map<std::string, std::string>& details) {
  const BackendEntry* e = find_backend(target.name);
  if (!e || !e->promise) return nothing("unknown backend '" + target.name + "': nothing is promised");
  Promise p = e->promise(target, workload, details);
  for (auto& r : p.requirements)
    if (!requirement_met(r, machine)) p.unmet.push_back(r);
  return p;
}

Status specs_of(const Observation& o, Spec* target, Spec* workload) {
  if (o.target_spec && o.workload_spec) {
    *target = *o.target_spec;
    *workload = *o.workload_spec;
    return Status::ok();
  }
  DETAUDIT_RETURN_IF_ERROR(parse_target(o.target, target));
  return parse_workload(o.workload, workload);
}

Status attach_specs(Observation* o) {
  Spec t, w;
  DETAUDIT_RETURN_IF_ERROR(parse_target(o->target, &t));
  DETAUDIT_RETURN_IF_ERROR(parse_workload(o->workload, &w));
  o->target = t.str();
  o->workload = w.str();
  o->target_spec = std::move(t);
  o->workload_spec = std::move(w);
  return Status::ok();
}

std::optional<Promise> promise_of(const Observation& o, const nlohmann::json& machine) {
  Spec t, w;
  if (!specs_of(o, &t, &w).is_ok()) return std::nullopt;
  return promise_for(t, w, machine, o.details);
}

std::string skip_contradiction(const Spec& target, const Spec& workload, const nlohmann::json& machine) {
  const BackendEntry* e = find_backend(target.name);
  if (!e) return "";
  if (e->oracle) return fmt::format("{} is the oracle, which runs every workload on every machine", target.name);
  if (!e->provides || !e->provides(target, workload)) return "";
  const Promise p = promise_for(target, workload, machine, {});
  const auto features = machine.is_object() ? machine.find("cpu_features") : machine.end();
  if (!p.unmet.empty() || (!p.requirements.empty() && (features == machine.end() || !features->is_array()))) return "";
  return p.requirements.empty()
             ? fmt::format("{} runs {} on every machine", target.str(), workload.name)
             : fmt::format("{} runs {} on every machine that has {}, as this one does", target.str(), workload.name,
                           fmt::join(p.requirements, " and "));
}

TargetFacts target_facts(const std::string& target) {
  TargetFacts f;
  Spec s;
  const BackendEntry* e = parse_target(target, &s).is_ok() ? find_backend(s.name) : nullptr;
  if (!e) return f;
  f.known = true;
  f.device_kind = to_string(e->device);
  f.device = s.device;
  f.portable = e->portable && e->portable(s);
  Spec no_device = s;
  no_device.device = -1;
  f.implementation = no_device.str();
  if (!f.portable) f.libraries = e->libraries, f.build = e->build;
  return f;
}

Status training_variants(const Spec& base, Spec* deterministic, Spec* nondeterministic) {
  const BackendEntry* e = find_backend(base.name);
  if (!e || !e->variants) {
    std::vector<std::string> names;
    for (auto& b : backend_registry())
      if (b.variants) names.push_back(b.name);
    return Status::invalid(fmt::format("target '{}' has no nondeterministic variant (training targets: {})", base.str(),
                                       fmt::join(names, ", ")));
  }
  *deterministic = base;
  *nondeterministic = base;
  return e->variants(deterministic, nondeterministic);
}

bool target_trains(const Spec& target) {
  const BackendEntry* e = find_backend(target.name);
  return e && e->trains;
}

}  // namespace detaudit
