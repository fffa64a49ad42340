#include "gates/baseline.hpp"
#include "contract/results.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "analysis/stats.hpp"
#include "contract/cells.hpp"
#include "contract/json_fields.hpp"
#include "contract/plan.hpp"
#include "gates/verdict.hpp"
#include "kernels/fingerprint.hpp"
#include "probes/spec.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

namespace fs = std::filesystem;

std::string promise_name(const Promise::RunToRun& r) {
  switch (r) {
    case Promise::RunToRun::kDeterministic: return "deterministic";
    case Promise::RunToRun::kNondeterministic: return "nondeterministic";
    case Promise::RunToRun::kNone: return "none";
  }
  return "none";
}

nlohmann::json entry_key(const Results& r, const std::string& target) {
  Spec spec;
  if (!parse_spec_syntax(target, &spec).is_ok()) spec = Spec{target, -1, {}};
  const BackendEntry* be = find_backend(spec.name);
  const auto& libs = json_fields::object(r.machine, "libraries");
  nlohmann::json k = nlohmann::json::object();
  nlohmann::json kl = nlohmann::json::object();
  if (be)
    for (const auto* names : {&be->libraries, &be->build})
      for (auto& name : *names) kl[name] = libs.contains(name) ? libs[name] : nlohmann::json("(absent)");
  k["libraries"] = kl;
  k["tool_version"] = r.tool_version;
  // The machine part comes from the target's device kind; an unknown backend with a device index is taken
  // for the first accelerator kind.
  DeviceKind kind = be ? be->device : spec.device >= 0 ? device_kinds().back().kind : DeviceKind::kHost;
  device_kind_entry(kind).baseline_key(r.machine, spec.device, &k);
  return k;
}

std::string key_id(const nlohmann::json& key) {
  std::string text = key.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string kind = json_fields::str(key, "kind", "key");
  return kind + "-" + fingerprint_bytes(text.data(), text.size()).hex().substr(0, 12);
}

namespace {

// Leaves of a key as "path" -> text (objects flattened with '.', arrays as one JSON value).
void flatten(const nlohmann::json& j, const std::string& path, std::map<std::string, std::string>* out) {
  if (j.is_object()) {
    for (auto& [k, v] : j.items()) flatten(v, path.empty() ? k : path + "." + k, out);
    return;
  }
  (*out)[path] = json_fields::text(j);
}

}  // namespace

std::string key_difference(const nlohmann::json& old_key, const nlohmann::json& new_key) {
  std::map<std::string, std::string> a, b;
  flatten(old_key, "", &a);
  flatten(new_key, "", &b);
  std::set<std::string> paths;
  for (auto& [k, v] : a) paths.insert(k);
  for (auto& [k, v] : b) paths.insert(k);
  std::string out;
  for (auto& p : paths) {
    auto ia = a.find(p), ib = b.find(p);
    std::string va = ia == a.end() ? "(absent)" : ia->second, vb = ib == b.end() ? "(absent)" : ib->second;
    if (va == vb) continue;
    out += fmt::format("{}{}: {} -> {}", out.empty() ? "" : "; ", p, va, vb);
  }
  return out;
}

std::map<std::string, std::vector<std::string>> kernel_names_by_fingerprint(const Observation& o) {
  std::map<std::string, std::vector<std::string>> out;
  for (const KernelSequenceGroup& g : detaudit::kernels_by_fingerprint(o)) {
    if (g.kernel_names.empty()) continue;  // no traced repeat made this output
    std::vector<std::string>& names = out[g.fingerprint];
    for (auto& k : g.kernel_names)
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
  }
  return out;
}

std::string cell_promise(const Observation& o, const nlohmann::json& machine) {
  const std::optional<Promise> p = promise_of(o, machine);
  return p ? promise_name(p->run_to_run) : "none";
}

namespace {

BaselineCell make_cell(const Results& r, const Observation& o, std::map<std::string, nlohmann::json>* keys) {
  BaselineCell c;
  c.workload = o.workload;
  c.target = o.target;
  nlohmann::json key = entry_key(r, o.target);
  c.key = key_id(key);
  (*keys)[c.key] = key;
  c.status = o.status;
  if (o.status != ObsStatus::kOk) c.reason = o.reason;
  c.repeats = o.repeats;
  std::set<std::string> fps(o.fingerprints.begin(), o.fingerprints.end());
  c.fingerprints.assign(fps.begin(), fps.end());
  c.distinct = int(fps.size());
  c.verdict = o.verdict;
  c.verdict_reason = o.verdict_reason;
  c.promise = cell_promise(o, r.machine);
  if (o.oracle && o.oracle->err_ratio >= 0) c.err_ratio = o.oracle->err_ratio;
  if (json_fields::str(key, "kind") == "gpu") c.kernels = kernel_names_by_fingerprint(o);
  if (auto it = o.details.find("algo_name"); it != o.details.end()) c.algo = it->second;
  if (!o.seconds.empty()) c.median_seconds = median(o.seconds);
  if (o.batch) c.rows_fingerprint = o.batch->rows_fingerprint;
  return c;
}

void add_training(const Results& r, Baseline* b) {
  using Cell = std::tuple<std::string, std::string, std::string, std::string>;
  std::map<Cell, BaselineTraining> cells;
  for (auto& run : r.training) {
    if (!run.ok()) continue;  // failed runs have no final loss
    Cell id{run.model, run.design, run.condition, run.target};
    auto& t = cells[id];
    std::tie(t.model, t.design, t.condition, t.target) = id;
    t.init = run.init_name();
    t.determinism = run.nondeterministic ? "off" : "on";
    BaselineRun br;
    br.seed = run.seed;
    br.replicate = run.replicate;
    br.final_loss = run.final_loss;
    br.weights_fingerprint = run.weights_fingerprint;
    br.outcome = outcome_fingerprint(run);
    t.runs.push_back(br);
  }
  for (auto& [id, t] : cells) {
    std::sort(t.runs.begin(), t.runs.end(),
              [](const BaselineRun& a, const BaselineRun& b) { return std::tie(a.seed, a.replicate) < std::tie(b.seed, b.replicate); });
    std::vector<double> finite;
    for (auto& run : t.runs)
      if (std::isfinite(run.final_loss)) finite.push_back(run.final_loss);
    t.n = int(finite.size());
    if (t.n >= 1) t.mean = mean(finite);
    if (t.n >= 2) t.sd = sample_std(finite);
    nlohmann::json key = entry_key(r, t.target);
    t.key = key_id(key);
    b->keys[t.key] = key;
    b->training.push_back(t);
  }
}

}  // namespace

