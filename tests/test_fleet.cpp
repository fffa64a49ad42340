// `detaudit fleet`: the consensus on known nodes (FleetConsensus, every build), then real ranks: mpirun
// with three ranks on CPU targets, one rank made to compute other bits or to report another machine key
// (the fleet's test hooks), ranks run one per process with one killed mid-run and merged offline, and a
// local two-node Slurm cluster (tests/fleet/slurm-cluster.sh) running fleet on both nodes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gates/fleet.hpp"
#include "probes/env.hpp"
#include "store/history.hpp"
#include "gates/qualify.hpp"
#include "kernels/cuda/nccl.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;
using cli_test::fresh_dir;
using cli_test::slurp;

Observation obs(const std::string& w, const std::string& t, std::vector<std::string> fps, double seconds = 0.01) {
  Observation o;
  o.workload = w, o.target = t, o.status = ObsStatus::kOk;
  test::describe_as_recorded(&o);
  o.repeats = int(fps.size());
  o.fingerprints = std::move(fps);
  o.distinct = count_distinct(o.fingerprints);
  o.seconds.assign(o.fingerprints.size(), seconds);
  o.details["oracle_problem"] = "no oracle in this test";  // as a results file says of a cell without one
  return o;
}

const std::string kA(32, 'a'), kB(32, 'b'), kC(32, 'c');
// Two cells of a target that promises determinism (cpu-ref): compared bit for bit.
const std::string kW1 = "reduce?op=sum&n=10&dist=uniform&seed=1", kW2 = "reduce?op=dot&n=10&dist=uniform&seed=1";
const std::string kRef = "cpu-ref";

// n nodes of one key, each with the same two cells (w1 deterministic, w2 deterministic), finished.
std::vector<FleetNode> fleet_of(int n) {
  std::vector<FleetNode> nodes;
  for (int r = 0; r < n; ++r) {
    FleetNode x;
    x.rank = r, x.ranks = n, x.host = "h" + std::to_string(r), x.folder = fleet_folder(r, x.host);
    x.placement = "MPI", x.state = NodeState::kFinished, x.exit_code = 0;
    x.key = {{"cpu_model", "EPYC"}, {"libraries.glibc", "2.36"}};
    x.probe.observations = {obs(kW1, kRef, {kA, kA, kA}), obs(kW2, kRef, {kB, kB, kB})};
    nodes.push_back(std::move(x));
  }
  return nodes;
}

// The qualify.json a finished rank's qualification writes beside its node.json, from the rank's own results (as
// fleet report holds it against them): without it a finished rank's decision would stand on node.json alone.
void save_rank_qualify(const fs::path& dir, const FleetNode& x) {
  QualifyOutcome q;
  q.level = x.level, q.hostname = x.host;
  q.started_at = x.started_at, q.finished_at = x.finished_at.empty() ? x.started_at : x.finished_at;
  if (x.probe.machine.is_object() && !x.probe.machine.empty()) q.machine_key = machine_key(x.probe.machine);
  q.tool_version = x.key.value("tool_version", ""), q.tool_commit = x.key.value("tool_commit", "");
  q.probe_dir = (dir / x.folder / "probe").string();
  q.checks = rank_rows(x.probe, x.train, x.level, false);
  q.decision = decide(q.checks);
  std::ofstream(dir / x.folder / "qualify.json") << q.to_json().dump(1) << "\n";
}

size_t count_kind(const FleetOutcome& f, FleetFindingKind kind, int rank) {
  size_t n = 0;
  for (auto& x : f.findings) n += x.kind == kind && x.rank == rank;
  return n;
}

TEST(FleetConsensus, NodesThatAgreePass) {
  FleetOutcome f = fleet_consensus(fleet_of(3), "d");
  EXPECT_EQ(f.decision, Decision::kPass);
  EXPECT_TRUE(f.findings.empty());
  EXPECT_EQ(to_json(f)["nodes"][2]["cells_agreeing"], 2);
}

TEST(FleetConsensus, TheNodeWithOtherBitsIsNamedWithBothFingerprints) {
  auto nodes = fleet_of(3);
  nodes[1].probe.observations[0] = obs(kW1, kRef, {kC, kC, kC});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  ASSERT_EQ(f.findings.size(), 1u);
  EXPECT_EQ(f.findings[0].kind, FleetFindingKind::kBits);
  EXPECT_EQ(f.findings[0].rank, 1);
  EXPECT_EQ(f.findings[0].cell, kW1 + " @ " + kRef);
  EXPECT_NE(f.findings[0].detail.find(kC + " here, " + kA + " on 2 of 3 nodes"), std::string::npos)
      << f.findings[0].detail;
  EXPECT_EQ(to_json(f)["matrix"][1][0], "differs");  // the disagreeing cell comes first
  // What to do, per finding and per node: other bits on a deterministic cell isolate the node.
  EXPECT_EQ(f.findings[0].action, Action::kIsolate);
  EXPECT_EQ(to_json(f)["findings"][0]["action"], "ISOLATE");
  EXPECT_EQ(to_json(f)["nodes"][1]["action"], "ISOLATE");
  EXPECT_EQ(to_json(f)["nodes"][1]["summary"], "1 FAIL, cpu-ref target");
  EXPECT_TRUE(to_json(f)["nodes"][0]["action"].is_null());
  EXPECT_EQ(to_json(f)["nodes"][0]["summary"], "");
}

// Batch invariance's rows computed alone are compared across the nodes too: a fault that lands only there (the product
// agrees, the rows do not) is named, as other bits of the product are.
TEST(FleetConsensus, OtherBitsInTheRowsComputedAloneAreNamed) {
  auto nodes = fleet_of(3);
  for (size_t i = 0; i < nodes.size(); ++i)
    nodes[i].probe.observations[0].batch = BatchInvariance{4, i == 2 ? 1 : 0, i == 2 ? kC : kB};
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  ASSERT_EQ(f.findings.size(), 1u);
  EXPECT_EQ(f.findings[0].kind, FleetFindingKind::kBits);
  EXPECT_EQ(f.findings[0].rank, 2);
  EXPECT_EQ(f.findings[0].cell, kW1 + " @ " + kRef);
  EXPECT_NE(f.findings[0].detail.find("other bits in the rows computed alone (batch invariance): " + kC + " here, " + kB +
                                      " on 2 of 3 nodes (1 of 4 rows differ from the product here)"),
            std::string::npos)
      << f.findings[0].detail;
  EXPECT_EQ(to_json(f)["matrix"][2][0], "differs");
  // The same rows everywhere: nothing to name; results of older versions (no rows fingerprint): nothing compared.
  nodes[2].probe.observations[0].batch = BatchInvariance{4, 0, kB};
  EXPECT_EQ(fleet_consensus(nodes, "d").decision, Decision::kPass);
  // One node's fingerprint taken out, beside peers of the same build with theirs: named, not passed over.
  nodes[1].probe.observations[0].batch = BatchInvariance{4, 0, ""};
  f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  ASSERT_EQ(f.findings.size(), 1u);
  EXPECT_EQ(f.findings[0].rank, 1);
  EXPECT_NE(f.findings[0].detail.find("carry no fingerprint, where 2 of 3 nodes' of the same build do"),
            std::string::npos)
      << f.findings[0].detail;
  for (auto& n : nodes) n.probe.observations[0].batch = BatchInvariance{4, 0, ""};
  EXPECT_EQ(fleet_consensus(nodes, "d").decision, Decision::kPass);
}

TEST(FleetConsensus, WithoutAMajorityEveryDeterministicNodeIsNamed) {
  auto nodes = fleet_of(2);
  nodes[1].probe.observations[0] = obs(kW1, kRef, {kC, kC, kC});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNoMajority, 0), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNoMajority, 1), 1u);
}

TEST(FleetConsensus, ANodeThatVariesOrCrashesWhereThePeersDoNotIsNamed) {
  auto nodes = fleet_of(3);
  nodes[2].probe.observations[0] = obs(kW1, kRef, {kA, kC, kA});
  nodes[0].probe.observations[1].status = ObsStatus::kCrashed;
  nodes[0].probe.observations[1].reason = "SIGSEGV";
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kVaries, 2), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kStatus, 0), 1u);
  EXPECT_EQ(f.findings.size(), 2u);
}

// One fleet, one plan: a node that ran another level, or its probe cells another number of times or on other
// workloads, is named (its cells were not the fleet's cells).
TEST(FleetConsensus, ANodeThatRanAnotherPlanIsNamed) {
  auto plan = [](int repeats, const std::vector<std::string>& workloads) {
    return nlohmann::json{{"suite", "quick"}, {"targets", {kRef}}, {"workloads", workloads}, {"repeats", repeats}};
  };
  auto nodes = fleet_of(4);
  for (auto& n : nodes) n.probe.plan = plan(3, {kW1, kW2});
  EXPECT_EQ(fleet_consensus(nodes, "d").decision, Decision::kPass);
  nodes[1].level = 2;
  nodes[2].probe.plan = plan(2, {kW1, kW2});
  nodes[3].probe.plan = plan(3, {kW1, "reduce?op=sum&n=2000&dist=uniform&seed=1"});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kAnotherPlan, 0), 0u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kAnotherPlan, 1), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kAnotherPlan, 2), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kAnotherPlan, 3), 1u);
}

