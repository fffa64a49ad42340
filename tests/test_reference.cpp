// Known-good bits: the reference a fleet writes of what its nodes agreed on, references merged, and fleets judged
// against one where a vote cannot decide (two nodes, a node alone with its machine key). Consensus on known nodes
// first, then the tool itself: ranks run one per process, `fleet report --reference`, `fleet merge`.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <tuple>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gates/fleet.hpp"
#include "gates/reference.hpp"
#include "probes/spec.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/fixtures.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;
using cli_test::fresh_dir;
using cli_test::run_cli;
using cli_test::slurp;

const std::string kA(32, 'a'), kB(32, 'b'), kC(32, 'c'), kD(32, 'd');
const std::string kW1 = "reduce?op=sum&n=10&dist=uniform&seed=1", kW2 = "reduce?op=dot&n=10&dist=uniform&seed=1";
const std::string kRef = "cpu-ref";

Observation obs(const std::string& w, const std::vector<std::string>& fps) {
  Observation o;
  o.workload = w, o.target = kRef, o.status = ObsStatus::kOk;
  test::describe_as_recorded(&o);
  o.repeats = int(fps.size());
  o.fingerprints = fps;
  o.distinct = count_distinct(o.fingerprints);
  o.seconds.assign(o.fingerprints.size(), 0.01);
  o.details["oracle_problem"] = "no oracle in this test";
  return o;
}

