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
#include "contract/diverge_result.hpp"
#include "models/autoencoder.hpp"
#include "models/idx.hpp"
#include "models/layers.hpp"

namespace detaudit {

// The op that produced a record's tensor (contract/diverge_result.hpp, RecordOp).
RecordOp record_op(const DivergeRecord& r);

using BackendFactory = std::function<BackendOr()>;

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

// Offline: the first differing record of two traces. Invalid, with one line naming the file and line,
// for an unreadable, malformed or truncated trace (no end line), and for traces of different designs.
Status compare_traces(const std::string& path_a, const std::string& path_b, DivergeResult* out);

}  // namespace detaudit