// A target that promises variation (atomics): its cells are never compared by bits, whether one node or
// all of them varied, and one run-to-run result per node that differs across nodes is no finding either.
TEST(FleetConsensus, CellsOfATargetPermittedToVaryAreNotComparedByBits) {
  auto nodes = fleet_of(3);
  const std::string atomic = "cpu?order=atomic&threads=2&isa=auto", w = "matmul?m=64&n=64&k=515";
  nodes[0].probe.observations.push_back(obs(w, atomic, {kA, kA, kA}));
  nodes[1].probe.observations.push_back(obs(w, atomic, {kB, kB, kB}));
  nodes[2].probe.observations.push_back(obs(w, atomic, {kA, kC, kA}));
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kPass) << to_json(f)["findings"].dump();
  EXPECT_TRUE(f.findings.empty());
}

// A cell that varies on most nodes (a race permitted by its target) is not compared by bits: no finding.
TEST(FleetConsensus, CellsThatVaryOnMostNodesAreComparedAsDistributions) {
  auto nodes = fleet_of(3);
  nodes[0].probe.observations[0] = obs(kW1, kRef, {kA, kB, kC});
  nodes[1].probe.observations[0] = obs(kW1, kRef, {kB, kB, kC});
  nodes[2].probe.observations[0] = obs(kW1, kRef, {kA, kA, kA});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kPass) << to_json(f)["findings"].dump();
  EXPECT_EQ(to_json(f)["matrix"][0][0], "nondeterministic");
  // ... but a node whose own verdict fails its promise there is named.
  nodes[1].probe.observations[0].verdict = Verdict::kFail;
  nodes[1].probe.observations[0].verdict_reason = "outside the error bound";
  f = fleet_consensus(nodes, "d");
  EXPECT_EQ(count_kind(f, FleetFindingKind::kOwnCheck, 1), 1u);
}

TEST(FleetConsensus, ANodeAloneWithItsKeyIsNamedWithTheFieldsThatDiffer) {
  auto nodes = fleet_of(3);
  nodes[2].key["libraries.glibc"] = "2.99";
  nodes[2].probe.observations[0] = obs(kW1, kRef, {kC, kC, kC});  // not compared: another key
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  ASSERT_EQ(f.findings.size(), 1u);
  EXPECT_EQ(f.findings[0].kind, FleetFindingKind::kKey);
  EXPECT_NE(f.findings[0].detail.find("libraries.glibc 2.99 (its peers: 2.36)"), std::string::npos)
      << f.findings[0].detail;
  // Two groups of two (a fleet of two kinds of machine): each judged on its own, no finding.
  nodes = fleet_of(4);
  nodes[2].key["cpu_model"] = nodes[3].key["cpu_model"] = "Xeon";
  nodes[2].probe.observations[0] = obs(kW1, kRef, {kC, kC, kC});
  nodes[3].probe.observations[0] = obs(kW1, kRef, {kC, kC, kC});
  EXPECT_EQ(fleet_consensus(nodes, "d").decision, Decision::kPass);
}

// Each kind of finding has one name, the one fleet.schema.json publishes (and it publishes no other), and the action
// its kind asks.
TEST(FleetConsensus, EveryKindOfFindingHasThePublishedNameAndItsAction) {
  std::ifstream f(std::string(DETAUDIT_SOURCE_DIR) + "/schemas/fleet.schema.json");
  const nlohmann::json schema = nlohmann::json::parse(f);
  std::set<std::string> published;
  for (auto& k : schema["properties"]["findings"]["items"]["properties"]["kind"]["enum"]) published.insert(k);
  std::set<std::string> named;
  for (int k = int(FleetFindingKind::kBits); k <= int(FleetFindingKind::kSlow); ++k)
    EXPECT_TRUE(named.insert(to_string(FleetFindingKind(k))).second) << to_string(FleetFindingKind(k));
  EXPECT_EQ(named, published);
  EXPECT_EQ(fleet_action(FleetFindingKind::kBits), Action::kIsolate);
  EXPECT_EQ(fleet_action(FleetFindingKind::kReference), Action::kIsolate);
  EXPECT_EQ(fleet_action(FleetFindingKind::kKey), Action::kConfigure);
  EXPECT_EQ(fleet_action(FleetFindingKind::kAnotherPlan), Action::kConfigure);
  EXPECT_EQ(fleet_action(FleetFindingKind::kLost), Action::kRetest);
  EXPECT_EQ(fleet_action(FleetFindingKind::kMissingCell), Action::kRetest);
  EXPECT_EQ(fleet_action(FleetFindingKind::kSlow), Action::kMonitor);
}

TEST(FleetConsensus, LostMissingAndFailedNodesAreNamedAndTheOthersStand) {
  auto nodes = fleet_of(4);
  nodes[1].state = NodeState::kRunning;  // killed after its cells, before it said it finished
  nodes[2].state = NodeState::kMissing;
  nodes[2].probe.observations.clear();
  nodes[2].key = nlohmann::json::object();
  nodes[3].probe.observations[1] = obs(kW2, kRef, {kC, kC, kC});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kLost, 1), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kMissing, 2), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kBits, 3), 1u);    // w2: ranks 0 and 1 agree, 3 differs (2 has nothing)
  // A lost or missing node is run again; its summary names the kind of finding about itself.
  EXPECT_EQ(to_json(f)["nodes"][1]["action"], "RETEST");
  EXPECT_EQ(to_json(f)["nodes"][1]["summary"], "1 FAIL: lost");
  EXPECT_EQ(to_json(f)["cells"][0], kW2 + " @ " + kRef);  // the disagreeing cell first
  EXPECT_EQ(to_json(f)["matrix"][1][0], "agree");
  EXPECT_EQ(to_json(f)["matrix"][2][0], "missing");
}

TEST(FleetConsensus, ASlowNodeWarnsAtThreeTimesAndFailsAtTen) {
  for (double slow : {4.0, 12.0}) {
    auto nodes = fleet_of(3);
    for (auto& o : nodes[2].probe.observations) o.seconds.assign(3, 0.01 * slow);
    FleetOutcome f = fleet_consensus(nodes, "d");
    ASSERT_EQ(count_kind(f, FleetFindingKind::kSlow, 2), 1u) << slow;
    EXPECT_EQ(f.findings[0].verdict, slow > 10 ? Verdict::kFail : Verdict::kWarn);
    EXPECT_EQ(f.decision, slow > 10 ? Decision::kFail : Decision::kPass);
  }
}

// Cells under a millisecond are timer noise one by one; a node that takes 2 s a repeat where its peers
// take microseconds is slow in total all the same. A microsecond's jitter is not.
TEST(FleetConsensus, ASlowNodeBelowTheTimerFloorIsSlowInTotal) {
  auto nodes = fleet_of(3);
  for (auto& n : nodes)
    for (auto& o : n.probe.observations) o.seconds.assign(3, 2e-6);
  auto jitter = nodes;
  for (auto& o : jitter[2].probe.observations) o.seconds.assign(3, 8e-6);
  EXPECT_EQ(count_kind(fleet_consensus(jitter, "d"), FleetFindingKind::kSlow, 2), 0u) << "4x of microseconds is noise";
  for (auto& o : nodes[2].probe.observations) o.seconds.assign(3, 2.0);
  FleetOutcome f = fleet_consensus(nodes, "d");
  ASSERT_EQ(count_kind(f, FleetFindingKind::kSlow, 2), 1u);
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_NE(f.findings[0].detail.find("slower than its group in total"), std::string::npos) << f.findings[0].detail;
}

TEST(FleetConsensus, CollectivesMustAgreeWithinAnAlgorithm) {
  auto nodes = fleet_of(2);
  for (auto& n : nodes) {
    CollectiveCell ring{"allreduce?n=8", "mpi", "ring", 2, {kA, kA}, {0.001, 0.001}, "ok"};
    CollectiveCell rd{"allreduce?n=8", "mpi", "recursive_doubling", 2, {kB, kB}, {0.001, 0.001}, "ok"};
    // NCCL's ring on the GPUs sums in another order than Open MPI's ring: a cell of its own.
    CollectiveCell nccl_ring{"allreduce?n=8", "nccl", "ring", 2, {kC, kC}, {0.001, 0.001}, "ok"};
    n.collectives = {ring, rd, nccl_ring};
  }
  EXPECT_EQ(fleet_consensus(nodes, "d").decision, Decision::kPass) << "algorithms and libraries may differ from each other";
  EXPECT_EQ(to_json(fleet_consensus(nodes, "d"))["collectives"].size(), 3u);
  nodes[1].collectives[0].fingerprints[1] = kC;
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kCollective, 1), 1u);
}