// n finished nodes of one key, each with two deterministic cells (w1 -> a, w2 -> b).
std::vector<FleetNode> fleet_of(int n, const std::string& glibc = "2.36") {
  std::vector<FleetNode> nodes;
  for (int r = 0; r < n; ++r) {
    FleetNode x;
    x.rank = r, x.ranks = n, x.host = "h" + std::to_string(r), x.folder = fleet_folder(r, x.host);
    x.placement = "MPI", x.state = NodeState::kFinished, x.exit_code = 0, x.started_at = "2026-12-01T10:00:0" + std::to_string(r) + "Z";
    x.key = {{"cpu_model", "EPYC"}, {"libraries.glibc", glibc}, {"tool_version", "0.1.0"}, {"tool_commit", "abc"}};
    x.probe.observations = {obs(kW1, {kA, kA}), obs(kW2, {kB, kB})};
    nodes.push_back(std::move(x));
  }
  return nodes;
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

// The tool with `env` (VAR=value ...) set for it alone.
cli_test::CliRun run_with(const std::string& env, const std::string& args) {
  if (env.empty()) return run_cli(args);
  const fs::path dir = fresh_dir("reference-io");
  fs::create_directories(dir);
  const std::string out = (dir / "out").string(), err = (dir / "err").string();
  const int st = std::system((env + " " + DETAUDIT_EXE + " " + args + " >" + out + " 2>" + err).c_str());
  cli_test::CliRun r{WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
  fs::remove_all(dir);
  return r;
}

size_t count_kind(const FleetOutcome& f, FleetFindingKind kind, int rank) {
  size_t n = 0;
  for (auto& x : f.findings) n += x.kind == kind && x.rank == rank;
  return n;
}

TEST(FleetReference, TheCellsANodesMajorityAgreedOnAreKnownGoodBits) {
  auto nodes = fleet_of(3);
  nodes[2].probe.observations[0] = obs(kW1, {kC, kC});  // a faulty node: w1 is still 2 of 3
  const Reference r = reference_of_fleet(nodes);
  ASSERT_EQ(r.cells.size(), 2u);
  ASSERT_EQ(r.keys.size(), 1u);
  const std::string key = fleet_key_hash(nodes[0].key);
  const ReferenceCell* c = r.find(key, kW1, kRef);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->fingerprint, kA);
  EXPECT_EQ(c->nodes, 2);
  EXPECT_EQ(c->of, 3);
  EXPECT_EQ(c->at, "2026-12-01T10:00:00Z") << "the fleet's start: its earliest node's";
  EXPECT_EQ(c->tool_version, "0.1.0");
  // What it holds reads back as written.
  Reference back;
  ASSERT_TRUE(reference_from_json(to_json(r), &back).is_ok());
  EXPECT_EQ(to_json(back), to_json(r));

  // No majority of two: nothing known. A node alone with its key: nothing known of that key.
  nodes = fleet_of(3);
  nodes[1].probe.observations[0] = obs(kW1, {kC, kC});
  nodes[2].probe.observations[0] = obs(kW1, {kD, kD});
  EXPECT_EQ(reference_of_fleet(nodes).find(key, kW1, kRef), nullptr);
  nodes = fleet_of(3);
  nodes[2].key["libraries.glibc"] = "2.99";
  EXPECT_EQ(reference_of_fleet(nodes).keys.count(fleet_key_hash(nodes[2].key)), 0u);
  // A cell a node varied on, one a node's own run FAILed (bits that agree but miss the oracle), one of a target
  // permitted to vary: no known-good bits.
  nodes = fleet_of(3);
  nodes[0].probe.observations[0] = obs(kW1, {kA, kC});
  EXPECT_EQ(reference_of_fleet(nodes).find(key, kW1, kRef), nullptr);
  nodes = fleet_of(3);
  nodes[1].probe.observations[0].verdict = Verdict::kFail;
  EXPECT_EQ(reference_of_fleet(nodes).find(key, kW1, kRef), nullptr);
  nodes = fleet_of(3);
  for (auto& n : nodes) n.probe.observations[0].details["fleet_promise"] = "nondeterministic";
  EXPECT_EQ(reference_of_fleet(nodes).find(key, kW1, kRef), nullptr);
  // A cell a given reference holds with other bits: the fleet's agreement is the finding, not a reference.
  Reference other = reference_of_fleet(fleet_of(2));
  other.find(key, kW1, kRef)->fingerprint = kD;
  EXPECT_EQ(reference_of_fleet(fleet_of(3), &other).find(key, kW1, kRef), nullptr);
  EXPECT_NE(reference_of_fleet(fleet_of(3), &other).find(key, kW2, kRef), nullptr);
}

// Two nodes, one faulty: the vote names both; the reference names the faulty one only.
TEST(FleetReference, TwoNodesAreToldApartByKnownGoodBits) {
  const Reference known = reference_of_fleet(fleet_of(3));
  auto nodes = fleet_of(2);
  nodes[1].probe.observations[0] = obs(kW1, {kC, kC});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNoMajority, 0), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kNoMajority, 1), 1u);
  f = fleet_consensus(nodes, "d", &known);
  EXPECT_EQ(f.decision, Decision::kFail);
  ASSERT_EQ(f.findings.size(), 1u) << to_json(f)["findings"].dump();
  EXPECT_EQ(f.findings[0].kind, FleetFindingKind::kReference);
  EXPECT_EQ(f.findings[0].rank, 1);
  EXPECT_NE(f.findings[0].detail.find("other bits than the reference: " + kC + " here, " + kA +
                                      " known good: 3 of 3 nodes of this key agreed on it at 2026-12-01T10:00:00Z"),
            std::string::npos)
      << f.findings[0].detail;
  EXPECT_EQ(to_json(f)["nodes"][0]["verdict"], "PASS");
  EXPECT_EQ(to_json(f)["nodes"][0]["cells_agreeing"], 2);
  // Both healthy: both pass, where the vote of two would pass them too.
  EXPECT_EQ(fleet_consensus(fleet_of(2), "d", &known).decision, Decision::kPass);
  // Three nodes agreeing on other bits than the reference: every one of them is named (a key holds the libraries and
  // the build, so the same key computing other bits is a fault, however many nodes share it).
  nodes = fleet_of(3);
  for (auto& n : nodes) n.probe.observations[1] = obs(kW2, {kD, kD});
  f = fleet_consensus(nodes, "d", &known);
  for (int r = 0; r < 3; ++r) EXPECT_EQ(count_kind(f, FleetFindingKind::kReference, r), 1u) << r;
}

