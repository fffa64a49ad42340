// The analysis of a training design (sony2021): the paper's table, the spread tests of (a) vs (b) and
// (c) vs (d), variance components with the permutation test and bootstrap intervals, the confounding
// guard and the phase summary. A pure function of typed runs and where they ran; stored in
// results.json "analysis" and rendered by report/train_report.cpp.
//
// One design, or several merged (`detaudit analyze`): each results directory is a source, with its
// machine and tool build. A unit is a (source, target) pair: the factor "target" of the variance
// decomposition is the unit, so the machine becomes a factor. Units are labelled by their target, and
// in a merged analysis by "<target> @ <source label>".
//
// Hardware vs implementation (the reason this exists: the retracted sony2021 paper, README "Training regressions"). A
// unit's hardware is the device its bits came from: the GPU (name, index) for GPU targets, the CPU
// model otherwise, and in a merged analysis also the machine it is in (its hostname). Its implementation is the
// target without its device index, the versions of the libraries its backend depends on (registry
// `libraries`) and the tool's version and commit. A pair of units is attributed to hardware only when
// the implementation is identical in every part, and only when that pair's own permutation test in (a)
// is significant with power; a pair whose deterministic variants gave bitwise-identical final weights
// in (b) and (d) is reported as "hardware contributed exactly zero".
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/target_facts.hpp"
#include "contract/training_run.hpp"

namespace detaudit {

// The EMA decay of the noise-scale estimates along a run (one point per measured batch).
inline constexpr double kNoiseEmaDecay = 0.9;

struct TrainingSource {
  std::string dir;    // the results directory it came from ("" for a design analysed where it ran)
  std::string label;  // short and unique: the machine's hostname, "#2" appended to a repeated one
  nlohmann::json machine;  // its machine fingerprint (probes/env.hpp)
  std::string tool_version, tool_commit;
  std::string started_at, finished_at;
};

// The sources of a results document: plan["sources"] of a merged one, else one source from its
// machine and tool fields. A merged plan's sources are checked when results.json is loaded.
std::vector<TrainingSource> training_sources(const nlohmann::json& plan, const nlohmann::json& machine,
                                             const std::string& tool_version, const std::string& tool_commit);
nlohmann::json to_json(const TrainingSource& s);

// The whole analysis. A run's `source` indexes `sources` (one source: every run's is 0).
// `facts` answers what the analysis needs of each target (probes' target_facts: device, portability,
// libraries), which it cannot see itself.
nlohmann::json analyze_training(const std::vector<TrainingRun>& runs, const std::vector<TrainingSource>& sources,
                                const TargetFactsFn& facts);

// What a target's bits are made by, hardware apart (see above), as one line; and what differs between
// two of them ("target cpu?threads=2 vs cpu?threads=4; openblas 0.3.21 vs 0.3.26").
std::string implementation_of(const std::string& target, const TrainingSource& src, const TargetFactsFn& facts);
std::string hardware_of(const std::string& target, const TrainingSource& src, bool merged, const TargetFactsFn& facts);
std::string implementation_difference(const std::string& target_x, const TrainingSource& x, const std::string& target_y,
                                      const TrainingSource& y, const TargetFactsFn& facts);
// Of those differences, the build's alone (compiler, C library, resolved ISA or core: TargetFacts::build).
std::string build_difference(const std::string& target_x, const TrainingSource& x, const std::string& target_y,
                             const TrainingSource& y, const TargetFactsFn& facts);

}  // namespace detaudit
