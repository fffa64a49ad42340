#include "gates/compare.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "contract/plan.hpp"
#include "gates/verdict.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"

namespace detaudit {

namespace {

// Specs in canonical form, so that two detaudit versions spelling a target differently (a default
// written out or not, keys in another order) still meet; a spec this version does not know stays as written.
std::string canonical(const std::string& text, bool target) {
  Spec s;
  Status st = target ? parse_target(text, &s) : parse_workload(text, &s);
  return st ? s.str() : text;
}

// --- machine and software ----------------------------------------------------------------------

std::string value_text(const nlohmann::json* j) {
  if (!j || j->is_null()) return "(absent)";
  if (j->is_string()) return j->get<std::string>();
  if (j->is_array() && std::all_of(j->begin(), j->end(), [](const nlohmann::json& x) { return x.is_string(); })) {
    std::vector<std::string> v;
    for (auto& x : *j) v.push_back(x.get<std::string>());
    return fmt::format("{}", fmt::join(v, " "));
  }
  return j->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const nlohmann::json* field(const nlohmann::json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

void diff_field(const std::string& name, const nlohmann::json* a, const nlohmann::json* b,
                std::vector<FieldDifference>* out) {
  std::string ta = value_text(a), tb = value_text(b);
  if (ta != tb) out->push_back({name, ta, tb});
}

// The fields a bitwise expectation holds for (the machine key of gates/baseline.hpp): CPU, OS, compiler, libraries,
// GPUs, CUDA, and the tool itself.
std::vector<FieldDifference> machine_differences(const Results& a, const Results& b) {
  std::vector<FieldDifference> out;
  const nlohmann::json &ma = a.machine, &mb = b.machine;
  for (const char* k : {"cpu_model", "cpu_features", "cores", "os", "compiler"}) diff_field(k, field(ma, k), field(mb, k), &out);
  std::set<std::string> libs;
  for (auto* m : {&ma, &mb})
    if (auto* l = field(*m, "libraries"); l && l->is_object())
      for (auto& [k, v] : l->items()) libs.insert(k);
  for (auto& k : libs) {
    auto* la = field(ma, "libraries");
    auto* lb = field(mb, "libraries");
    diff_field("libraries." + k, la ? field(*la, k) : nullptr, lb ? field(*lb, k) : nullptr, &out);
  }
  auto* ga = field(ma, "gpus");
  auto* gb = field(mb, "gpus");
  size_t na = ga && ga->is_array() ? ga->size() : 0, nb = gb && gb->is_array() ? gb->size() : 0;
  for (size_t i = 0; i < std::max(na, nb); ++i)
    for (const char* k : {"name", "compute_capability", "sm_count"})
      diff_field(fmt::format("gpus[{}].{}", i, k), i < na ? field((*ga)[i], k) : nullptr,
                 i < nb ? field((*gb)[i], k) : nullptr, &out);
  for (auto& kind : device_kinds())
    for (auto& key : kind.machine_keys) diff_field(key, field(ma, key), field(mb, key), &out);
  nlohmann::json va = a.tool_version, vb = b.tool_version, ca = a.tool_commit, cb = b.tool_commit;
  diff_field("tool_version", &va, &vb, &out);
  diff_field("tool_commit", &ca, &cb, &out);
  return out;
}

// ---- training runs ------------------------------------------------------------------------------

std::string loss_bits(double x) { return std::isfinite(x) ? fmt::format("{:.9g}", x) : "NaN"; }

void spread(const std::vector<const TrainingRun*>& runs, std::optional<double>* mean, std::optional<double>* sd) {
  std::vector<double> v;
  for (auto* r : runs)
    if (r->ok() && std::isfinite(r->final_loss)) v.push_back(r->final_loss);
  if (v.empty()) return;
  double m = 0;
  for (double x : v) m += x;
  m /= double(v.size());
  *mean = m;
  if (v.size() < 2) return;
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  *sd = std::sqrt(ss / double(v.size() - 1));
}

// The runs of one side grouped by (condition, canonical target), in first-seen order.
struct TrainSide {
  std::vector<std::pair<std::string, std::string>> order;
  std::map<std::pair<std::string, std::string>, std::vector<const TrainingRun*>> runs;
};
TrainSide group_runs(const Results& r) {
  TrainSide s;
  for (auto& run : r.training) {
    std::pair<std::string, std::string> k{run.condition, canonical(run.target, true)};
    auto [it, fresh] = s.runs.try_emplace(k);
    if (fresh) s.order.push_back(k);
    it->second.push_back(&run);
  }
  return s;
}

TrainingCellComparison compare_training_cell(const std::string& condition, const std::string& target,
                                             const std::vector<const TrainingRun*>& a,
                                             const std::vector<const TrainingRun*>& b) {
  TrainingCellComparison t;
  t.condition = condition;
  t.target = target;
  t.runs_a = int(a.size());
  t.runs_b = int(b.size());
  for (auto* r : a) t.finished_a += r->ok();
  for (auto* r : b) t.finished_b += r->ok();
  t.deterministic = !(a.empty() ? b : a).front()->nondeterministic;
  spread(a, &t.mean_a, &t.sd_a);
  spread(b, &t.mean_b, &t.sd_b);
  if (a.empty() || b.empty()) {
    t.kind = a.empty() ? CellComparison::Kind::kOnlyB : CellComparison::Kind::kOnlyA;
    return t;
  }
  std::map<std::pair<uint64_t, int>, const TrainingRun*> by_run;
  for (auto* r : b) by_run.emplace(std::pair{r->seed, r->replicate}, r);
  bool one_sided = a.size() != b.size();
  auto note = [&](const std::string& d) {
    if (t.first_difference.empty()) t.first_difference = d;
  };
  for (auto* x : a) {
    auto it = by_run.find({x->seed, x->replicate});
    const std::string id = fmt::format("seed {} rep {}", x->seed, x->replicate);
    if (it == by_run.end()) {
      one_sided = true;
      note(id + ": only in A");
      continue;
    }
    const TrainingRun* y = it->second;
    if (x->ok() != y->ok() || x->status != y->status) {
      one_sided = true;
      note(fmt::format("{}: {} -> {}", id, to_string(x->status), to_string(y->status)));
      continue;
    }
    if (!x->ok()) continue;
    ++t.runs_matched;
    // A run's bits: its whole outcome (outcome_bits: weights, final loss, learning curve, every noise measurement and
    // what the weights predict on the held-out data), as the runs of one design are judged against each other.
    const bool same_prediction = prediction_bits(*x) == prediction_bits(*y);
    const bool same_end = x->weights_fingerprint == y->weights_fingerprint &&
                          std::memcmp(&x->final_loss, &y->final_loss, sizeof(double)) == 0 && same_prediction;
    const bool same = same_end && outcome_bits(*x) == outcome_bits(*y);
    t.runs_same_bits += same;
    if (!same && t.deterministic)
      note(same_end ? fmt::format("{}: the same weights and final loss ({}), after another learning curve or other noise "
                                  "measurements (a gradient computed otherwise on the way)",
                                  id, x->weights_fingerprint.substr(0, 8))
                    : fmt::format("{}: weights {} -> {}, final loss {} -> {}{}", id, x->weights_fingerprint.substr(0, 8),
                                  y->weights_fingerprint.substr(0, 8), loss_bits(x->final_loss), loss_bits(y->final_loss),
                                  same_prediction ? ""
                                                  : fmt::format(", held-out prediction MSE {} -> {}",
                                                                x->prediction ? loss_bits(x->prediction->mse) : "none",
                                                                y->prediction ? loss_bits(y->prediction->mse) : "none")));
  }
  if (one_sided || (t.deterministic && t.runs_same_bits < t.runs_matched))
    t.kind = CellComparison::Kind::kChanged;
  else if (!t.deterministic && t.runs_same_bits < t.runs_matched)
    t.kind = CellComparison::Kind::kVaries;
  else
    t.kind = CellComparison::Kind::kSame;
  return t;
}

void compare_training(const Results& a, const Results& b, Comparison* c) {
  TrainSide sa = group_runs(a), sb = group_runs(b);
  static const std::vector<const TrainingRun*> kNone;
  auto runs_of = [](const TrainSide& s,
                    const std::pair<std::string, std::string>& k) -> const std::vector<const TrainingRun*>& {
    auto it = s.runs.find(k);
    return it == s.runs.end() ? kNone : it->second;
  };
  for (auto& k : sa.order)
    c->training.push_back(compare_training_cell(k.first, k.second, runs_of(sa, k), runs_of(sb, k)));
  for (auto& k : sb.order)
    if (!sa.runs.count(k)) c->training.push_back(compare_training_cell(k.first, k.second, kNone, runs_of(sb, k)));
  for (auto& t : c->training) switch (t.kind) {
      case CellComparison::Kind::kSame:
        ++c->training_same;
        break;
      case CellComparison::Kind::kChanged:
        ++c->training_changed;
        break;
      case CellComparison::Kind::kOnlyA:
        ++c->training_only_a;
        break;
      case CellComparison::Kind::kOnlyB:
        ++c->training_only_b;
        break;
      case CellComparison::Kind::kVaries:
        ++c->training_varies;
        break;
    }
}

}  // namespace

Comparison compare_results(const Results& a, const Results& b, const std::string& name_a, const std::string& name_b) {
  Comparison c;
  c.a = name_a;
  c.b = name_b;
  // Cells by (workload, target); a cell seen twice in one file keeps its first observation.
  std::map<std::pair<std::string, std::string>, size_t> index;
  std::vector<Observation> tagged;  // both runs, targets tagged @A / @B, for the identity groups
  auto add = [&](const Results& r, bool side_a) {
    for (auto& o : r.observations) {
      std::string w = canonical(o.workload, false), t = canonical(o.target, true);
      auto [it, fresh] = index.emplace(std::pair{w, t}, c.cells.size());
      if (fresh) {
        CellComparison cell;
        cell.workload = w;
        cell.target = t;
        c.cells.push_back(cell);
      }
      CellComparison& cell = c.cells[it->second];
      std::string& status = side_a ? cell.status_a : cell.status_b;
      if (!status.empty()) continue;
      status = to_string(o.status);
      (side_a ? cell.fps_a : cell.fps_b) = fingerprint_set(o);
      (side_a ? cell.distinct_a : cell.distinct_b) = count_distinct(o.fingerprints);
      if (o.batch) (side_a ? cell.rows_a : cell.rows_b) = o.batch->rows_fingerprint;
      if (const std::optional<Promise> p = promise_of(o, r.machine)) {
        cell.promised_nondeterministic |= p->run_to_run == Promise::RunToRun::kNondeterministic;
        cell.promised_deterministic |= p->run_to_run == Promise::RunToRun::kDeterministic;
      }
      Observation g;
      g.workload = w;
      g.target = t + (side_a ? "@A" : "@B");
      g.status = o.status;
      g.fingerprints = o.fingerprints;
      tagged.push_back(std::move(g));
    }
  };
  add(a, true);
  add(b, false);
  // Cells of one workload together, workloads in order of first appearance.
  std::map<std::string, size_t> first;
  for (auto& cell : c.cells) first.emplace(cell.workload, first.size());
  std::stable_sort(c.cells.begin(), c.cells.end(), [&](const CellComparison& x, const CellComparison& y) {
    return first[x.workload] < first[y.workload];
  });
  for (auto& cell : c.cells) {
    if (cell.status_b.empty())
      cell.kind = CellComparison::Kind::kOnlyA, ++c.only_a;
    else if (cell.status_a.empty())
      cell.kind = CellComparison::Kind::kOnlyB, ++c.only_b;
    else if (cell.status_a == cell.status_b && cell.fps_a == cell.fps_b &&
             (cell.rows_a.empty() || cell.rows_b.empty() || cell.rows_a == cell.rows_b))
      cell.kind = CellComparison::Kind::kSame, ++c.same;
    else if (cell.status_a == "ok" && cell.status_b == "ok" && !cell.promised_deterministic &&
             (cell.distinct_a > 1 || cell.distinct_b > 1 || cell.promised_nondeterministic))
      cell.kind = CellComparison::Kind::kVaries, ++c.varies;
    else
      cell.kind = CellComparison::Kind::kChanged, ++c.changed;
  }
  c.differences = machine_differences(a, b);
  c.groups = identity_groups(tagged);
  c.kind = plan_kind(a.plan);
  compare_training(a, b, &c);
  return c;
}

// --- rendering ---------------------------------------------------------------------------------

}  // namespace detaudit
