#include "suites/health_run.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "probes/child.hpp"
#include "probes/worker.hpp"

namespace detaudit {

namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kItemsPerWorker = 4096;

struct LaneResult {
  std::vector<Observation> done;
  size_t cut = 0, not_reached = 0;
  std::string error;
};

void run_lane(const HealthLane& lane, const HealthRunOptions& opt, LaneResult* r) {
  if (lane.gpu < 0) {
    if (Status st = bind_thread_to_cpu(lane.place.cpu); !st) {
      r->error = st.message();
      for (auto& b : lane.batches) r->not_reached += b.workloads.size();
      return;
    }
  }
  WorkerOptions wo;
  wo.exe = opt.exe;
  wo.repeats = opt.repeats;
  wo.log_path = opt.log_path;
  if (auto it = opt.env_by_cpu.find(lane.place.cpu); lane.gpu < 0 && it != opt.env_by_cpu.end()) wo.env = it->second;
  // A cell's buffers come from the heap instead of fresh mappings of their own, each page faulted in again: a third of
  // the CPU time of a check of small cells went to the kernel without it. (Bits do not move: every workload buffer is
  // 64-byte aligned by Backend::alloc either way, and the libraries keep pools of their own.)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  wo.env["GLIBC_TUNABLES"] = std::string(tunables && *tunables ? std::string(tunables) + ":" : "") +
                             "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=268435456";
  // Rounds over the batches until the deadline: a fast reference runs again (each run is judged), so the budget is
  // what the CPUs are kept busy for.
  for (size_t round = 0; !lane.batches.empty(); ++round) {
    for (size_t b = 0; b < lane.batches.size(); ++b) {
      const HealthBatch& batch = lane.batches[b];
      const auto now = Clock::now();
      if (interrupted() || now >= opt.deadline) {
        if (round == 0) r->not_reached += batch.workloads.size();
        continue;
      }
      // An equal share of what is left to each batch still to run in this round.
      wo.deadline = now + (opt.deadline - now) / int64_t(lane.batches.size() - b);
      // A worker that stops answering is cut by the share's end, not timed out.
      wo.timeout_s = std::chrono::duration<double>(opt.deadline - now).count() + 1;
      // The workloads again and again in one worker until its share ends (a worker's start, the executable and its
      // libraries mapped, costs about as much as a small cell: one per batch, not one per pass).
      std::vector<WorkItem> items;
      const size_t passes = std::max<size_t>(1, kItemsPerWorker / std::max<size_t>(1, batch.workloads.size()));
      for (size_t p = 0; p < passes; ++p)
        for (auto& w : batch.workloads) items.push_back(WorkItem{w, "", ""});
      size_t begun = 0, sunk = 0;
      run_target(
          batch.target, items, wo,
          [&](const WorkItem&, Observation&& o) {
            ++sunk;
            r->done.push_back(std::move(o));
          },
          [&](const WorkItem&) { ++begun; });
      // A cell begun and not sunk was cut by the share's end (or an interruption); in the first round the workloads
      // of the first pass it did not reach were not reached.
      const size_t cut = begun > sunk ? begun - sunk : 0;
      r->cut += cut;
      if (round == 0 && sunk + cut < batch.workloads.size()) r->not_reached += batch.workloads.size() - sunk - cut;
    }
    if (interrupted() || Clock::now() >= opt.deadline) break;
  }
}
}  // namespace

void run_health_lanes(const std::vector<HealthLane>& lanes, const HealthRunOptions& opt, HealthRun* out) {
  const auto t0 = Clock::now();
  std::vector<LaneResult> results(lanes.size());
  std::vector<std::thread> threads;
  threads.reserve(lanes.size());
  for (size_t i = 0; i < lanes.size(); ++i) threads.emplace_back(run_lane, std::cref(lanes[i]), std::cref(opt), &results[i]);
  for (auto& t : threads) t.join();
  HealthRun run;
  for (size_t i = 0; i < lanes.size(); ++i) {
    for (auto& o : results[i].done) run.observations.push_back({i, std::move(o)});
    run.cut += results[i].cut;
    run.not_reached += results[i].not_reached;
    if (!results[i].error.empty())
      run.errors.push_back(fmt::format("cpu {}: {}", lanes[i].place.cpu, results[i].error));
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  *out = std::move(run);
}

}  // namespace detaudit
