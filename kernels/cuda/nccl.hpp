// NCCL's all-reduce on this process's GPU, for the collectives of `detaudit fleet`. libnccl is opened
// with dlopen (never linked), so a machine without NCCL still starts detaudit; everything here compiles
// without CUDA (kernels/cuda_unavailable.cc answers "built without CUDA").
//
// The algorithm is chosen as NCCL documents it, by NCCL_ALGO ("Ring", "Tree"), which NCCL reads when a
// communicator is created: each algorithm gets a communicator of its own, made with the variable set.
#pragma once
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

// NCCL's ncclUniqueId: 128 opaque bytes, made by one rank and given to every rank (by MPI).
inline constexpr size_t kNcclIdBytes = 128;

// Why NCCL cannot run in this process ("" when it can): built without CUDA, no CUDA device, no libnccl.
std::string nccl_unavailable_reason();
// The NCCL version as "2.28.9" (empty without libnccl).
std::string nccl_library_version();
// A new unique id (kNcclIdBytes bytes), on the rank that makes it.
Status nccl_make_id(std::string* id);

// One algorithm's cell on this rank: NCCL_ALGO=`algo` for a new communicator of `ranks` ranks, this one
// `rank`, on the CUDA device its `local_rank` (among the ranks on its host) picks, modulo the devices;
// `values` (this rank's terms) summed over the ranks `repeats` times, each result copied back
// (`results`, one per repeat) with the time of each all-reduce.
Status nccl_allreduce(const std::string& id, int rank, int ranks, int local_rank, const std::string& algo,
                      const std::vector<float>& values, int repeats, std::vector<std::vector<float>>* results,
                      std::vector<double>* seconds);

}  // namespace detaudit