// What fleet report reads from each folder is checked: a node.json of the wrong shape is one line, never
// an exception.
TEST(FleetConsensus, ANodeFileOfTheWrongShapeIsRefusedWithOneLine) {
  const FleetNode n = fleet_of(1)[0];
  FleetNode out;
  ASSERT_TRUE(fleet_node_from_texts(n.node_json().dump(), "", "", "x", &out).is_ok());
  EXPECT_EQ(out.folder, n.folder);
  auto refused = [&](nlohmann::json j, const std::string& says) {
    const Status st = fleet_node_from_texts(j.dump(), "", "", "x", &out);
    EXPECT_FALSE(st.is_ok()) << j.dump();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  auto edit0 = [&](nlohmann::json schema) {
    auto k = n.node_json();
    k["schema"] = std::move(schema);
    return k;
  };
  auto j = n.node_json();
  j["key"]["cores"] = 2;
  refused(j, "key.cores must be a string");
  j = n.node_json();
  j["rank"] = 5;
  refused(j, "rank 5 of 1 is not a rank");
  j = n.node_json();
  j["state"] = "done";
  refused(j, "state 'done'");
  refused("not json", "not a fleet node file");
  // A schema that is no string is no fleet node's either (not a type error escaping the reader).
  refused(edit0(1), "x: not a fleet node file (expected \"schema\"");
  refused(edit0(nlohmann::json::array()), "x: not a fleet node file (expected \"schema\"");
  // What a node says of itself that cannot be true.
  auto edit = [&](auto&& f) {
    auto k = n.node_json();
    f(k);
    return k;
  };
  refused(edit([](nlohmann::json& k) { k["level"] = 7; }), "level 7 is no fleet level");
  // Collective cells are what fleet writes: an all-reduce of its own spelling, an algorithm it asks for, one
  // fingerprint and one time per repeat, on as many ranks as the node's fleet has.
  {
    const CollectiveCell ok{"allreduce?n=8&dist=mixed&seed=1", "mpi", "ring", 1, {kA, kA}, {0.001, 0.002}, "ok"};
    auto with = [&](auto&& f) {
      auto k = n.node_json();
      nlohmann::json c = ok.to_json();
      f(c);
      k["collectives"] = nlohmann::json::array({c});
      return k;
    };
    ASSERT_TRUE(fleet_node_from_texts(with([](nlohmann::json&) {}).dump(), "", "", "x", &out).is_ok());
    ASSERT_EQ(out.collectives.size(), 1u);
    refused(with([](nlohmann::json& c) { c["workload"] = "bogus?x=1"; }),
            "collectives[0]: workload 'bogus?x=1' is not an all-reduce fleet runs");
    refused(with([](nlohmann::json& c) { c["workload"] = "allreduce?n=0&dist=mixed&seed=1"; }), "is not an all-reduce");
    refused(with([](nlohmann::json& c) { c["algorithm"] = "quantum"; }), "algorithm 'quantum' is not one fleet asks mpi for");
    refused(with([](nlohmann::json& c) { c["library"] = "nccl"; }), "algorithm 'ring' is not one fleet asks nccl for");
    refused(with([](nlohmann::json& c) { c["fingerprints"][1] = "zz"; }), "collectives[0]: fingerprints[1] 'zz' is not");
    refused(with([](nlohmann::json& c) { c["seconds"][0] = -1; }), "collectives[0]: seconds[0] is -1");
    // Less than a clock's tick, or more than a year: no clock measured it.
    refused(with([](nlohmann::json& c) { c["seconds"][0] = 1e-300; }), "collectives[0]: seconds[0] is 1e-300 (a time is 0");
    refused(with([](nlohmann::json& c) { c["seconds"][0] = 1e300; }), "collectives[0]: seconds[0] is 1e+300 (a time is 0");
    refused(with([](nlohmann::json& c) { c["seconds"] = {0.001}; }), "status ok with 2 fingerprints and 1 times");
    refused(with([](nlohmann::json& c) { c["ranks"] = 99; }), "collectives[0] ran on 99 ranks, but the node is a rank of 1");
    refused(with([](nlohmann::json& c) { c["status"] = ""; }), "status is empty");
    // A rank placed otherwise than by mpirun ran without MPI: it ran no collective. Its node.json says how it was
    // placed, and its results' command says the same: a command with `--rank` deleted (or misspelt) still leaves
    // the placement, and a placement relabelled "MPI" contradicts the command.
    Results placed = n.probe;
    placed.machine = nlohmann::json::object();
    placed.command = "detaudit fleet --rank 0 --ranks 1 --out d";
    auto placed_by = [&](const std::string& how, bool collectives) {
      auto k = collectives ? with([](nlohmann::json&) {}) : n.node_json();
      k["placement"] = how;
      return k.dump();
    };
    for (const char* how : {"--rank", "SLURM_PROCID", "JOB_COMPLETION_INDEX"}) {
      const Status st = fleet_node_from_texts(placed_by(how, true), "", "", "x", &out);
      EXPECT_NE(st.message().find(fmt::format("1 collective cells, but it was placed by {}", how)), std::string::npos)
          << st.message();
    }
    auto with_command = [&](const std::string& how, const std::string& command) {
      Results r = placed;
      r.command = command;
      return fleet_node_from_texts(placed_by(how, false), to_json(r).dump(), "", "x", &out);
    };
    // Every honest pairing of placement and command is read.
    EXPECT_TRUE(with_command("--rank", "detaudit fleet --rank 0 --ranks 1 --out d").is_ok());
    EXPECT_TRUE(with_command("MPI", "detaudit fleet --level 1 --out d").is_ok());
    EXPECT_TRUE(with_command("SLURM_PROCID", "detaudit fleet --out d").is_ok());
    EXPECT_TRUE(with_command("JOB_COMPLETION_INDEX", "detaudit fleet --ranks 1 --out d").is_ok());
    EXPECT_TRUE(with_command("MPI", "detaudit fleet --rank 0 --ranks 1 --out d").message().find(
                    "placed by MPI, but its results' command names --rank") != std::string::npos);
    EXPECT_TRUE(with_command("--rank", "detaudit fleet --out d").message().find(
                    "placed by --rank, but its results' command lacks --rank") != std::string::npos);
    EXPECT_TRUE(with_command("--rank", "detaudit fleet --rnak 0 --ranks 1 --out d").message().find(
                    "placed by --rank, but its results' command lacks --rank") != std::string::npos);
    EXPECT_TRUE(with_command("JOB_COMPLETION_INDEX", "detaudit fleet --out d").message().find(
                    "placed by JOB_COMPLETION_INDEX, but its results' command lacks --ranks") != std::string::npos);
    EXPECT_TRUE(with_command("SLURM_PROCID", "detaudit fleet --ranks 1 --out d").message().find(
                    "placed by SLURM_PROCID, but its results' command names --ranks") != std::string::npos);
  }
  refused(edit([](nlohmann::json& k) { k["placement"] = "ssh"; }), "placement 'ssh' (MPI, --rank, SLURM_PROCID");
  refused(edit([](nlohmann::json& k) { k.erase("placement"); }), "placement is missing");
  refused(edit([](nlohmann::json& k) { k["verdict"] = "PASS"; }), "\"verdict\" is not a field of a fleet node file");
  {
    // Its host is the one its own results ran on.
    Results probe = n.probe;
    probe.machine = {{"hostname", "elsewhere"}};
    const Status st = fleet_node_from_texts(n.node_json().dump(), to_json(probe).dump(), "", "x", &out);
    EXPECT_NE(st.message().find("host 'h0', but its results ran on 'elsewhere'"), std::string::npos) << st.message();
  }
  refused(edit([](nlohmann::json& k) { k["exit_code"] = 7; }), "exit_code 7 with state finished");
  refused(edit([](nlohmann::json& k) { k["exit_code"] = -1; }), "exit_code -1 is no exit code of a finished rank");
  refused(edit([](nlohmann::json& k) { k["exit_code"] = -7; }), "exit_code -7 is no exit code");
  refused(edit([](nlohmann::json& k) { k["own_fail"] = "probe FAIL"; }), "own_fail says it failed (probe FAIL), but exit_code is 0");
  refused(edit([](nlohmann::json& k) { k["exit_code"] = 1; }),
          "exit_code 1 (its own check failed), but own_fail names no failure");
  {
    // Its results ran while it did, not a day before it started.
    Results early = n.probe;
    early.machine = nlohmann::json::object();
    early.started_at = "2026-12-03T10:00:00Z";
    auto k = n.node_json();
    k["started_at"] = "2026-12-04T10:00:00Z";
    const Status st = fleet_node_from_texts(k.dump(), to_json(early).dump(), "", "x", &out);
    EXPECT_NE(st.message().find("its results started at 2026-12-03T10:00:00Z, before the rank did"), std::string::npos)
        << st.message();
  }
  refused(edit([](nlohmann::json& k) { k["started_at"] = "yesterday"; }), "started_at 'yesterday' is not a time");
  refused(edit([](nlohmann::json& k) { k["started_at"] = "2099-01-01T00:00:00Z"; }),
          "started_at 2099-01-01T00:00:00Z is in the future");
  refused(edit([](nlohmann::json& k) {
            k["started_at"] = "2026-12-04T10:00:00Z";
            k["finished_at"] = "2026-12-04T09:00:00Z";
          }),
          "finished_at 2026-12-04T09:00:00Z is before started_at 2026-12-04T10:00:00Z");
  refused(edit([](nlohmann::json& k) { k["rank"] = uint64_t(9223372036854775808ull); }),
          "rank 9223372036854775808 is beyond any rank");
  refused(edit([](nlohmann::json& k) { k["host"] = "evil\x1b]0;owned\x07"; }), "host holds a control character (byte 0x1b)");
  // Each state with what it gives: a running rank has no end and no exit code, an interrupted one exits
  // 128 + its signal and says when, a finished one says nothing of why, a failed one says why.
  refused(edit([](nlohmann::json& k) {
            k["state"] = "running", k["exit_code"] = -1;
            k["started_at"] = "2026-12-04T10:00:00Z", k["finished_at"] = "2026-12-04T11:00:00Z";
          }),
          "state running, but it gives finished_at 2026-12-04T11:00:00Z");
  refused(edit([](nlohmann::json& k) { k["state"] = "running"; }), "state running, but it gives exit_code 0");
  refused(edit([](nlohmann::json& k) { k["state"] = "interrupted"; }), "state interrupted with exit_code 0");
  refused(edit([](nlohmann::json& k) { k["state"] = "interrupted", k["exit_code"] = 130, k["finished_at"] = ""; }),
          "state interrupted with exit_code 130 and no finished_at");
  refused(edit([](nlohmann::json& k) { k["detail"] = "all good"; }), "state finished, but detail says 'all good'");
  refused(edit([](nlohmann::json& k) { k["state"] = "failed", k["detail"] = ""; }),
          "state failed, but detail does not say why");
  {
    // What an interrupted rank writes is read back, and named with its signal and the way to resume.
    auto k = n.node_json();
    k["state"] = "interrupted", k["exit_code"] = 130, k["detail"] = "interrupted by signal 2 (SIGINT)";
    k["started_at"] = "2026-12-04T10:00:00Z", k["finished_at"] = "2026-12-04T10:05:00Z";
    ASSERT_TRUE(fleet_node_from_texts(k.dump(), "", "", "x", &out).is_ok());
    auto nodes = fleet_of(3);
    nodes[2].state = out.state, nodes[2].exit_code = out.exit_code, nodes[2].detail = out.detail;
    FleetOutcome f = fleet_consensus(nodes, "d");
    EXPECT_EQ(f.decision, Decision::kFail);
    ASSERT_EQ(count_kind(f, FleetFindingKind::kInterrupted, 2), 1u);
    EXPECT_NE(f.findings[0].detail.find("interrupted by signal 2 (SIGINT) after 2 probe cells (those count); its "
                                        "command run again resumes it"),
              std::string::npos)
        << f.findings[0].detail;
  }
  {
    // A key twice: the file's own text, not a JSON value of it.
    auto k = n.node_json();
    const std::string text = "{\"rank\": 7, " + k.dump().substr(1);
    const Status st = fleet_node_from_texts(text, "", "", "x", &out);
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("the key \"rank\" appears twice"), std::string::npos) << st.message();
  }
  // A FAIL in its own results beside exit code 0.
  FleetNode failing = n;
  failing.probe.observations[0] = obs(kW1, kRef, {kA, kC, kA});  // cpu-ref promises one output: a FAIL
  failing.probe.observations[0].verdict = Verdict::kFail;
  Results probe = failing.probe;
  probe.machine = nlohmann::json::object();
  const Status st = fleet_node_from_texts(n.node_json().dump(), to_json(probe).dump(), "", "x", &out);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("exit_code 0, but its probe results FAIL"), std::string::npos) << st.message();
  // Its key must be the machine its own results describe: a 96-core EPYC claiming its peers' key is refused.
  Results own = n.probe;
  own.machine = {{"cpu_model", "AMD EPYC 9654 96-Core"}, {"cores", 96}, {"cpu_features", {"avx2"}},
                 {"libraries", {{"glibc", "2.36"}}}};
  own.tool_version = "0.1.0", own.tool_commit = "abc";
  FleetNode honest = n;
  honest.key = fleet_key(own.machine, own.tool_version, own.tool_commit);
  ASSERT_TRUE(fleet_node_from_texts(honest.node_json().dump(), to_json(own).dump(), "", "x", &out).is_ok());
  const Status lie = fleet_node_from_texts(n.node_json().dump(), to_json(own).dump(), "", "x", &out);
  EXPECT_FALSE(lie.is_ok());
  EXPECT_NE(lie.message().find("its machine key is not the machine its probe results describe (cores:"),
            std::string::npos)
      << lie.message();  // Its results are read as every command reads them: a cell twice (it would count twice among its peers) is
  // refused as `report` refuses it.
  Results twice = own;
  twice.observations.push_back(twice.observations[0]);
  const Status dup = fleet_node_from_texts(honest.node_json().dump(), to_json(twice).dump(), "", "x", &out);
  EXPECT_FALSE(dup.is_ok());
  EXPECT_NE(dup.message().find("observations[2] is the cell " + kW1 + " on cpu-ref again (observations[0])"),
            std::string::npos)
      << dup.message();
}

