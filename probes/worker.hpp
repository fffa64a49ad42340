// Worker processes. Each target runs in its own process (the detaudit executable, hidden subcommand
// `__worker`) with its own environment and a timeout, so a target that dies by a signal or hangs
// becomes an observation and the audit goes on.
//
// Exchange format ("detaudit-worker/1"), documented in README.md:
//   parent -> worker, on stdin, one JSON document:
//     {"protocol": "detaudit-worker/1", "target": "<canonical target spec>", "repeats": N,
//      "items": [{"index": i, "workload": "<canonical workload spec>", "oracle": "<path or empty>"}]}
//   worker -> parent, on stdout, one JSON object per line:
//     {"event": "begin", "index": i}                  before workload i starts
//     {"event": "observation", "index": i, "observation": {...}}   its result (results.json form)
//     {"event": "done"}                               after the last item
//   Anything else the worker or its libraries print goes to stderr, which the parent keeps in a log.
//   The parent attributes a death (signal, nonzero exit, EOF without "done") or a timeout to the item
//   that has begun but not finished, records it, and starts a new worker for the items after it.
//   A worker whose GPU context is lost (a sticky CUDA error, Backend::context_state) sends that item's
//   observation and exits with kWorkerContextLost: the parent starts a fresh worker for the rest.
#pragma once
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "probes/child.hpp"
#include "contract/observation.hpp"
#include "probes/spec.hpp"

namespace detaudit {

inline constexpr const char* kWorkerProtocol = "detaudit-worker/1";
inline constexpr const char* kWorkerSubcommand = "__worker";
inline constexpr int64_t kMaxRepeats = 100000;
inline constexpr int kWorkerContextLost = 3;  // exit code: the item was sent, the backend can run no more

struct WorkItem {
  Spec workload;
  std::string oracle_path;  // raw output bytes of cpu-ref for this workload; empty: no oracle
  std::string write_oracle;  // oracle workers only: compute the oracle and write it here (no target run)
};

struct WorkerOptions {
  std::string exe;          // the detaudit executable
  int repeats = 5;
  double timeout_s = 120;   // per workload, all repeats together
  std::string log_path;     // the worker's stderr is appended here ("" = inherit)
  // Past this time the worker is killed and the item in progress is not recorded, as for an interruption: the
  // caller's budget, not the cell's fault (`detaudit healthcheck`). The default never comes.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::map<std::string, std::string> env;  // added to the target's own environment (a test hook's)
};

using ObservationSink = std::function<void(const WorkItem&, Observation&&)>;
using ProgressSink = std::function<void(const WorkItem&)>;  // called when a workload begins

// Parent side: runs every item on `target`, in order, calling `sink` once per item (always: a crash,
// timeout or skip is an observation too). Returns only after every item has an observation, or early when
// detaudit is interrupted or opt.deadline comes (the items not sunk did not finish).
void run_target(const Spec& target, const std::vector<WorkItem>& items, const WorkerOptions& opt,
                const ObservationSink& sink, const ProgressSink& progress);

// A parsed and validated worker request (every field checked: protocol, target, repeats in
// 1..100000, items an array of {index: unsigned, workload: spec, oracle: string, write_oracle: string}).
struct WorkerRequest {
  Spec target;
  int repeats = 1;
  std::vector<WorkItem> items;
  std::vector<size_t> indices;
};
Status parse_worker_request(const std::string& text, WorkerRequest* out);

// Worker side: reads the request from `in_fd`, writes events to `out_fd`. Returns the exit code.
int worker_main(int in_fd, int out_fd);

// Runs one workload on one backend in this process (what a worker does per item). Exposed for tests.
// First one warm-up run (traced under its own id on GPUs, so one-time setup such as cuDNN's algorithm
// search stays out of every repeat's kernels and seconds; its fingerprint is kept apart), then `repeats`
// traced, timed and fingerprinted repeats. *context_lost (may be null) is set when the backend can run
// nothing more in this process.
Observation observe(Backend* backend, const std::string& target_text, const WorkItem& item, int repeats,
                    bool* context_lost = nullptr);

// A backend's refusal (unsupported, unavailable) is a skipped cell; any other failed status an error. The
// probes' cells and the training runs (suites/train_worker.cpp) both read a status this way.
ObsStatus obs_status_for(const Status& st);

}  // namespace detaudit