// A node alone with its machine key is compared with nobody by the vote; with a reference of its key, its cells are
// judged, and the key finding says so.
TEST(FleetReference, ANodeAloneWithItsKeyIsJudgedAgainstItsKeysReference) {
  const Reference known = reference_of_fleet(fleet_of(2, "2.99"));
  auto nodes = fleet_of(3);
  nodes[2].key["libraries.glibc"] = "2.99";
  nodes[2].probe.observations[0] = obs(kW1, {kC, kC});
  FleetOutcome f = fleet_consensus(nodes, "d");
  EXPECT_EQ(count_kind(f, FleetFindingKind::kKey, 2), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kReference, 2), 0u);
  EXPECT_EQ(to_json(f)["matrix"][2][0], "alone");
  f = fleet_consensus(nodes, "d", &known);
  ASSERT_EQ(count_kind(f, FleetFindingKind::kKey, 2), 1u);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kReference, 2), 1u) << to_json(f)["findings"].dump();
  for (auto& x : f.findings)
    if (x.kind == FleetFindingKind::kKey) EXPECT_NE(x.detail.find("but with the reference's 2 cells of its own key"), std::string::npos) << x.detail;
  // Its cell that agrees with the reference agrees; the one that does not differs.
  for (size_t c = 0; c < f.cells.size(); ++c)
    EXPECT_EQ(f.matrix[2][c], f.cells[c] == kW1 + " @ " + kRef ? "differs" : "agree") << f.cells[c];
  // Known-good bits judge only a cell that promises them: a node alone with its key on a cell that may vary (as its
  // target says) is not judged by a reference that holds bits for it.
  {
    auto varying = nodes;
    varying[2].probe.observations[0].details["fleet_promise"] = "nondeterministic";
    const FleetOutcome v = fleet_consensus(varying, "d", &known);
    EXPECT_EQ(count_kind(v, FleetFindingKind::kReference, 2), 0u) << to_json(v)["findings"].dump();
  }
  // A cell the node did not run to one output is named against the reference too.
  nodes[2].probe.observations[1] = obs(kW2, {kB, kC});
  f = fleet_consensus(nodes, "d", &known);
  EXPECT_EQ(count_kind(f, FleetFindingKind::kVaries, 2), 1u);
}

// Batch invariance's rows computed alone are known-good bits too: a fault that lands only there is named against the
// reference where two nodes could not decide it.
TEST(FleetReference, TheRowsComputedAloneAreJudgedAgainstTheReference) {
  auto three = fleet_of(3);
  for (auto& n : three) n.probe.observations[0].batch = BatchInvariance{2, 0, kB};
  const Reference known = reference_of_fleet(three);
  ASSERT_EQ(known.find(fleet_key_hash(three[0].key), kW1, kRef)->rows_fingerprint, kB);
  auto nodes = fleet_of(2);
  nodes[0].probe.observations[0].batch = BatchInvariance{2, 0, kB};
  nodes[1].probe.observations[0].batch = BatchInvariance{2, 1, kC};
  FleetOutcome f = fleet_consensus(nodes, "d", &known);
  ASSERT_EQ(f.findings.size(), 1u) << to_json(f)["findings"].dump();
  EXPECT_EQ(f.findings[0].rank, 1);
  EXPECT_NE(f.findings[0].detail.find("other bits in the rows computed alone (batch invariance) than the reference: " +
                                      kC + " here, " + kB),
            std::string::npos)
      << f.findings[0].detail;
}

TEST(FleetReference, ReferencesMergeAndAConflictIsNamedNeverOverwritten) {
  Reference a = reference_of_fleet(fleet_of(3));
  const Reference b = reference_of_fleet(fleet_of(2, "2.99"));  // another kind of machine
  auto conflicts = merge_reference(&a, b, "b.json");
  EXPECT_TRUE(conflicts.empty());
  EXPECT_EQ(a.keys.size(), 2u);
  EXPECT_EQ(a.cells.size(), 4u);
  // The same key and cell with other bits: named, and the bits already there stay.
  auto nodes = fleet_of(2);
  for (auto& n : nodes) n.probe.observations[0] = obs(kW1, {kD, kD});
  conflicts = merge_reference(&a, reference_of_fleet(nodes), "c.json");
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].first, kA);
  EXPECT_EQ(conflicts[0].other, kD);
  EXPECT_EQ(conflicts[0].other_source, "c.json");
  EXPECT_EQ(a.find(fleet_key_hash(nodes[0].key), kW1, kRef)->fingerprint, kA);
  // The same bits again: the wider agreement and the earlier time stand.
  auto later = fleet_of(2);
  for (auto& n : later) n.started_at = "2026-12-05T00:00:00Z";
  EXPECT_TRUE(merge_reference(&a, reference_of_fleet(later), "d.json").empty());
  EXPECT_EQ(a.find(fleet_key_hash(nodes[0].key), kW1, kRef)->nodes, 3);
  EXPECT_EQ(a.find(fleet_key_hash(nodes[0].key), kW1, kRef)->at, "2026-12-01T10:00:00Z");
}

