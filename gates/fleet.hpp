// `detaudit fleet`: every node of a fleet runs the same cells, and a node that computes other bits is
// named by consensus, without any tolerance. A deterministic cell must give the same bits on every node
// of the same hardware and software, so within a group of nodes of one machine key the majority's
// fingerprint is the cell's, and a node with other bits is a faulty or misconfigured node.
//
// Layout of a fleet directory (each rank writes only its own folder, so a shared folder needs no lock):
//   DIR/ranks/<rank>-<host>/node.json     this node: rank, host, state, machine key, collectives (below)
//   DIR/ranks/<rank>-<host>/probe/...     its qualify run (probe/results.json, train/ at level 2,
//                                         qualify.json), written as it goes like every run
//   DIR/fleet.json, report.md, report.html   the consensus, written by rank 0 (MPI) or `fleet report`
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "contract/fleet_outcome.hpp"
#include "contract/results.hpp"
#include "gates/verdict.hpp"
#include "gates/reference.hpp"
#include "suites/fleet_comm.hpp"

namespace detaudit {

inline constexpr const char* kFleetNodeSchema = "detaudit-fleet-node/1";
// A node whose median time over the cells, relative to its group's, is this many times slower.
inline constexpr double kFleetSlowWarn = 3, kFleetSlowFail = 10;

// What one rank wrote (node.json), with its probe results as far as they got.
struct FleetNode {
  int rank = -1, ranks = 0, level = 1;
  std::string host;
  // Where its rank came from (FleetRank::source): "MPI" (mpirun: the only placement with collectives),
  // "--rank" (its options), "SLURM_PROCID" (srun, one process per rank) or "JOB_COMPLETION_INDEX" (with --ranks).
  std::string placement;
  std::string folder;  // "ranks/<rank>-<host>", relative to the fleet directory
  NodeState state = NodeState::kRunning;
  std::string detail;
  std::string started_at, finished_at;
  int exit_code = -1;  // its own qualification's decision (0, 1, 2) when finished; 128 + signal when interrupted
  std::string own_fail;                           // its own qualification's first failed check, when it failed
  nlohmann::json key = nlohmann::json::object();  // fleet_key() of its machine
  std::vector<CollectiveCell> collectives;
  Results probe;                     // its probe results (observations judged by its own run)
  Results train;                     // its training design (level 2), when it ran
  nlohmann::json node_json() const;  // node.json without the results
};

// The fields of a machine that decide which bits a deterministic cell computes, as "name": "value": CPU
// model and features, cores, each GPU's name, compute capability and SM count, every library and driver
// version of the machine's "libraries" (the build's compiler, glibc, the CPU ISA chosen, BLAS, DNN, CUDA
// stack), and the tool's version and commit.
nlohmann::json fleet_key(const nlohmann::json& machine, const std::string& tool_version,
                         const std::string& tool_commit);
std::string fleet_key_hash(const nlohmann::json& key);  // 16 hex digits

// What a node's cell promises run to run: a training run's, as the fleet recorded it; a probe cell's, as its target
// promises for its workload on the node's machine and with the algorithm its library reported.
Promise::RunToRun fleet_promise(const FleetNode& n, const Observation& o);

// The rank's folder name: "<rank>-<host>" with the host made safe for a file name.
std::string fleet_folder(int rank, const std::string& host);

// Writes DIR/<folder>/node.json atomically.
Status save_fleet_node(const std::string& fleet_dir, const FleetNode& n);
// Reads every DIR/ranks/*/node.json and its probe (and train) results. The run judged is the one of the
// latest started node: its `ranks`, and for each rank its latest started folder; folders of earlier runs
// into the same directory (another number of ranks, or an older start of a rank) are left out, each
// named in `ignored`. Ranks without a folder come back as state "missing". A folder whose node.json is
// unreadable is an error of one line (the fleet directory is not what fleet wrote).
Status load_fleet_dir(const std::string& dir, std::vector<FleetNode>* nodes,
                      std::vector<std::string>* ignored = nullptr);
// One node from its node.json text and its results' texts ("" when it has none): what rank 0 gathers over
// MPI, where the ranks' folders may be on other machines.
Status fleet_node_from_texts(const std::string& node_json, const std::string& probe_json, const std::string& train_json,
                             const std::string& where, FleetNode* out);
// Ranks of one machine key that gave the same outputs of a workload measured them against its one oracle: their
// oracle distances agree, or one rank's bits were copied from a peer beside its own distances (refused, one line).
// load_fleet_dir runs it; so does rank 0 on what it gathers.
Status check_fleet_distances(const std::vector<FleetNode>& nodes);

// A rank's qualify.json text ("" when its folder holds none) held against its node: the same decision, host, folder,
// level, tool and times; a finished rank's is required.
Status check_fleet_qualify(const std::string& qualify_json, const std::string& where, const FleetNode& n);

// What a kind of finding asks: ISOLATE other bits, a cell that varied, crashed or broke a promise, the node's own
// failed qualification, a collective; CONFIGURE another machine key or plan than its peers'; RETEST a node lost,
// interrupted, missing, that could not run or of which nothing was judged; MONITOR slow.
Action fleet_action(FleetFindingKind kind);

// fleet report refuses a directory whose latest run misses more ranks than this (each would be a row).
inline constexpr size_t kMaxMissingRanks = 10000;

// The consensus of the nodes. Groups by machine key; a node alone with its key where a larger group
// exists is named with the fields that differ. Within each group of two or more, per cell: a cell
// deterministic on the majority of the nodes that ran it has the majority's fingerprint, and a node with
// other bits (or that varied, or whose cell crashed, timed out or was skipped) is named with both
// fingerprints, its kernels and the oracle distance of each; without a majority every deterministic node
// is named. A cell nondeterministic on the majority is compared as distributions (each node's distinct
// count and its own verdict against its promise), not bits. Nodes that did not finish, could not run or
// are missing are named and the others' results stand. Time: each node's median over the cells of its
// time relative to the group's median for the cell; kFleetSlowWarn x WARNs, kFleetSlowFail x FAILs.
// With a reference (gates/reference.hpp), a deterministic cell of a key it holds is judged against its known-good bits
// instead of the vote: two nodes, one of them faulty, are told apart, and a node alone with its key is compared.
FleetOutcome fleet_consensus(const std::vector<FleetNode>& nodes, const std::string& dir,
                             const Reference* known = nullptr);

}  // namespace detaudit
