// What `diverge` found: where two training runs first part, and the design and targets they ran
// (suites/diverge.hpp runs them, report/diverge_report.hpp renders). Its JSON is "detaudit-diverge/1";
// each run's trace (JSON Lines) carries the design and the records in the same spelling.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/verdict.hpp"
#include "kernels/fingerprint.hpp"

namespace detaudit {

// One record of a run (one line of a trace).
struct DivergeRecord {
  int step = 0;
  int layer = 0;        // index in the network; the loss is layer = number of layers
  std::string name;     // the layer's name ("conv2d", "relu", ...), "mse" for the loss
  std::string pass;     // "forward", "backward", "loss", "update"
  std::string tensor;   // forward "y"; backward "dy" (loss gradient at the last layer), "dw", "db", "dx";
                        // loss "value"; update "w", "b" (the parameters after the step)
  Fingerprint fp;
  uint64_t count = 0;   // elements
  std::optional<double> loss;  // the loss value record
  bool same_place(const DivergeRecord& o) const;
  // "step 3, layer 6 (linear), pass backward, tensor dw"
  std::string where() const;
};

// The op that produced a record's tensor, in words ("conv2d_bwd_filter: a reduction over N*P*Q"), and
// whether it reduces (sums many terms, so a backend's reduction order applies).
struct RecordOp {
  std::string op;
  bool reduction = false;
};

// What two traces must share to be compared (the header's design fields).
struct DivergeDesign {
  std::string model = "autoencoder";
  int batch_size = 0, steps = 0;
  uint64_t init_seed = 0, data_seed = 0;
  std::string optimizer = "adam";
  double lr = 0;
  std::string data_fingerprint;
  std::vector<std::string> layers;  // layer names in order
};

struct TensorDistance {
  uint64_t max_ulp = 0;   // contract/metrics.hpp ulp_distance; kUlpInfinite for NaN against a number
  double rel_l2 = 0;      // |a - b|_2 / |a|_2 (|a - b|_2 when a is all zero)
  uint64_t mismatched = 0;  // elements whose bits differ
};

struct FirstDivergence {
  DivergeRecord a, b;      // the same place, different fingerprints
  size_t equal_before = 0;  // records that matched before it
  std::optional<TensorDistance> distance;  // online only (offline: fingerprints only)
  RecordOp op;
  // GPU targets (Backend::traces_kernels): the kernels CUPTI saw for this layer's pass, per run; or why
  // none are attributed.
  std::vector<std::string> kernels_a, kernels_b;
  std::string kernels_note;
};

struct DivergeSide {
  std::string target;          // spec text as given
  std::string backend;         // Backend::describe()
  std::vector<std::pair<std::string, std::string>> details;  // Backend::details(): order, threads, algo...
  std::string trace;           // trace file path ("" none)
};

struct DivergeResult {
  bool offline = false;
  DivergeDesign design;
  DivergeSide a, b;
  int steps = 0;          // steps compared
  size_t records = 0;     // records compared (per run)
  std::optional<FirstDivergence> first;
  // Per step: the losses, |loss_a - loss_b|, and (online) the L2 distance between the weight vectors.
  std::vector<double> loss_a, loss_b, loss_gap, weight_l2;
  // "no divergence in 20 steps", "diverged at step 3, layer 6 (linear), pass backward: ..."
  std::string summary() const;
  Decision decision() const { return first ? Decision::kFail : Decision::kPass; }  // FAIL: it diverged
  // The results document (diverge.json).
  std::string to_json() const;
};

nlohmann::json design_json(const DivergeDesign& d);
nlohmann::json record_json(const DivergeRecord& r);
nlohmann::json details_json(const std::vector<std::pair<std::string, std::string>>& d);  // {key: value}

}  // namespace detaudit
