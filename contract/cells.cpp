#include "contract/cells.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace detaudit {

const char* to_string(CellVerdict v) {
  switch (v) {
    case CellVerdict::kDeterministic: return "deterministic";
    case CellVerdict::kNondeterministic: return "nondeterministic";
    case CellVerdict::kCrashed: return "crashed";
    case CellVerdict::kTimeout: return "timeout";
    case CellVerdict::kSkipped: return "skipped";
    case CellVerdict::kError: return "error";
  }
  return "error";
}

CellVerdict cell_verdict(const Observation& o) {
  switch (o.status) {
    case ObsStatus::kOk:
      if (o.fingerprints.empty()) return CellVerdict::kError;
      return count_distinct(o.fingerprints) == 1 ? CellVerdict::kDeterministic : CellVerdict::kNondeterministic;
    case ObsStatus::kCrashed: return CellVerdict::kCrashed;
    case ObsStatus::kTimeout: return CellVerdict::kTimeout;
    case ObsStatus::kSkipped: return CellVerdict::kSkipped;
    case ObsStatus::kError: return CellVerdict::kError;
  }
  return CellVerdict::kError;
}

std::vector<WorkloadGroups> identity_groups(const std::vector<Observation>& obs) {
  std::vector<WorkloadGroups> out;
  std::map<std::string, size_t> by_workload;
  for (auto& o : obs) {
    if (o.status != ObsStatus::kOk || o.fingerprints.empty()) continue;
    auto [it, fresh] = by_workload.emplace(o.workload, out.size());
    if (fresh) out.push_back({o.workload, {}});
    auto& groups = out[it->second].groups;
    std::set<std::string> s(o.fingerprints.begin(), o.fingerprints.end());
    std::vector<std::string> fps(s.begin(), s.end());
    auto g = std::find_if(groups.begin(), groups.end(), [&](const IdentityGroup& x) { return x.fingerprints == fps; });
    if (g == groups.end())
      groups.push_back({fps, {o.target}});
    else
      g->targets.push_back(o.target);
  }
  for (auto& w : out)
    std::stable_sort(w.groups.begin(), w.groups.end(),
                     [](const IdentityGroup& a, const IdentityGroup& b) { return a.targets.size() > b.targets.size(); });
  return out;
}

std::vector<KernelSequenceGroup> kernels_by_fingerprint(const Observation& o) {
  std::vector<KernelSequenceGroup> out;
  // Observation::kernels holds one entry per fingerprint (or none): repeat r's kernels made output r.
  const bool traced = o.kernels.size() == o.fingerprints.size();
  for (size_t r = 0; r < o.fingerprints.size(); ++r) {
    const RepeatKernels* rep = traced ? &o.kernels[r] : nullptr;
    std::vector<std::string> names;
    if (rep && *rep)
      for (auto& k : **rep) names.push_back(k.name);
    auto g = std::find_if(out.begin(), out.end(),
                          [&](const KernelSequenceGroup& x) { return x.fingerprint == o.fingerprints[r]; });
    if (g == out.end()) g = out.insert(out.end(), KernelSequenceGroup{o.fingerprints[r], 0, {}, false, 0});
    ++g->runs;
    if (rep && !*rep) {
      ++g->untraced;
      continue;
    }
    if (g->runs - g->untraced == 1)
      g->kernel_names = std::move(names);  // the first traced repeat of this output
    else if (g->kernel_names != names)
      g->sequence_varies = true;
  }
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.runs > b.runs; });
  return out;
}

Summary summarize(const std::vector<Observation>& obs) {
  Summary s;
  for (auto& o : obs) {
    ++s.cells;
    switch (cell_verdict(o)) {
      case CellVerdict::kDeterministic: ++s.deterministic; break;
      case CellVerdict::kNondeterministic: ++s.nondeterministic; break;
      case CellVerdict::kCrashed: ++s.crashed; break;
      case CellVerdict::kTimeout: ++s.timeout; break;
      case CellVerdict::kSkipped: ++s.skipped; break;
      case CellVerdict::kError: ++s.error; break;
    }
    if (o.batch) {
      ++s.batch_checked;
      if (!o.batch->invariant()) ++s.batch_variant;
    }
  }
  return s;
}

std::vector<std::string> fingerprint_set(const Observation& o) {
  std::set<std::string> s(o.fingerprints.begin(), o.fingerprints.end());
  return {s.begin(), s.end()};
}

std::string same_outputs_other_distance(const Observation& a, const Observation& b) {
  if (a.workload != b.workload || a.status != ObsStatus::kOk || b.status != ObsStatus::kOk || !a.oracle || !b.oracle ||
      a.fingerprints.empty())
    return "";
  const std::vector<std::string> outputs = fingerprint_set(a);
  if (outputs != fingerprint_set(b)) return "";
  return distance_difference(*a.oracle, *b.oracle, outputs.size() == 1);
}

std::string short_fingerprints(const std::vector<std::string>& fps) {
  std::vector<std::string> s;
  for (auto& f : fps) s.push_back(f.substr(0, 8));
  return fmt::format("{}", fmt::join(s, ","));
}

}  // namespace detaudit
