// `detaudit diverge`: two autoencoder training runs in lockstep in one process (one target twice, or
// two targets), from the same initial weights and the same batches, compared record by record: at every
// step, for every layer in execution order, the fingerprint of its forward output, of its backward
// gradients (each parameter gradient, then the input gradient), of the loss gradient and value, and of
// its parameters after the optimizer's update. Records run in execution order, so the first record that
// differs is the first op whose inputs were identical (all earlier records matched) and whose output
// differs: the root cause. After it the runs go on to the end, and the weight distance and the loss gap
// per step say how the difference grows.
//
// Lockstep: each run has its own thread, but one baton passes between them at every record, so only one
// computes at a time and both are paused at the same record when they are compared: the two tensors are
// still alive, and the first divergence gets its ULP and relative L2 distance from both (each downloaded
// by its own run's thread: a backend is only ever used from the thread that made it).
// Nothing depends on thread timing: the records, and what is compared, are the same in every run.
//
// Traces (JSON Lines) are written as the runs go: a header (the design and the target), one record per
// step x layer x pass x tensor, and an end line. Two traces recorded anywhere compare offline
// (compare_traces): fingerprints only, no distances.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "models/autoencoder.hpp"
#include "models/idx.hpp"
#include "models/layers.hpp"

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
RecordOp record_op(const DivergeRecord& r);

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
  uint64_t max_ulp = 0;   // probes/metrics.hpp ulp_distance; kUlpInfinite for NaN against a number
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
  int exit_code() const { return first ? 1 : 0; }
  // The results document (diverge.json).
  std::string to_json() const;
};

using BackendFactory = std::function<std::unique_ptr<Backend>(Status* st)>;

struct DivergeOptions {
  // Each run's backend is made on that run's own thread (a GPU backend binds its device there).
  BackendFactory make_a, make_b;
  std::string target_a, target_b;  // for the report and traces ("" : the backend's name())
  const Dataset* data = nullptr;
  std::string data_fingerprint;    // "" : computed from data
  // init_seed, data_seed, batches (the steps), batch_size, optimizer, lr: as train_autoencoder uses them.
  TrainConfig train;
  std::string trace_a, trace_b;    // JSON Lines paths; "" : none
  // Test hook, run B only: called with each observed tensor before it is fingerprinted (and before the
  // next layer reads it); may change it in place, e.g. one element by one ULP.
  std::function<Status(int step, size_t layer, LayerPass pass, const char* tensor, Tensor& t)> perturb;
  std::function<void(const std::string&)> progress;  // one line per few steps
};

// Runs both to the end (train.batches steps) unless one fails. A failure of either run is the status.
Status run_diverge(const DivergeOptions& opt, DivergeResult* out);

// Offline: the first differing record of two traces. False with a one-line *err naming the file and
// line for an unreadable, malformed or truncated trace (no end line), and for traces of different designs.
bool compare_traces(const std::string& path_a, const std::string& path_b, DivergeResult* out, std::string* err);

// <out_dir>/diverge.json, diverge.md and diverge.html (each written atomically).
bool write_diverge_outputs(const DivergeResult& r, const std::string& out_dir, std::string* err);

}  // namespace detaudit