Baseline make_baseline(const Results& in, const std::string& source_dir, const std::string& created_at) {
  Results judged;
  const Results* r = judged_view(in, &judged);
  Baseline b;
  b.created_at = created_at.empty() ? utc_now_iso8601() : created_at;
  b.tool_version = DETAUDIT_VERSION;
  b.tool_commit = git_commit();
  b.source_dir = source_dir;
  b.source_command = r->command;
  b.source_plan = r->plan;
  b.source_started_at = r->started_at;
  b.source_finished_at = r->finished_at;
  // One entry per cell; a cell observed twice (it should not be) keeps its last observation.
  std::map<std::pair<std::string, std::string>, const Observation*> by_cell;
  for (auto& o : r->observations) by_cell[{o.workload, o.target}] = &o;
  for (auto& [id, o] : by_cell) b.cells.push_back(make_cell(*r, *o, &b.keys));
  add_training(*r, &b);
  return b;
}

std::string saved_from(const Baseline& b, const Results& r, const std::string& dir) {
  // Started at the same second, by the same command or in the same folder; or, whatever either header says (a copy
  // whose start was edited, a baseline whose source was), every cell both hold timed alike to the nanosecond. (One or
  // two tiny cells of two quick runs may be timed alike by chance: three are not.)
  std::error_code ec;
  const bool same_start = !b.source_started_at.empty() && b.source_started_at == r.started_at;
  const bool same_folder = !dir.empty() && fs::weakly_canonical(dir, ec) == fs::weakly_canonical(b.source_dir, ec) && !ec;
  const char* how = !same_start                     ? ""
                    : b.source_command == r.command ? "the same command, started at the same second"
                    : same_folder                   ? "the same folder, started at the same second"
                                                    : "";
  bool same = *how != 0;
  if (!same) {
    std::map<std::pair<std::string, std::string>, double> medians;
    for (const BaselineCell& c : b.cells)
      if (c.median_seconds) medians[{c.workload, c.target}] = *c.median_seconds;
    size_t alike = 0, timed = 0;
    for (const Observation& o : r.observations)
      if (auto it = medians.find({o.workload, o.target}); it != medians.end() && !o.seconds.empty())
        ++timed, alike += median(o.seconds) == it->second;
    same = timed >= 3 && alike == timed;
    how = "its cells timed alike to the nanosecond";
  }
  if (!same) return "";
  // ... and the bits are the baseline's, cell for cell and run for run: an edited copy is judged on what it changed.
  size_t shared = 0;  // cells and runs both hold (none shared: nothing would be compared at all, said elsewhere)
  std::map<std::pair<std::string, std::string>, const Observation*> here;
  for (const Observation& o : r.observations) here[{o.workload, o.target}] = &o;
  for (const BaselineCell& c : b.cells)
    if (auto it = here.find({c.workload, c.target}); it != here.end()) {
      ++shared;
      const Observation& o = *it->second;
      if (fingerprint_set(o) != c.fingerprints || o.status != c.status ||
          (o.batch ? o.batch->rows_fingerprint : "") != c.rows_fingerprint)
        return "";
    }
  std::map<std::tuple<std::string, std::string, std::string, uint64_t, int>, const TrainingRun*> runs;
  for (const TrainingRun& t : r.training) runs[{t.model, t.condition, t.target, t.seed, t.replicate}] = &t;
  for (const BaselineTraining& t : b.training)
    for (const BaselineRun& x : t.runs)
      if (auto it = runs.find({t.model, t.condition, t.target, x.seed, x.replicate}); it != runs.end()) {
        ++shared;
        if (it->second->weights_fingerprint != x.weights_fingerprint || it->second->status != ObsStatus::kOk) return "";
      }
  if (shared == 0) return "";
  return fmt::format("it is the run the baseline was saved from ({}; {} started at {}, the baseline's source {} at {}): "
                     "its cells would be compared with themselves, so nothing would be judged",
                     how, dir.empty() ? "it" : dir, r.started_at, b.source_dir, b.source_started_at);
}

}  // namespace detaudit
