// The sony2021 training design: the paper's four conditions on every target.
//   (a) random initial weights, nondeterminism on     (b) random initial weights, nondeterminism off
//   (c) fixed initial weights, nondeterminism on      (d) fixed initial weights, nondeterminism off
// Each base target is run in its deterministic and its nondeterministic variant (derive_variants).
// Random initial weights: run r uses init seed kInitSeedBase + r, the same seeds on every target, so
// target and seed are crossed. Fixed: every run uses kInitSeedBase. The data order is the same
// everywhere (data_seed). Condition (a) repeats each seed `replicates` times, which gives the
// run-to-run term of the variance decomposition.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "probes/spec.hpp"
#include "report/results.hpp"

namespace detaudit {

inline constexpr uint64_t kInitSeedBase = 1000;

struct TargetVariants {
  Spec base, deterministic, nondeterministic;
};
// cpu: order=blocked vs order=atomic; cuda: tree vs atomic; cublas: atomics not_allowed vs allowed;
// cudnn: deterministic algorithms (1) vs the atomic ones (0). Others have no nondeterministic variant.
bool derive_variants(const Spec& base, TargetVariants* out, std::string* err);

struct TrainDesign {
  std::string model = "autoencoder";
  std::string design = "sony2021";
  std::vector<Spec> targets;  // base targets
  int seeds = 3, batches = 200, window = 20, replicates = 2, batch_size = 64;
  uint64_t data_seed = 1;
  std::string data_dir;  // empty: Fashion-MNIST from dataset-fashion-mnist
  nlohmann::json to_json() const;
};

// Defaults for a quick run; `paper` gives the paper's protocol (12 runs, 5000 batches, window 50).
TrainDesign default_design(bool paper);

struct TrainRunOptions {
  std::string out_dir, command;
  bool fresh = false;
  std::function<void(const std::string&)> progress;
};

// Runs the design, writing results.json after every finished run (an interrupted design resumes
// without redoing finished runs), then the analysis and the reports. Returns 0 when the design ran
// (whatever it found), 2 when it could not run (*err: one line).
int run_train_design(const TrainDesign& d, const TrainRunOptions& opt, Results* results, std::string* err);

// The analysis of a results document's training runs (table, variance components, confounding
// guard, phases). Pure function of the runs; stored in results.json "analysis".
nlohmann::json analyze_training(const nlohmann::json& runs, const nlohmann::json& machine, const TrainDesign& d);

}  // namespace detaudit