// A fleet directory used again: the folders of an earlier run (more ranks, or a rank started again on
// another host) are left out of the merge and named; the latest run's ranks are judged alone.
TEST(FleetConsensus, AnEarlierRunsFoldersAreLeftOutAndNamed) {
  const fs::path d = fresh_dir("fleet-stale");
  auto save = [&](int rank, int ranks, const std::string& host, const std::string& started) {
    FleetNode x = fleet_of(1)[0];
    x.rank = rank, x.ranks = ranks, x.host = host, x.folder = fleet_folder(rank, host), x.started_at = started;
    ASSERT_TRUE(save_fleet_node(d.string(), x).is_ok());
    // Its probe results too: a finished rank without them judged nothing.
    fs::create_directories(d / x.folder / "probe");
    x.probe.machine = nlohmann::json::object();  // no machine to hold its key against
    ASSERT_TRUE(save_results((d / x.folder / "probe" / "results.json").string(), x.probe).is_ok());
    save_rank_qualify(d, x);
  };
  for (int r = 0; r < 4; ++r) save(r, 4, "old", "2026-11-01T10:00:00Z");  // four ranks, a month ago
  save(1, 3, "gone", "2026-12-01T09:00:00Z");                             // rank 1 of today's run, first try
  for (int r = 0; r < 3; ++r) save(r, 3, "new", "2026-12-01T10:00:0" + std::to_string(r) + "Z");
  std::vector<FleetNode> nodes;
  std::vector<std::string> ignored;
  ASSERT_TRUE(load_fleet_dir(d.string(), &nodes, &ignored).is_ok());
  ASSERT_EQ(nodes.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(nodes[r].rank, r);
    EXPECT_EQ(nodes[r].host, "new");
  }
  ASSERT_EQ(ignored.size(), 5u);
  size_t other_run = 0, again = 0;
  for (auto& i : ignored) {
    other_run += i.find("from a run of 4 ranks (the latest run has 3)") != std::string::npos;
    again += i.find("ranks/1-gone") == 0 && i.find("rank 1 started again later in ranks/1-new") != std::string::npos;
  }
  EXPECT_EQ(other_run, 4u);
  EXPECT_EQ(again, 1u);
  {
    // A collective is every finished rank's or none's: cells on one rank alone were run by none.
    const fs::path c = fresh_dir("fleet-collective-one");
    for (int r = 0; r < 2; ++r) {
      FleetNode x = fleet_of(2)[size_t(r)];
      x.started_at = "2026-12-01T10:00:00Z";
      if (r == 0) x.collectives = {{"allreduce?n=8&dist=mixed&seed=1", "mpi", "ring", 2, {kA}, {0.001}, "ok"}};
      ASSERT_TRUE(save_fleet_node(c.string(), x).is_ok());
      fs::create_directories(c / x.folder / "probe");
      x.probe.machine = nlohmann::json::object();
      ASSERT_TRUE(save_results((c / x.folder / "probe" / "results.json").string(), x.probe).is_ok());
      save_rank_qualify(c, x);
    }
    std::vector<FleetNode> two;
    const Status st = load_fleet_dir(c.string(), &two, nullptr);
    EXPECT_NE(st.message().find("ranks/1-h1: its collective cells (0) are not those of ranks/0-h0 (1)"),
              std::string::npos)
        << st.message();
    fs::remove_all(c);
  }
  // The command says so, and the consensus holds for the three that ran.
  cli_test::CliRun r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ignored: ranks/3-old"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(d / "fleet.json"))["ignored_folders"].size(), 5u);
  // A folder without node.json, or a file, in ranks/ is named too (not a rank's), never passed over.
  fs::create_directories(d / "ranks" / "junk");
  std::ofstream(d / "ranks" / "stray.txt") << "x\n";
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ignored: ranks/junk: no node.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ignored: ranks/stray.txt: not a folder"), std::string::npos) << r.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(d / "fleet.json"))["ignored_folders"].size(), 7u);
  fs::remove(d / "ranks" / "stray.txt");
  fs::remove(d / "ranks" / "junk");
  // A node.json copied into another rank's folder (rank 1's file in ranks/2-vm) would stand for that rank.
  fs::create_directories(d / "ranks" / "2-vm");
  fs::copy_file(d / "ranks" / "1-new" / "node.json", d / "ranks" / "2-vm" / "node.json");
  const Status moved = load_fleet_dir(d.string(), &nodes, &ignored);
  EXPECT_NE(moved.message().find("rank 1 on host 'new' writes into ranks/1-new, not this folder"), std::string::npos)
      << moved.message();
  fs::remove_all(d);
}

