#include "contract/check_report.hpp"

#include <algorithm>

namespace detaudit {

const char* to_string(FindingKind k) {
  switch (k) {
    case FindingKind::kSame: return "same";
    case FindingKind::kBitsChanged: return "bits_changed";
    case FindingKind::kNewOutputs: return "new_outputs";
    case FindingKind::kAlgorithmChanged: return "algorithm_changed";
    case FindingKind::kOtherKey: return "other_key";
    case FindingKind::kDeterminism: return "determinism";
    case FindingKind::kErrRatio: return "err_ratio";
    case FindingKind::kVerdict: return "verdict";
    case FindingKind::kStatusChanged: return "status_changed";
    case FindingKind::kNotRun: return "not_run";
    case FindingKind::kNoBaseline: return "no_baseline";
    case FindingKind::kTrainingShift:
      return "training_shift";
    case FindingKind::kTrainingEquivalence:
      return "training_equivalence";
    case FindingKind::kTrainingBits: return "training_bits";
    case FindingKind::kTrainingNotJudged:
      return "training_not_judged";
    case FindingKind::kTrainingRun: return "training_run";
    case FindingKind::kTrainingNotRun: return "training_not_run";
    case FindingKind::kTrainingNoBaseline: return "training_no_baseline";
  }
  return "same";
}

int CheckReport::count(Verdict v) const {
  return int(std::count_if(findings.begin(), findings.end(), [&](const CheckFinding& f) { return f.verdict == v; }));
}

nlohmann::json to_json(const CheckReport& rep) {
  nlohmann::json fs = nlohmann::json::array();
  for (auto& f : rep.findings) {
    nlohmann::json j = {{"kind", to_string(f.kind)},   {"verdict", to_string(f.verdict)}, {"workload", f.workload},
                        {"target", f.target},          {"old", f.old_value},              {"new", f.new_value},
                        {"message", f.message},        {"key_matches", f.key_matches}};
    if (f.verdict == Verdict::kFail || f.verdict == Verdict::kWarn) j["action"] = to_string(check_action(f.kind));
    if (!f.old_kernels.empty()) j["old_kernels"] = f.old_kernels;
    if (!f.new_kernels.empty()) j["new_kernels"] = f.new_kernels;
    fs.push_back(j);
  }
  VerdictTally tally;
  for (Verdict v : kAllVerdicts) tally.add(v, rep.count(v));
  return {{"schema", kCheckSchema},
          {"dir", rep.dir},
          {"baseline", rep.baseline_path},
          {"baseline_created_at", rep.baseline_created_at},
          {"baseline_tool", rep.baseline_tool},
          {"exit_code", exit_code_of(rep.decision())},
          {"counts", tally.to_json()},
          {"cells_compared", rep.cells_compared},
          {"cells_same_key", rep.cells_same_key},
          {"cells_other_key", rep.cells_other_key},
          {"cells_other_key_bits_changed", rep.cells_other_key_bits_changed},
          {"cells_ran", rep.cells_ran},
          {"training_runs_compared", rep.runs_compared},
          {"training_not_judged", rep.training_not_judged},
          {"allow_unjudged", rep.allow_unjudged},
          {"findings", fs}};
}

Action check_action(FindingKind k) {
  switch (k) {
    case FindingKind::kAlgorithmChanged:
    case FindingKind::kOtherKey:
    case FindingKind::kErrRatio:
    case FindingKind::kTrainingEquivalence:
      return Action::kConfigure;
    case FindingKind::kNotRun:
    case FindingKind::kNoBaseline:
    case FindingKind::kTrainingNotJudged:
    case FindingKind::kTrainingRun:
    case FindingKind::kTrainingNotRun:
    case FindingKind::kTrainingNoBaseline:
      return Action::kRetest;
    default:
      return Action::kIsolate;  // same key: other bits or outputs, a promise broken, its own FAIL, a crash
  }
}

}  // namespace detaudit
