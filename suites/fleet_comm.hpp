// The ranks of `detaudit fleet`: who this process is among them, how rank 0 gathers the others' results
// (MPI), and the collective workload run across them (MPI_Allreduce under each of Open MPI's tuned
// all-reduce algorithms). MPI is an optional part of the build: without it (or not launched by mpirun)
// the rank comes from --rank/--ranks or the environment (Slurm, Open MPI, Kubernetes Indexed Jobs) and
// the ranks' folders are merged offline by `detaudit fleet report`.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

// One collective cell of one rank: an all-reduce (sum) of a float vector under one algorithm, repeated,
// through MPI (on the CPU) or NCCL (on the rank's GPU).
struct CollectiveCell {
  std::string workload;         // "allreduce?n=65536&dist=mixed&seed=1"
  std::string library = "mpi";  // "mpi" (Open MPI's tuned component) or "nccl"
  std::string algorithm;        // mpi: "ring", "recursive_doubling", ...; nccl: NCCL_ALGO's "Ring", "Tree"
  int ranks = 0;
  std::vector<std::string> fingerprints;  // one per repeat: XXH3-128 of the reduced vector on this rank
  std::vector<double> seconds;
  std::string status = "ok";  // "ok", or why it could not run
  nlohmann::json to_json() const;
  static Status from_json(const nlohmann::json& j, CollectiveCell* out, const std::string& where);
};

struct FleetRank {
  int rank = -1, ranks = 0;
  bool mpi = false;    // ranks talk through MPI (launched by mpirun, built with MPI)
  std::string source;  // where the rank came from: "MPI", "--rank", "SLURM_PROCID", ...
};

// Whether this build has MPI, and why not ("" when it has).
bool fleet_mpi_built();
std::string fleet_mpi_off_reason();
// Whether mpirun (Open MPI's launcher) started this process: OMPI_COMM_WORLD_SIZE is set.
bool launched_by_mpirun();

// The rank: explicit (rank >= 0 and ranks > 0 from the options), else MPI when launched by mpirun
// (MPI_Init here; needs the MPI build), else SLURM_PROCID/SLURM_NTASKS, else JOB_COMPLETION_INDEX with
// `ranks` from the options. Invalid (one line) when none says, or a rank is out of range.
Status fleet_resolve_rank(int rank, int ranks, FleetRank* out);

// MPI only. Rank 0: each other rank's texts, gathered as they arrive; a rank that has not sent within
// `wait_s` seconds of rank 0 asking is left out (answered[r] false). Other ranks: send `mine` to rank 0.
// `all` and `answered` are filled on rank 0 only (all[0] = mine).
Status fleet_gather(const std::vector<std::string>& mine, double wait_s, std::vector<std::vector<std::string>>* all,
                    std::vector<bool>* answered);
// MPI only, collective, at the start: every rank's identity (`mine`: its host, Slurm node and job, rank), so that a
// rank that later hangs or is lost is named with its host. Records longer than kIdentityBytes are cut.
inline constexpr size_t kIdentityBytes = 256;
Status fleet_exchange_identities(const std::string& mine, std::vector<std::string>* all);
// MPI only, collective: whether every rank is ready (`mine` on each), known within `wait_s` seconds; a
// rank that does not take part by then (hung) makes it false on the others, which go on without it.
bool fleet_all_ready(bool mine, double wait_s);
// MPI only. Rank 0 sends `code` to every rank that answered; the others wait for it and return it.
int fleet_share_exit_code(int code, const std::vector<bool>& answered);
// MPI only. Ends MPI; with `abort` (a rank never answered) MPI_Abort with `code`, which ends every rank.
void fleet_mpi_end(bool abort, int code);

// The algorithms fleet runs, by Open MPI's names for coll_tuned_allreduce_algorithm's values.
const std::vector<std::pair<int, std::string>>& allreduce_algorithms();
// MPI only, collective (every rank calls it): MPI_Allreduce(SUM) of n floats (each rank's own values from
// the seed and its rank, a mix of magnitudes so that the order of the sum shows in the bits) under each
// algorithm, `repeats` times; the fingerprint of the reduced vector on this rank per repeat.
Status run_allreduce_cells(int n, uint64_t seed, int repeats, std::vector<CollectiveCell>* out);

// The algorithms fleet asks NCCL for, by NCCL_ALGO's names.
const std::vector<std::string>& nccl_algorithms();
// MPI only, collective: the same sums through NCCL on each rank's GPU (device: the rank's local rank on
// its host, modulo the devices), one communicator per algorithm. Runs only when every rank can (a CUDA
// device and libnccl); otherwise no cell, and `not_run` says why (this rank's reason, or that another
// rank could not).
Status run_nccl_allreduce_cells(int n, uint64_t seed, int repeats, std::vector<CollectiveCell>* out,
                                std::string* not_run);
// A rank's terms of the all-reduce workload (both libraries sum the same values).
std::vector<float> allreduce_terms(int n, uint64_t seed, int rank);

}  // namespace detaudit