// The verdict line counts the fleet's findings, not the 20 the text lists: a node with other bits on 25 cells is
// fail=25.
TEST(FleetConsensus, TheVerdictLineCountsEveryFinding) {
  const fs::path d = fresh_dir("fleet-many");
  for (int r = 0; r < 3; ++r) {
    FleetNode x = fleet_of(3)[size_t(r)];
    x.placement = "--rank";
    x.started_at = "2026-12-01T10:00:00Z";
    x.probe.observations.clear();
    for (int s = 1; s <= 25; ++s)
      x.probe.observations.push_back(
          obs("reduce?op=sum&n=10&dist=uniform&seed=" + std::to_string(s), kRef, r == 2 ? std::vector<std::string>{kB, kB} : std::vector<std::string>{kA, kA}));
    ASSERT_TRUE(save_fleet_node(d.string(), x).is_ok());
    fs::create_directories(d / x.folder / "probe");
    x.probe.machine = nlohmann::json::object();
    ASSERT_TRUE(save_results((d / x.folder / "probe" / "results.json").string(), x.probe).is_ok());
    save_rank_qualify(d, x);
  }
  const cli_test::CliRun r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  size_t fails = 0;
  const nlohmann::json fleet = nlohmann::json::parse(slurp(d / "fleet.json"));
  for (auto& f : fleet["findings"]) fails += f["verdict"] == "FAIL";
  EXPECT_EQ(fails, 25u);
  EXPECT_NE(r.out.find("... and 5 more findings in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("fail={} ", fails)), std::string::npos) << r.out;
  fs::remove_all(d);
}

// What a rank wrote is read where it wrote it and as it wrote it: a node.json whose rank or number of ranks its own
// command contradicts (a dissenting rank dropped), one run's results copied into a second rank's folder (a fake
// majority), and links below the fleet directory (ranks/, a rank's probe/ or its results.json) are refused.
TEST(FleetConsensus, EvidenceEditedBelowTheFleetDirectoryIsRefused) {
  const fs::path d = fresh_dir("fleet-edited");
  auto save = [&](const fs::path& root, int rank, int ranks, const std::string& command) {
    FleetNode x = fleet_of(ranks)[size_t(rank)];
    x.placement = command.find("--rank") != std::string::npos ? "--rank" : "SLURM_PROCID";  // as the command says
    x.started_at = "2026-12-01T10:00:0" + std::to_string(rank) + "Z";
    ASSERT_TRUE(save_fleet_node(root.string(), x).is_ok());
    fs::create_directories(root / x.folder / "probe");
    x.probe.machine = nlohmann::json::object();
    x.probe.command = command;
    x.probe.started_at = x.started_at;
    x.probe.finished_at = "2026-12-01T10:01:0" + std::to_string(rank) + "Z";
    for (auto& o : x.probe.observations) o.seconds.assign(o.fingerprints.size(), 0.01 + 0.001 * rank);
    ASSERT_TRUE(save_results((root / x.folder / "probe" / "results.json").string(), x.probe).is_ok());
    save_rank_qualify(root, x);
  };
  auto edit_node = [](const fs::path& file, const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(slurp(file));
    edit(j);
    std::ofstream(file) << j.dump(1) << "\n";
  };
  std::vector<FleetNode> nodes;
  std::vector<std::string> ignored;
  // (Rank 1's command spells its number as the command line also reads it: --rank=01.)
  for (int r = 0; r < 2; ++r)
    save(d, r, 2, std::string("detaudit fleet ") + (r ? "--rank=01" : "--rank 0") + " --ranks 2 --out D");
  ASSERT_TRUE(load_fleet_dir(d.string(), &nodes, &ignored).is_ok());
  // The dissenting rank removed and rank 0's node.json made a fleet of one.
  const fs::path one = d.string() + "-one";
  fs::copy(d, one, fs::copy_options::recursive);
  fs::remove_all(one / "ranks" / "1-h1");
  edit_node(one / "ranks" / "0-h0" / "node.json", [](nlohmann::json& j) { j["ranks"] = 1; });
  Status st = load_fleet_dir(one.string(), &nodes, &ignored);
  EXPECT_NE(st.message().find("ranks 1, but its results' command says --ranks 2"), std::string::npos) << st.message();
  // Ranks placed by the launcher (no --rank in the command): rank 0's folder copied as a third rank.
  const fs::path env = d.string() + "-env";
  for (int r = 0; r < 2; ++r) save(env, r, 3, "detaudit fleet --out D");
  save(env, 2, 3, "detaudit fleet --out D");
  ASSERT_TRUE(load_fleet_dir(env.string(), &nodes, &ignored).is_ok()) << "three real ranks";
  fs::remove_all(env / "ranks" / "2-h2");
  fs::copy(env / "ranks" / "0-h0", env / "ranks" / "2-h2", fs::copy_options::recursive);
  edit_node(env / "ranks" / "2-h2" / "node.json", [](nlohmann::json& j) { j["rank"] = 2, j["host"] = "h2"; });
  edit_node(env / "ranks" / "2-h2" / "qualify.json", [&](nlohmann::json& j) {
    j["hostname"] = "h2", j["probe_dir"] = (env / "ranks" / "2-h2" / "probe").string();
  });
  st = load_fleet_dir(env.string(), &nodes, &ignored);
  EXPECT_NE(st.message().find("ranks/2-h2: its probe results are a copy of ranks/0-h0's"), std::string::npos)
      << st.message();
  // A killed rank's node.json edited to "finished": its results never finished.
  const fs::path killed = d.string() + "-killed";
  fs::copy(d, killed, fs::copy_options::recursive);
  edit_node(killed / "ranks" / "1-h1" / "probe" / "results.json", [](nlohmann::json& j) { j.erase("finished_at"); });
  st = load_fleet_dir(killed.string(), &nodes, &ignored);
  EXPECT_NE(st.message().find("state finished, but its probe results never finished"), std::string::npos)
      << st.message();
  fs::remove_all(killed);
  // Links: at ranks/, at a rank's probe/, at its results.json.
  const fs::path other = d.string() + "-other";
  fs::copy(d, other, fs::copy_options::recursive);
  const std::vector<std::pair<fs::path, fs::path>> links = {
      {d / "ranks", other / "ranks"},
      {d / "ranks" / "1-h1" / "probe", other / "ranks" / "1-h1" / "probe"},
      {d / "ranks" / "1-h1" / "probe" / "results.json", other / "ranks" / "1-h1" / "probe" / "results.json"}};
  for (const auto& [at, to] : links) {
    const fs::path kept = at.string() + ".kept";
    fs::rename(at, kept);
    fs::create_symlink(to, at);
    st = load_fleet_dir(d.string(), &nodes, &ignored);
    EXPECT_NE(st.message().find(at.string() + " is a symbolic link: fleet report reads a rank's evidence only where"),
              std::string::npos)
        << at << ": " << st.message();
    fs::remove(at);
    fs::rename(kept, at);
  }
  EXPECT_TRUE(load_fleet_dir(d.string(), &nodes, &ignored).is_ok());
  for (const fs::path& p : {d, one, env, other}) fs::remove_all(p);
}

// NCCL compiles into every build and is opened at run time: without a device (or without CUDA in the
// build) it says why and runs nothing, never aborts.
TEST(FleetNccl, WithoutADeviceTheAllReduceSaysWhyAndRunsNothing) {
  const std::string why = nccl_unavailable_reason();
  if (why.empty()) GTEST_SKIP() << "a CUDA device and NCCL are here (tests/gpu runs the all-reduce)";
  EXPECT_TRUE(why.find("no CUDA device") != std::string::npos || why.find("built without CUDA") != std::string::npos ||
              why.find("libnccl") != std::string::npos)
      << why;
  std::vector<std::vector<float>> out;
  std::vector<double> seconds;
  Status st = nccl_allreduce(std::string(kNcclIdBytes, '\0'), 0, 1, 0, "Ring", {1.f, 2.f}, 2, &out, &seconds);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.message();
  EXPECT_FALSE(st.message().empty());
  EXPECT_TRUE(out.empty());
}

// ---- real ranks ----------------------------------------------------------------------------------------

int shell(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

const char* kPlan =
    " --targets 'cpu-ref,cpu?order=blocked&threads=1' --workloads 'reduce?op=sum&n=1000,matmul?m=64&n=64&k=64'"
    " --repeats 3 --no-history";
const char* kMatmul = "matmul?m=64&n=64&k=64&ta=n&tb=n&dtype=f32&dist=uniform&seed=1";

// `env` is set for mpirun and passed to every rank (-x).
std::string mpirun(int np, const std::vector<std::pair<std::string, std::string>>& env = {}) {
  // Ranks on one host: TCP on the loopback (no shared-memory segments), as root where CI runs as root.
  std::string set, pass;
  for (auto& [k, v] : env) set += k + "='" + v + "' ", pass += " -x " + k;
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp "
         "OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1 " +
         set + "timeout 300 " + DETAUDIT_MPIEXEC + pass + " -np " + std::to_string(np) + " " + DETAUDIT_EXE + " fleet";
}

void skip_without_mpi() {
  if (std::string(DETAUDIT_MPIEXEC).empty()) GTEST_SKIP() << "built without MPI (Debian: libopenmpi-dev)";
}

nlohmann::json fleet_json(const fs::path& d) { return nlohmann::json::parse(slurp(d / "fleet.json")); }

// As the README runs it: the history on (here a file of the test's own, through DETAUDIT_HISTORY), so
// every node's probe results are recorded as a fleet run.
TEST(FleetMpi, ThreeRanksAgreeOnCpuTargets) {
  skip_without_mpi();
  fs::path d = fresh_dir("fleet-mpi");
  const std::string db = d.string() + ".history.db";
  fs::remove(db);
  std::string plan = kPlan;
  plan.erase(plan.find(" --no-history"));
  const int rc = shell(mpirun(3, {{"DETAUDIT_HISTORY", db}}) + plan + " --out " + d.string() + " >" +
                       (d.string() + ".out") + " 2>&1");
  const std::string out = slurp(d.string() + ".out");
  ASSERT_EQ(rc, 0) << out;
  cli_test::CliRun h = cli_test::run_cli("history --history " + db + " --format json");
  ASSERT_EQ(h.code, 0) << h.err;
  EXPECT_EQ(nlohmann::json::parse(h.out)["runs"], 3) << h.out;
  fs::remove(db);
  auto f = fleet_json(d);
  EXPECT_EQ(f["verdict"], "PASS");
  ASSERT_EQ(f["nodes"].size(), 3u);
  for (auto& n : f["nodes"]) {
    EXPECT_EQ(n["state"], "finished");
    EXPECT_EQ(n["cells_agreeing"], 4);
  }
  // The collectives: every algorithm one result across the ranks and repeats.
  ASSERT_EQ(f["collectives"].size(), 6u);
  for (auto& c : f["collectives"]) EXPECT_EQ(c["verdict"], "PASS") << c.dump();
  EXPECT_NE(slurp(d / "report.html").find("Nodes x cells"), std::string::npos);
  // NCCL's all-reduce needs a GPU on every rank: without one it is not run, and each rank says why.
  if (std::string why = nccl_unavailable_reason(); !why.empty()) {
    EXPECT_NE(out.find("NCCL all-reduce not run: " + why), std::string::npos) << out;
  }
  fs::remove_all(d);
}

// A rank that hangs after its own part (a test hook): the others wait --timeout for it, then go on; rank
// 0 names it, the others' results stand, and every rank ends with 1.
TEST(FleetMpi, AHungRankIsNamedAfterTheTimeoutAndTheOthersStand) {
  skip_without_mpi();
  fs::path d = fresh_dir("fleet-hang");
  const int rc = shell(mpirun(3, {{"DETAUDIT_FLEET_TEST_HANG", "2:hang"}}) + kPlan + " --timeout 4 --out " +
                       d.string() + " >" + (d.string() + ".out") + " 2>&1");
  const std::string out = slurp(d.string() + ".out");
  ASSERT_EQ(rc, 1) << out;
  auto f = fleet_json(d);
  ASSERT_EQ(f["nodes"].size(), 3u);
  EXPECT_EQ(f["nodes"][2]["state"], "missing");
  bool named = false;
  for (auto& x : f["findings"])
    if (x["rank"] == 2 && x["kind"] == "missing") {
      named = true;
      EXPECT_NE(x["detail"].get<std::string>().find("--timeout 4 s"), std::string::npos) << x.dump();
      // Named with the host it said it was on at the start (the ranks exchange who they are before running).
      const std::string host = nlohmann::json::parse(slurp(d / "ranks" / (fleet_folder(0, f["nodes"][0]["host"]).substr(6)) /
                                                           "node.json"))["host"];
      EXPECT_EQ(x["host"], host) << x.dump();
      EXPECT_NE(x["detail"].get<std::string>().find("it started as host " + host), std::string::npos) << x.dump();
    }
  EXPECT_TRUE(named) << f["findings"].dump();
  for (int r : {0, 1}) {
    EXPECT_EQ(f["nodes"][r]["state"], "finished");
    EXPECT_EQ(f["nodes"][r]["cells_agreeing"], 4) << "ranks 0 and 1 agree on every cell";
  }
  EXPECT_TRUE(f["collectives"].empty()) << "the collectives need every rank";
  EXPECT_NE(out.find("collectives not run"), std::string::npos) << out;
  fs::remove_all(d);
}

// A rank that cannot write its folder (here a file stands where its folder goes) says why before anything else, runs
// nothing and takes part as failed: rank 0 names it alone, the other ranks' parts finish, and no rank aborts the job.
TEST(FleetMpi, ARankThatCannotWriteSaysWhyAndIsTheOnlyOneNamed) {
  skip_without_mpi();
  fs::path d = fresh_dir("fleet-unwritable");
  fs::create_directories(d / "ranks");
  const std::string host = machine_fingerprint().value("hostname", std::string("unknown"));
  std::ofstream(d / fleet_folder(1, host)) << "not a folder\n";
  const int rc = shell(mpirun(3) + kPlan + " --out " + d.string() + " >" + (d.string() + ".out") + " 2>&1");
  const std::string out = slurp(d.string() + ".out");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("detaudit: error: rank 1 (" + host + "): "), std::string::npos) << out;
  EXPECT_EQ(out.find("MPI_ABORT"), std::string::npos) << out;
  auto f = fleet_json(d);
  ASSERT_EQ(f["nodes"].size(), 3u);
  EXPECT_EQ(f["nodes"][1]["state"], "failed");
  for (int r : {0, 2}) {
    EXPECT_EQ(f["nodes"][r]["state"], "finished");
    EXPECT_EQ(f["nodes"][r]["verdict"], "PASS");
  }
  for (auto& x : f["findings"]) {
    EXPECT_EQ(x["rank"], 1) << "only the rank at fault: " << x.dump();
    EXPECT_EQ(x["action"], "RETEST") << x.dump();
  }
  fs::remove_all(d);
  fs::remove(d.string() + ".out");
}

TEST(FleetMpi, ARankComputingOtherBitsOrWithAnotherKeyIsNamed) {
  skip_without_mpi();
  fs::path d = fresh_dir("fleet-flip");
  const int rc = shell(mpirun(4, {{"DETAUDIT_FLEET_TEST_FLIP", std::string("1:") + kMatmul},
                                  {"DETAUDIT_FLEET_TEST_KEY", "3:libraries.openblas=0.0.1"}}) +
                       kPlan + " --out " + d.string() + " >" + (d.string() + ".out") + " 2>&1");
  const std::string out = slurp(d.string() + ".out");
  ASSERT_EQ(rc, 1) << out;
  auto f = fleet_json(d);
  bool bits = false, key = false;
  for (auto& x : f["findings"]) {
    if (x["kind"] == "bits") {
      EXPECT_EQ(x["rank"], 1);
      EXPECT_EQ(x["cell"].get<std::string>().rfind(std::string(kMatmul) + " @ ", 0), 0u) << x.dump();
      bits = true;
    }
    if (x["kind"] == "key") {
      EXPECT_EQ(x["rank"], 3);
      EXPECT_NE(x["detail"].get<std::string>().find("libraries.openblas 0.0.1"), std::string::npos) << x.dump();
      key = true;
    }
  }
  EXPECT_TRUE(bits) << f["findings"].dump();
  EXPECT_TRUE(key) << f["findings"].dump();
  // The other ranks' results are complete: four cells each.
  for (int r : {0, 2}) {
    Results res;
    ASSERT_TRUE(load_results((d / fleet_folder(r, f["nodes"][r]["host"]) / "probe" / "results.json").string(), &res));
    EXPECT_EQ(res.observations.size(), 4u);
  }
  EXPECT_NE(out.find("FAIL rank 1"), std::string::npos) << out;
  fs::remove_all(d);
}

// Without MPI: one process per rank (--rank K --ranks 3); rank 2 killed mid-run. `fleet report` names it
// and merges what the ranks wrote.
TEST(FleetRanks, AKilledRankIsNamedAndTheReportMergesWhatWasWritten) {
  fs::path d = fresh_dir("fleet-ranks");
  fs::create_directories(d);
  const std::string plan =
      std::string(" --targets 'cpu-ref,cpu?order=blocked&threads=1,cpu?order=pairwise&threads=1'") +
      " --workloads 'reduce?op=sum&n=1000,matmul?m=64&n=64&k=64' --repeats 3 --no-history";
  auto rank = [&](int r) {
    return std::string(DETAUDIT_EXE) + " fleet --rank " + std::to_string(r) + " --ranks 3" + plan + " --out " +
           d.string() + " 2>" + (d / ("err" + std::to_string(r))).string() + " >/dev/null";
  };
  EXPECT_EQ(shell(rank(0)), 0) << slurp(d / "err0");
  EXPECT_EQ(shell(rank(1)), 0) << slurp(d / "err1");
  // Rank 2: killed (SIGKILL: no chance to save anything more) once its first target is done.
  const std::string err2 = (d / "err2").string();
  const int rc = shell("(" + rank(2) + ") & p=$!; while kill -0 $p 2>/dev/null && ! grep -q 'target 1/' " + err2 +
                       " 2>/dev/null; do sleep 0.02; done; kill -KILL $p; wait $p");
  EXPECT_EQ(rc, 137) << slurp(err2);
  cli_test::CliRun r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  auto f = fleet_json(d);
  ASSERT_EQ(f["nodes"].size(), 3u);
  EXPECT_EQ(f["nodes"][0]["state"], "finished");
  EXPECT_EQ(f["nodes"][2]["state"], "running");
  EXPECT_LT(f["nodes"][2]["cells"].get<int>(), 6);
  bool lost = false;
  for (auto& x : f["findings"]) lost = lost || (x["kind"] == "lost" && x["rank"] == 2);
  EXPECT_TRUE(lost) << f["findings"].dump();
  EXPECT_EQ(f["nodes"][0]["cells_agreeing"], 6) << "ranks 0 and 1 still agree on every cell";
  EXPECT_NE(r.out.find("lost"), std::string::npos) << r.out;
  // A rank out of range, and no rank at all: one line, exit 2.
  EXPECT_EQ(cli_test::run_cli("fleet --rank 3 --ranks 3 --out " + d.string()).code, 2);
  cli_test::CliRun none = cli_test::run_cli("fleet --out " + d.string());
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("fleet needs a rank"), std::string::npos) << none.err;
  EXPECT_EQ(cli_test::run_cli("fleet report " + (d / "nothing").string()).code, 2);
  fs::remove_all(d);
}

// A rank stopped by Ctrl-C says so in its node.json (with its exit code and when), prints the command that
// resumes it, and `fleet report` names it "interrupted"; that command run again finishes the rank and the
// fleet passes.
TEST(FleetRanks, AnInterruptedRankSaysSoAndItsCommandResumesIt) {
  fs::path d = fresh_dir("fleet-interrupted");
  fs::create_directories(d);
  const std::string plan = " --targets 'cpu-ref,cpu?order=blocked&threads=1,cpu?order=pairwise&threads=1'"
                           " --workloads 'reduce?op=sum&n=1000,matmul?m=64&n=64&k=64' --repeats 3 --no-history";
  auto rank = [&](int r) {
    return std::string(DETAUDIT_EXE) + " fleet --rank " + std::to_string(r) + " --ranks 2" + plan + " --out " +
           d.string();
  };
  ASSERT_EQ(shell(rank(0) + " >/dev/null 2>" + (d / "err0").string()), 0) << slurp(d / "err0");
  const std::string err1 = (d / "err1").string();
  const int rc = shell("(" + rank(1) + " >/dev/null 2>" + err1 + ") & p=$!; while kill -0 $p 2>/dev/null && ! grep -q "
                       "'target 1/' " + err1 + " 2>/dev/null; do sleep 0.02; done; kill -INT $p; wait $p");
  ASSERT_EQ(rc, 130) << slurp(err1);
  const std::string said = slurp(err1);
  const size_t at = said.find("resume with: ");
  ASSERT_NE(at, std::string::npos) << said;
  const std::string resume = said.substr(at + 13, said.find("; `detaudit fleet report", at) - at - 13);
  EXPECT_NE(resume.find("--rank 1 --ranks 2"), std::string::npos) << resume;
  std::string host;
  for (auto& e : fs::directory_iterator(d / "ranks"))
    if (e.path().filename().string().rfind("1-", 0) == 0) host = e.path().filename().string().substr(2);
  const auto node = nlohmann::json::parse(slurp(d / fleet_folder(1, host) / "node.json"));
  EXPECT_EQ(node["state"], "interrupted") << node.dump();
  EXPECT_EQ(node["exit_code"], 130);
  EXPECT_NE(node["finished_at"], "");
  cli_test::CliRun r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("interrupted"), std::string::npos) << r.out;
  // The printed command, run again: the rank finishes, and the two ranks agree.
  ASSERT_EQ(shell(resume + " >/dev/null 2>" + err1), 0) << slurp(err1);
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(nlohmann::json::parse(slurp(d / fleet_folder(1, host) / "node.json"))["state"], "finished");
  // A rank's qualify.json says what its node.json says: one edited to another decision is refused.
  const fs::path q = d / fleet_folder(1, host) / "qualify.json";
  ASSERT_TRUE(fs::exists(q));
  const nlohmann::json written = nlohmann::json::parse(slurp(q));
  auto qj = written;
  qj["qualified"] = false, qj["exit_code"] = 1;
  std::ofstream(q) << qj.dump();
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("qualify.json: exit_code 1, but node.json says 0"), std::string::npos) << r.err;
  // A finished rank's qualify.json deleted: node.json's exit code would be the decision's only word.
  fs::remove(q);
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("qualify.json: missing, yet rank 1 says it finished"), std::string::npos) << r.err;
  // Its counts are its checks' verdicts: a check removed is refused.
  qj["qualified"] = true, qj["exit_code"] = 0;
  qj["checks"].erase(qj["checks"].size() - 1);
  std::ofstream(q) << qj.dump();
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("are not its checks' verdicts"), std::string::npos) << r.err;
  // Its rows are what its own results give, and what it ran with is the node's: each edit below (counts kept
  // consistent) is refused, naming what differs.
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& said) {
    nlohmann::json e = written;
    edit(e);
    VerdictTally t;
    for (auto& c : e["checks"]) {
      Verdict v;
      ASSERT_TRUE(parse_verdict(c["verdict"].get<std::string>(), &v));
      t.add(v);
    }
    e["counts"] = t.to_json();
    std::ofstream(q) << e.dump();
    const cli_test::CliRun x = cli_test::run_cli("fleet report " + d.string());
    EXPECT_EQ(x.code, 2) << said << ": " << x.out << x.err;
    EXPECT_NE(x.err.find(said), std::string::npos) << x.err;
  };
  ASSERT_EQ(written["checks"].size(), 4u) << written.dump();
  ASSERT_EQ(written["checks"][3]["verdict"], "SKIP") << "race control: no target of the plan may vary";
  refused([](auto& e) { e["checks"][3]["verdict"] = "PASS"; },
          "its row 'race control: cells permitted to vary' PASS is 'race control: cells permitted to vary' SKIP");
  refused([](auto& e) { e["checks"][1]["detail"] = "1 PASS, 1 FAIL"; }, "says '1 PASS, 1 FAIL', its results '2 PASS'");
  refused([](auto& e) { e["checks"].push_back(e["checks"][0]), e["checks"].back()["name"] = "probe cpu?threads=8"; },
          "its row 'probe cpu?threads=8' PASS (required) is none its results give");
  refused([](auto& e) { e["checks"].erase(1); }, "is 'probe cpu?order=blocked&threads=1&isa=auto' PASS (required)");
  // A required row made optional: the rank named its targets (--targets), so each is required.
  refused([](auto& e) { e["checks"][1]["required"] = false; },
          "its row 'probe cpu?order=blocked&threads=1&isa=auto' PASS is 'probe cpu?order=blocked&threads=1&isa=auto' "
          "PASS (required) from its results");
  refused([](auto& e) { e["level"] = 2; }, "level 2, but the rank ran level 1");
  refused([](auto& e) { e["machine_key"] = "0123456789abcdef"; }, "machine_key '0123456789abcdef', but its probe results");
  refused([](auto& e) { e["tool_commit"] = "0000000"; }, "tool_commit '0000000', but node.json's key says");
  refused([](auto& e) { e["train_dir"] = "x/train"; }, "train_dir 'x/train' at level 1");
  refused([](auto& e) { e["started_at"] = "2000-01-01T00:00:00Z"; }, "outside the rank's run");
  refused([](auto& e) { e["checks"][0]["seconds"] = 99.0; }, "checks[0].seconds is 99.0: a step of a run from");
  refused([](auto& e) { e["checks"][0]["seconds"] = 1e-300; }, "checks[0].seconds is 1e-300: a step of a run from");
  // Its action follows from its row: a SKIP that passed nothing asks nothing, a PASS asks nothing either.
  refused([](auto& e) { e["checks"][1]["action"] = "ISOLATE"; }, "says action \"ISOLATE\", but a row that passed asks nothing");
  std::ofstream(q) << written.dump();
  EXPECT_EQ(cli_test::run_cli("fleet report " + d.string()).code, 0) << "the rank's own qualify.json passes";
  // Both ranks ran on this machine: the same bits of a cell are the same distance from its oracle. Rank 1's
  // distances edited (each cell that mismatched the oracle one ULP further, alike within its own file) are refused.
  const fs::path res1 = d / fleet_folder(1, host) / "probe" / "results.json";
  const std::string kept = slurp(res1);
  nlohmann::json rj = nlohmann::json::parse(kept);
  int edited = 0;
  for (auto& o : rj["observations"])
    if (o.contains("oracle") && o["oracle"]["mismatched"].get<int>() > 0)
      o["oracle"]["max_ulp"] = o["oracle"]["max_ulp"].get<int>() + 1, ++edited;
  ASSERT_GT(edited, 0);
  std::ofstream(res1) << rj.dump(1);
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("its outputs are those ranks/0-"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the same bits against one oracle have one distance"), std::string::npos) << r.err;
  std::ofstream(res1) << kept;
  EXPECT_EQ(cli_test::run_cli("fleet report " + d.string()).code, 0);
  fs::remove_all(d);
}