TEST(FleetReference, AReferenceThatLiesIsRefusedWithOneLine) {
  const nlohmann::json good = to_json(reference_of_fleet(fleet_of(3)));
  Reference r;
  ASSERT_TRUE(reference_from_json(good, &r).is_ok());
  const std::string key = good["cells"][0]["key"];
  struct Lie {
    const char* says;
    std::function<void(nlohmann::json&)> edit;
  };
  const std::vector<Lie> lies = {
      {"\"note\" is not a field of a reference", [](nlohmann::json& j) { j["note"] = "x"; }},
      {"cells[0].extra is not a field of a reference cell", [](nlohmann::json& j) { j["cells"][0]["extra"] = 1; }},
      {"the key's hash is", [&](nlohmann::json& j) { j["keys"][key]["cpu_model"] = "Xeon"; }},
      {"must be a string (a machine key's fields are text)", [&](nlohmann::json& j) { j["keys"][key]["cores"] = 2; }},
      {"is not one of the reference's keys", [](nlohmann::json& j) { j["cells"][0]["key"] = "0123456789abcdef"; }},
      {"1 of 3 nodes agreed, but known-good bits are a majority of two nodes or more",
       [](nlohmann::json& j) { j["cells"][0]["nodes"] = 1; }},
      {"4 of 3 nodes agreed", [](nlohmann::json& j) { j["cells"][0]["nodes"] = 4; }},
      {"2 of 4 nodes agreed", [](nlohmann::json& j) { j["cells"][0]["nodes"] = 2, j["cells"][0]["of"] = 4; }},
      {"cells[0].fingerprint \"zz\" is not 32 hex digits", [](nlohmann::json& j) { j["cells"][0]["fingerprint"] = "zz"; }},
      {"rows computed alone on reduce", [&](nlohmann::json& j) { j["cells"][0]["rows_fingerprint"] = kB; }},
      {"cells[0].at \"yesterday\" is not a time", [](nlohmann::json& j) { j["cells"][0]["at"] = "yesterday"; }},
      {"cells[0].tool_version \"0.0.9\", but its key was made by 0.1.0",
       [](nlohmann::json& j) { j["cells"][0]["tool_version"] = "0.0.9"; }},
      {"twice (a reference holds each cell once)", [](nlohmann::json& j) { j["cells"].push_back(j["cells"][0]); }},
      {"is not a target spec as detaudit writes one", [](nlohmann::json& j) { j["cells"][0]["target"] = "cpu-ref?x=1"; }},
      {"does not promise the same bits run to run",
       [](nlohmann::json& j) {
         j["cells"][0]["target"] = "cpu?order=atomic&threads=2&isa=auto";
         j["cells"][0]["workload"] = "reduce?op=sum&n=100000&dist=uniform&seed=1";
       }},
      {"has no cell", [](nlohmann::json& j) { j["cells"] = nlohmann::json::array(); }},
      {"cells[0].at \"2999-01-01T00:00:00Z\" is not a time (UTC, ISO 8601) from 2026-12-01T00:00:00Z",
       [](nlohmann::json& j) { j["cells"][0]["at"] = "2999-01-01T00:00:00Z"; }},
      {"cells[0].at \"0001-01-01T00:00:00Z\" is not a time (UTC, ISO 8601) from 2026-12-01T00:00:00Z",
       [](nlohmann::json& j) { j["cells"][0]["at"] = "0001-01-01T00:00:00Z"; }},
      // A GPU target that permits variation by its spec has no known-good bits on any GPU.
      {"does not promise the same bits run to run",
       [](nlohmann::json& j) {
         Spec t;
         ASSERT_TRUE(parse_target("cuda:0?order=atomic", &t).is_ok());
         j["cells"][0]["target"] = t.str();
       }},
      // One product (a batchinv cell and the matmul it computes) on one target with two sets of known-good bits.
      {"is the product of cells[0], whose known-good bits are",
       [](nlohmann::json& j) {
         Spec bi, mm;
         ASSERT_TRUE(parse_workload("batchinv?m=4&n=4&k=8&rows=2", &bi).is_ok());
         ASSERT_TRUE(parse_workload("matmul?m=4&n=4&k=8", &mm).is_ok());
         nlohmann::json a = j["cells"][0], b = j["cells"][0];
         a["workload"] = bi.str(), b["workload"] = mm.str(), b["fingerprint"] = std::string(32, 'e');
         j["cells"] = {a, b};
       }},
      {"cells[0].nodes", [](nlohmann::json& j) { j["cells"][0]["nodes"] = -2; }},
  };
  for (const Lie& l : lies) {
    nlohmann::json j = good;
    l.edit(j);
    const Status st = reference_from_json(j, &r);
    EXPECT_FALSE(st.is_ok()) << l.says;
    EXPECT_NE(st.message().find(l.says), std::string::npos) << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  }
  // From a file: another schema, a key twice, bytes after the document: one line naming the file.
  const fs::path d = fresh_dir("reference-lies");
  fs::create_directories(d);
  const std::string text = good.dump();
  for (const auto& [name, body, says] :
       {std::tuple{"schema.json", std::string(R"({"schema": "detaudit-reference/2", "keys": {}, "cells": []})"),
                   "not a detaudit reference"},
        std::tuple{"twice.json", "{\"schema\": \"detaudit-reference/1\", " + text.substr(1), "twice"},
        std::tuple{"after.json", text + "x", "after"}}) {
    std::ofstream(d / name) << body;
    const Status st = load_reference((d / name).string(), &r);
    EXPECT_FALSE(st.is_ok()) << name;
    EXPECT_NE(st.message().find((d / name).string()), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  }
  fs::remove_all(d);
}

// The tool as a user runs it: three ranks agree and write reference.json; two ranks, one computing other bits (the
// fleet's test hook), cannot be told apart by their vote but are by `fleet report --reference`; `fleet merge` joins
// references and names a conflict.
TEST(FleetReference, AFleetWritesItsReferenceAndALaterOneIsJudgedByIt) {
  const fs::path d = fresh_dir("reference-cli");
  fs::create_directories(d);
  const std::string plan =
      " --targets 'cpu-ref,cpu?order=sequential' --workloads 'reduce?op=sum&n=1000,batchinv?m=4&n=4&k=8&rows=2' "
      "--repeats 2 --no-history --quiet";
  auto ranks = [&](const fs::path& out, int n, const std::string& env) {
    for (int r = 0; r < n; ++r) {
      const auto x = run_with(env, "fleet --rank " + std::to_string(r) + " --ranks " + std::to_string(n) + plan +
                                       " --out " + out.string());
      ASSERT_EQ(x.code, 0) << x.out << x.err;
    }
  };
  ranks(d / "three", 3, "");
  auto r = run_cli("fleet report " + (d / "three").string());
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("reference.json: 4 cells its nodes agreed on (1 machine key)"), std::string::npos) << r.out;
  const std::string ref = (d / "three" / "reference.json").string();
  Reference known;
  ASSERT_TRUE(load_reference(ref, &known).is_ok());
  ASSERT_EQ(known.cells.size(), 4u);
  for (auto& c : known.cells) EXPECT_EQ(c.nodes, 3) << c.workload;

  const std::string flip = "DETAUDIT_FLEET_TEST_FLIP='1:reduce?op=sum&n=1000&dist=uniform&seed=1'";
  // A reference agreed at the very second a fleet started is that fleet's own (refused): the later fleet starts in
  // another second, as any real one does (three quick ranks can finish within the second they started).
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  ranks(d / "two", 2, flip);
  r = run_cli("fleet report " + (d / "two").string() + " --format json");
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  size_t undecided = 0;
  for (auto& x : j["fleet"]["findings"]) undecided += x["kind"] == "no_majority";
  EXPECT_EQ(undecided, 4u) << "both nodes, both reduce cells: " << j["fleet"]["findings"].dump();
  r = run_cli("fleet report " + (d / "two").string() + " --reference " + ref + " --format json");
  ASSERT_EQ(r.code, 1) << r.out << r.err;
  j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["fleet"]["findings"].size(), 2u) << j["fleet"]["findings"].dump();
  for (auto& x : j["fleet"]["findings"]) {
    EXPECT_EQ(x["kind"], "reference");
    EXPECT_EQ(x["rank"], 1);
  }
  EXPECT_EQ(j["fleet"]["nodes"][0]["verdict"], "PASS");
  EXPECT_EQ(j["fleet"]["reference"]["judged_by"], ref);
  // The two-node fleet's own reference: the batchinv cells both agreed on, not the reduce cells they did not.
  EXPECT_EQ(j["fleet"]["reference"]["cells"], 2);

  // Merged with itself under another name: no conflict; with a reference whose bits were changed: one conflict, named,
  // exit 1, and the merged file keeps the first file's bits.
  const std::string site = (d / "site.json").string();
  r = run_cli("fleet merge --out " + site + " " + ref + " " + (d / "two" / "reference.json").string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("4 cells, 0 conflicts"), std::string::npos) << r.out;
  nlohmann::json changed = nlohmann::json::parse(slurp(ref));
  const std::string kept = changed["cells"][0]["fingerprint"];
  changed["cells"][0]["fingerprint"] = kD;
  const std::string other = (d / "other.json").string();
  std::ofstream(other) << changed.dump(1) << "\n";
  const std::string site_before = slurp(site);
  // A conflict is for a person to settle: nothing is written, whichever input --out is.
  for (const std::string& order : {site + " " + other, other + " " + site}) {
    r = run_cli("fleet merge --out " + site + " " + order);
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("FAIL conflict"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("nothing written to " + site), std::string::npos) << r.out;
    EXPECT_EQ(slurp(site), site_before) << order;
  }
  EXPECT_NE(r.out.find(kD + " first, " + kept + " in " + site), std::string::npos) << r.out;
  // A reference that is not one, given to fleet report or fleet merge, or named twice: one line, exit 2, nothing judged.
  std::ofstream(d / "bad.json") << R"({"schema": "detaudit-reference/1", "keys": {}, "cells": [], "x": 1})";
  r = run_cli("fleet report " + (d / "two").string() + " --reference " + (d / "bad.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("\"x\" is not a field of a reference"), std::string::npos) << r.err;
  // Judged by its own agreement (a copy of the reference it wrote), a fleet judges nothing: refused.
  fs::copy_file(ref, d / "own.json");
  r = run_cli("fleet report " + (d / "three").string() + " --reference " + (d / "own.json").string());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.err.find("it holds this fleet's own agreement"), std::string::npos) << r.err;
  // The same copy with its time moved back a second: no longer "agreed when this fleet started", but every cell is
  // still this fleet's own agreement, within a run's length of its start: said (WARN), never "judged against it" alone.
  {
    auto j = nlohmann::json::parse(slurp(ref));
    for (auto& c : j["cells"]) {
      const std::string at = c["at"];
      std::tm tm{};
      ::strptime(at.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm);
      const time_t t = ::timegm(&tm) - 1;
      char buf[32];
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", ::gmtime(&t));
      c["at"] = buf;
    }
    std::ofstream(d / "moved.json") << j.dump(1);
  }
  r = run_cli("fleet report " + (d / "three").string() + " --reference " + (d / "moved.json").string());
  EXPECT_EQ(r.code, 0) << r.out << r.err << "(three nodes agree: the vote judged them)";
  EXPECT_NE(r.out.find("WARN reference " + (d / "moved.json").string() + ": every cell the reference holds of this "
                       "fleet's keys (4) is this fleet's own agreement"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("warn=1"), std::string::npos) << r.out;
  // Judged by the very file its consensus writes, a fleet would replace its own reference: refused.
  r = run_cli("fleet report " + (d / "three").string() + " --reference " + ref);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is the reference this fleet writes"), std::string::npos) << r.err;
  r = run_cli("fleet merge --out " + site + " " + ref + " " + ref);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("named twice"), std::string::npos) << r.err;
  // A rank refuses a bad reference before it runs anything.
  r = run_cli("fleet --rank 0 --ranks 1" + plan + " --reference " + (d / "bad.json").string() + " --out " +
              (d / "refused").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_FALSE(fs::exists(d / "refused" / "ranks")) << "nothing ran";
  // The merge's output is never written over a file that is not a reference.
  std::ofstream(d / "notes.txt") << "mine";
  r = run_cli("fleet merge --out " + (d / "notes.txt").string() + " " + ref);
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(slurp(d / "notes.txt"), "mine");
  fs::remove_all(d);
}

}  // namespace
}  // namespace detaudit
