#include "probes/results_file.hpp"

#include <fmt/format.h>

#include <map>
#include <tuple>

#include "probes/spec.hpp"

namespace detaudit {

namespace {

Status canonical(std::string* text, bool target, const std::string& field) {
  Spec s;
  Status st = target ? parse_target(*text, &s) : parse_workload(*text, &s);
  if (!st) return st.prefixed(field + ": ");
  *text = s.str();
  return Status::ok();
}

}  // namespace

Status canonicalize_specs(Results* r, const std::string& path) {
  for (size_t i = 0; i < r->observations.size(); ++i) {
    Observation& o = r->observations[i];
    const std::string at = fmt::format("{}: observations[{}]", path, i);
    DETAUDIT_RETURN_IF_ERROR(canonical(&o.target, true, at + ".target"));
    DETAUDIT_RETURN_IF_ERROR(canonical(&o.workload, false, at + ".workload"));
  }
  // One cell, one observation: a second would let the file say two things of it (spelled alike once
  // canonical).
  std::map<std::pair<std::string, std::string>, size_t> cells;
  for (size_t i = 0; i < r->observations.size(); ++i) {
    const Observation& o = r->observations[i];
    auto [it, fresh] = cells.try_emplace({o.workload, o.target}, i);
    if (!fresh)
      return Status::invalid(fmt::format("{}: observations[{}] is the cell {} on {} again (observations[{}])", path, i,
                                         o.workload, o.target, it->second));
  }
  std::map<std::tuple<int, std::string, std::string, std::string, std::string, uint64_t, int>, size_t> runs;
  for (size_t i = 0; i < r->training.size(); ++i) {
    const TrainingRun& t = r->training[i];  // a merged analysis holds the same run of each source
    auto [it, fresh] = runs.try_emplace({t.source, t.model, t.design, t.condition, t.target, t.seed, t.replicate}, i);
    if (!fresh)
      return Status::invalid(fmt::format("{}: training[{}] is the run ({}) {} seed {} rep {} again (training[{}])", path,
                                         i, t.condition, t.target, t.seed, t.replicate, it->second));
  }
  for (size_t i = 0; i < r->training.size(); ++i) {
    TrainingRun& t = r->training[i];
    const std::string at = fmt::format("{}: training[{}]", path, i);
    DETAUDIT_RETURN_IF_ERROR(canonical(&t.target, true, at + ".target"));
    if (!t.base_target.empty()) DETAUDIT_RETURN_IF_ERROR(canonical(&t.base_target, true, at + ".base_target"));
  }
  return Status::ok();
}

Status load_checked_results(const std::string& path, Results* out) {
  Results r;
  DETAUDIT_RETURN_IF_ERROR(load_results(path, &r));
  DETAUDIT_RETURN_IF_ERROR(canonicalize_specs(&r, path));
  *out = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