// Level 2 on two ranks (one process each): the training design's runs are cells too, compared by their
// final weights across the nodes, and `fleet report` counts them.
TEST(FleetRanks, LevelTwoComparesTheTrainingRunsAcrossTheNodes) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian: dataset-fashion-mnist)";
  fs::path d = fresh_dir("fleet-level2");
  fs::create_directories(d);
  for (int r : {0, 1}) {
    const std::string err = (d / ("err" + std::to_string(r))).string();
    ASSERT_EQ(shell(std::string(DETAUDIT_EXE) + " fleet --level 2 --rank " + std::to_string(r) +
                    " --ranks 2 --targets 'cpu?order=blocked&threads=1' --workloads 'reduce?op=sum&n=1000' "
                    "--repeats 3 --no-history --out " +
                    d.string() + " >/dev/null 2>" + err),
              0)
        << slurp(err);
  }
  cli_test::CliRun r = cli_test::run_cli("fleet report " + d.string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  auto f = fleet_json(d);
  EXPECT_EQ(f["level"], 2);
  size_t training = 0;
  for (auto& c : f["cells"]) training += c.get<std::string>().rfind("training ", 0) == 0;
  EXPECT_GE(training, 4u) << f["cells"].dump();
  ASSERT_EQ(f["nodes"].size(), 2u);
  // The runs with nondeterminism off must agree bit for bit; those with it on are compared as
  // distributions (never by bits).
  auto runs = nlohmann::json::parse(slurp(d / fleet_folder(0, f["nodes"][0]["host"]) / "train" / "results.json"));
  size_t deterministic = 0;
  for (auto& t : runs["training"]) deterministic += t["nondeterminism"] == "off";
  EXPECT_GE(deterministic, 2u);
  for (auto& n : f["nodes"]) {
    EXPECT_EQ(n["state"], "finished");
    EXPECT_EQ(n["cells"].get<size_t>(), f["cells"].size()) << "the probe cell and every run: " << n.dump();
    EXPECT_EQ(n["cells_agreeing"].get<size_t>(), 1 + deterministic) << n.dump();
  }
  // A rank's qualify.json rows at level 2 follow from its training results too: a training row that says
  // otherwise is refused.
  const fs::path q = d / fleet_folder(1, f["nodes"][1]["host"]) / "qualify.json";
  auto qj = nlohmann::json::parse(slurp(q));
  // Its timing row says where its times are judged (by its peers, in fleet report), not that a history was refused.
  bool timing = false;
  for (auto& c : qj["checks"])
    if (c["name"] == "timing outliers") {
      timing = true;
      EXPECT_EQ(c["detail"], kFleetRankTimingReference) << c.dump();
    }
  EXPECT_TRUE(timing) << qj.dump();
  bool edited = false;
  for (auto& c : qj["checks"])
    if (c["name"] == "training runs finish") c["detail"] = "9 runs finished", edited = true;
  ASSERT_TRUE(edited) << qj.dump();
  std::ofstream(q) << qj.dump();
  r = cli_test::run_cli("fleet report " + d.string());
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("its row 'training runs finish' PASS (required) says '9 runs finished'"), std::string::npos)
      << r.err;
  fs::remove_all(d);
}

