#include "gates/compare.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

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
      Spec ts, ws;
      if (parse_target(o.target, &ts).is_ok() && parse_workload(o.workload, &ws).is_ok()) {
        auto promise = promise_for(ts, ws, r.machine, o.details).run_to_run;
        cell.promised_nondeterministic |= promise == Promise::RunToRun::kNondeterministic;
        cell.promised_deterministic |= promise == Promise::RunToRun::kDeterministic;
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
    else if (cell.status_a == cell.status_b && cell.fps_a == cell.fps_b)
      cell.kind = CellComparison::Kind::kSame, ++c.same;
    else if (cell.status_a == "ok" && cell.status_b == "ok" && !cell.promised_deterministic &&
             (cell.distinct_a > 1 || cell.distinct_b > 1 || cell.promised_nondeterministic))
      cell.kind = CellComparison::Kind::kVaries, ++c.varies;
    else
      cell.kind = CellComparison::Kind::kChanged, ++c.changed;
  }
  c.differences = machine_differences(a, b);
  c.groups = identity_groups(tagged);
  return c;
}

// --- rendering ---------------------------------------------------------------------------------

}  // namespace detaudit