// A local Slurm cluster of two nodes (munge, slurmctld, two slurmd on 127.0.0.1), started and stopped by
// this test by pid: `sbatch -N2` runs `srun -N2 detaudit fleet` (each rank from SLURM_PROCID) and the
// merged report has both nodes.
TEST(FleetSlurm, SbatchRunsFleetOnTwoNodes) {
  const std::string script = std::string(DETAUDIT_SOURCE_DIR) + "/tests/fleet/slurm-cluster.sh";
  const int check = shell("bash " + script + " check >/dev/null 2>&1");
  if (check == 77) GTEST_SKIP() << "Slurm or munge is not installed (scripts/setup-debian.sh installs them)";
  if (::geteuid() != 0) GTEST_SKIP() << "the local cluster's daemons run as root";
  // Short: the cluster's sockets live under it (a Unix socket path has at most 107 bytes).
  const fs::path c = "/tmp/da-slurm-" + std::to_string(getpid());
  fs::remove_all(c);
  fs::create_directories(c);
  const fs::path d = fresh_dir("fleet-slurm");
  ASSERT_EQ(shell("bash " + script + " start " + c.string() + " >" + (c / "env").string() + " 2>" +
                  (c / "start.err").string()),
            0)
      << slurp(c / "start.err");
  {
    std::ofstream job(c / "job.sh");
    job << "#!/bin/bash\n"
        << "srun -N2 -n2 " << DETAUDIT_EXE << " fleet" << kPlan << " --out " << d.string() << "\n"
        << DETAUDIT_EXE << " fleet report " << d.string() << "\n";
  }
  const int rc =
      shell(". " + (c / "env").string() + " && timeout 300 sbatch -N2 --wait -o " + (c / "job.out").string() + " " +
            (c / "job.sh").string() + " >/dev/null 2>" + (c / "sbatch.err").string());
  const int stopped = shell("bash " + script + " stop " + c.string() + " >/dev/null 2>&1");
  EXPECT_EQ(rc, 0) << slurp(c / "sbatch.err") << slurp(c / "job.out");
  EXPECT_EQ(stopped, 0);
  ASSERT_TRUE(fs::exists(d / "fleet.json")) << slurp(c / "job.out");
  auto f = fleet_json(d);
  EXPECT_EQ(f["verdict"], "PASS") << f["findings"].dump();
  ASSERT_EQ(f["nodes"].size(), 2u);
  for (auto& n : f["nodes"]) EXPECT_EQ(n["state"], "finished");
  fs::remove_all(c);
  fs::remove_all(d);
}


// Where a rank comes from: the Kubernetes Indexed Job form of the README (--ranks alone, the rank from
// JOB_COMPLETION_INDEX), and numbers beyond an int refused instead of wrapped (SLURM_PROCID 4294967297
// was rank 1).
TEST(FleetRanks, TheIndexedJobFormAndNumbersBeyondAnIntAreRead) {
  struct Env {
    const char* name;
    explicit Env(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
    ~Env() { ::unsetenv(name); }
  };
  FleetRank r;
  {
    Env job("JOB_COMPLETION_INDEX", "1");
    ASSERT_TRUE(fleet_resolve_rank(-1, 3, &r).is_ok());
    EXPECT_EQ(r.rank, 1);
    EXPECT_EQ(r.ranks, 3);
    EXPECT_EQ(r.source, "JOB_COMPLETION_INDEX");
  }
  EXPECT_FALSE(fleet_resolve_rank(-1, 3, &r).is_ok()) << "--ranks alone, outside a Job: which rank?";
  {
    Env p("SLURM_PROCID", "4294967297"), n("SLURM_NTASKS", "4294967298");
    const Status st = fleet_resolve_rank(-1, -1, &r);
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("SLURM_PROCID and SLURM_NTASKS must both be set to whole numbers"), std::string::npos)
        << st.message();
  }
}

// A node of which nothing was judged is no pass: empty results ("0/0"), every rank with no cell, a cell
// its peers ran missing from it, a node.json without a machine key.
TEST(FleetConsensus, ANodeOfWhichNothingWasJudgedIsNoPass) {
  auto empty = fleet_of(3);
  empty[1].probe.observations.clear();
  FleetOutcome f = fleet_consensus(empty, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNothing, 1), 1u);
  auto none = fleet_of(3);
  for (auto& n : none) n.probe.observations.clear();
  EXPECT_EQ(fleet_consensus(none, "d").decision, Decision::kNotJudged) << "no cell on any node: nothing was judged";
  auto short_one = fleet_of(3);
  short_one[2].probe.observations.pop_back();
  f = fleet_consensus(short_one, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kMissingCell, 2), 1u);
  auto keyless = fleet_of(3);
  keyless[0].key = nlohmann::json::object();
  f = fleet_consensus(keyless, "d");
  EXPECT_EQ(f.decision, Decision::kFail);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNothing, 0), 1u);
  // Cells that all skipped on every node: "cells agree" over no bits was a pass.
  auto skipped = fleet_of(2);
  for (auto& n : skipped)
    for (auto& o : n.probe.observations) {
      o.status = ObsStatus::kSkipped;
      o.fingerprints.clear();
      o.distinct = 0;
      o.reason = "no CUDA device";
    }
  f = fleet_consensus(skipped, "d");
  EXPECT_NE(f.decision, Decision::kPass);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNothing, 0) + count_kind(f, FleetFindingKind::kNothing, 1), 2u);
  EXPECT_EQ(fleet_consensus(fleet_of(3), "d").decision, Decision::kPass);
}

// A node.json claiming a million ranks beside one folder is refused at once, not judged for minutes.
TEST(FleetConsensus, AClaimOfMillionsOfMissingRanksIsRefused) {
  const fs::path d = fresh_dir("fleet-million");
  FleetNode x = fleet_of(1)[0];
  x.ranks = 1000000;
  ASSERT_TRUE(save_fleet_node(d.string(), x).is_ok());
  x.probe = Results{};  // (its folder holds no probe results)
  save_rank_qualify(d, x);
  std::vector<FleetNode> nodes;
  const Status st = load_fleet_dir(d.string(), &nodes, nullptr);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("claims 1000000 ranks, but 1 of them have a folder"), std::string::npos) << st.message();
  fs::remove_all(d);
}

}  // namespace
}  // namespace detaudit
