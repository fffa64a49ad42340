// `detaudit diverge` (suites/diverge.hpp) on a tiny generated data set (64 images of 28 x 28, batch 8, 3
// steps): two forced atomic completion orders part at a reduction whose inputs matched; order=blocked
// twice never parts; a 1-ULP change planted in one layer's output is found at exactly that step and
// layer; the traces compare offline to the same answer; and bad input (a truncated trace, traces of
// different designs, an unknown target, a GPU target without a GPU) exits 2 with one line. No test
// relies on thread timing: the nondeterminism is the forced order of CpuNativeOptions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cpu/native.hpp"
#include "kernels/generator.hpp"
#include "suites/diverge.hpp"
#include "tests/cli_helpers.hpp"
#include "tests/interrupt_scope.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;
using cli_test::fresh_dir;
using cli_test::run_cli;
using cli_test::slurp;
using cli_test::write_idx;

constexpr int kImages = 64, kBatch = 8, kSteps = 3;

const Dataset& tiny_data() {
  static Dataset d = [] {
    Dataset out;
    out.count = kImages, out.rows = 28, out.cols = 28;
    out.pixels.assign(size_t(kImages) * 28 * 28, 0);
    out.labels.assign(size_t(kImages), 0);
    for (int i = 0; i < kImages; ++i) {  // bright rectangles on black, as tests/test_inputs.hpp
      const uint64_t b = counter_bits(11, 0, uint64_t(i));
      const int r0 = int(b % 14), c0 = int((b >> 8) % 14), h = 6 + int((b >> 16) % 8), w = 6 + int((b >> 24) % 8);
      for (int r = r0; r < r0 + h; ++r)
        for (int c = c0; c < c0 + w; ++c) out.pixels[(size_t(i) * 28 + r) * 28 + c] = uint8_t(128 + (b >> 32) % 128);
    }
    return out;
  }();
  return d;
}

BackendFactory native(ReduceOrder order, uint64_t forced_seed = 0) {
  return [order, forced_seed]() -> BackendOr {
    CpuNativeOptions o;
    o.threads = 2;
    o.order = order;
    o.forced_atomic_order_seed = forced_seed;
    return make_cpu_native(o);
  };
}

const fs::path& dir() {
  static fs::path d = [] {
    fs::path p = fresh_dir("diverge");
    fs::create_directories(p);
    return p;
  }();
  return d;
}

// The suite's directory goes when the program ends.
struct RemoveDir : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir(), ec);
  }
};
[[maybe_unused]] const auto* const kRemoveDir = ::testing::AddGlobalTestEnvironment(new RemoveDir);

DivergeOptions options(BackendFactory a, BackendFactory b, const std::string& trace_prefix) {
  DivergeOptions o;
  o.make_a = std::move(a);
  o.make_b = std::move(b);
  o.data = &tiny_data();
  o.train.batches = kSteps;
  o.train.batch_size = kBatch;
  if (!trace_prefix.empty()) {
    o.trace_a = (dir() / (trace_prefix + "-a.jsonl")).string();
    o.trace_b = (dir() / (trace_prefix + "-b.jsonl")).string();
  }
  return o;
}

struct Outcome {
  DivergeOptions opt;
  DivergeResult result;
};

// Each computed once for the suite: the forced atomic orders 1 and 2, and blocked twice.
const Outcome& atomic_run() {
  static Outcome o = [] {
    Outcome x{options(native(ReduceOrder::kAtomic, 1), native(ReduceOrder::kAtomic, 2), "atomic"), {}};
    x.opt.target_a = "cpu?order=atomic&threads=2 (forced order 1)";
    x.opt.target_b = "cpu?order=atomic&threads=2 (forced order 2)";
    Status st = run_diverge(x.opt, &x.result);
    EXPECT_TRUE(st) << st.message();
    return x;
  }();
  return o;
}
const Outcome& blocked_run() {
  static Outcome o = [] {
    Outcome x{options(native(ReduceOrder::kBlocked), native(ReduceOrder::kBlocked), "blocked"), {}};
    Status st = run_diverge(x.opt, &x.result);
    EXPECT_TRUE(st) << st.message();
    return x;
  }();
  return o;
}

std::vector<nlohmann::json> records_of(const std::string& path) {
  std::vector<nlohmann::json> v;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == "record") v.push_back(j);
  }
  return v;
}

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == s.size() - 1;
}

TEST(Diverge, ForcedAtomicOrdersPartAtAReductionWhoseInputsMatched) {
  const Outcome& o = atomic_run();
  const DivergeResult& r = o.result;
  ASSERT_TRUE(r.first) << r.summary();
  EXPECT_EQ(r.decision(), Decision::kFail);
  const FirstDivergence& f = *r.first;
  EXPECT_TRUE(f.op.reduction) << f.a.where() << ": " << f.op.op;
  ASSERT_TRUE(f.distance);
  EXPECT_GT(f.distance->max_ulp, 0u);
  EXPECT_GT(f.distance->mismatched, 0u);
  EXPECT_GT(f.distance->rel_l2, 0.0);
  EXPECT_EQ(r.summary().rfind("diverged at step " + std::to_string(f.a.step) + ", layer " + std::to_string(f.a.layer) +
                                  " (" + f.a.name + "), pass " + f.a.pass + ":",
                              0),
            0u)
      << r.summary();
  // Every record before it is bit-identical in both traces, this one is not.
  const auto a = records_of(o.opt.trace_a), b = records_of(o.opt.trace_b);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_LT(f.equal_before, a.size());
  for (size_t i = 0; i < f.equal_before; ++i) ASSERT_EQ(a[i]["fp"], b[i]["fp"]) << a[i].dump();
  const auto& ra = a[f.equal_before];
  EXPECT_NE(ra["fp"], b[f.equal_before]["fp"]);
  EXPECT_EQ(ra["step"], f.a.step);
  EXPECT_EQ(ra["layer"], f.a.layer);
  EXPECT_EQ(ra["tensor"], f.a.tensor);
  // The runs go on to the end and the difference shows in the weights.
  EXPECT_EQ(r.steps, kSteps);
  ASSERT_EQ(r.weight_l2.size(), size_t(kSteps));
  EXPECT_GT(r.weight_l2.back(), 0.0);
  // The settings that decide the reduction order are reported.
  bool order = false;
  for (auto& [k, v] : r.a.details) order |= k == "order" && v == "atomic";
  EXPECT_TRUE(order);
}

TEST(Diverge, BlockedTwiceNeverParts) {
  const DivergeResult& r = blocked_run().result;
  EXPECT_FALSE(r.first);
  EXPECT_EQ(r.decision(), Decision::kPass);
  EXPECT_EQ(r.summary(), "no divergence in 3 steps");
  EXPECT_GT(r.records, size_t(kSteps) * 16);
  for (double w : r.weight_l2) EXPECT_EQ(w, 0.0);
  for (double g : r.loss_gap) EXPECT_EQ(g, 0.0);
  for (size_t i = 0; i < r.loss_a.size(); ++i) EXPECT_EQ(r.loss_a[i], r.loss_b[i]);
}

TEST(Diverge, PlantedOneUlpIsFoundAtItsStepAndLayer) {
  constexpr int kStep = 1;
  constexpr size_t kLayer = 3;  // the second conv2d
  DivergeOptions o = options(native(ReduceOrder::kBlocked), native(ReduceOrder::kBlocked), "");
  int planted = 0;
  o.perturb = [&](int step, size_t layer, LayerPass pass, const char* tensor, Tensor& t) -> Status {
    if (step != kStep || layer != kLayer || pass != LayerPass::kForward) return Status::ok();
    std::vector<float> h;
    DETAUDIT_RETURN_IF_ERROR(t.download(&h));
    h[17] = std::nextafter(h[17], INFINITY);
    ++planted;
    return t.upload(h);
  };
  DivergeResult r;
  Status st = run_diverge(o, &r);
  ASSERT_TRUE(st) << st.message();
  EXPECT_EQ(planted, 1);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->a.step, kStep);
  EXPECT_EQ(r.first->a.layer, int(kLayer));
  EXPECT_EQ(r.first->a.name, "conv2d");
  EXPECT_EQ(r.first->a.pass, "forward");
  EXPECT_EQ(r.first->a.tensor, "y");
  ASSERT_TRUE(r.first->distance);
  EXPECT_EQ(r.first->distance->max_ulp, 1u);
  EXPECT_EQ(r.first->distance->mismatched, 1u);
  EXPECT_EQ(r.loss_gap[0], 0.0) << "nothing differs before the planted step";
  EXPECT_EQ(r.weight_l2[0], 0.0);
}

TEST(Diverge, OfflineTracesGiveTheSameAnswer) {
  const Outcome& at = atomic_run();
  DivergeResult r;
  Status st = compare_traces(at.opt.trace_a, at.opt.trace_b, &r);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_TRUE(r.offline);
  ASSERT_TRUE(r.first);
  const FirstDivergence &on = *at.result.first, &off = *r.first;
  EXPECT_TRUE(off.a.same_place(on.a)) << off.a.where() << " vs " << on.a.where();
  EXPECT_EQ(off.equal_before, on.equal_before);
  EXPECT_EQ(off.a.fp, on.a.fp);
  EXPECT_EQ(off.b.fp, on.b.fp);
  EXPECT_FALSE(off.distance) << "offline: fingerprints only";
  EXPECT_NE(r.summary().find("fingerprints only"), std::string::npos);
  EXPECT_EQ(r.loss_gap, at.result.loss_gap);

  const Outcome& bl = blocked_run();
  DivergeResult n;
  st = compare_traces(bl.opt.trace_a, bl.opt.trace_b, &n);
  ASSERT_TRUE(st.is_ok()) << st.message();
  EXPECT_FALSE(n.first);
  EXPECT_EQ(n.summary(), "no divergence in 3 steps");

  // Through the CLI, with the reports written.
  const fs::path out = dir() / "offline-out";
  auto c = run_cli("diverge --trace " + at.opt.trace_a + " --trace " + at.opt.trace_b + " --out " + out.string());
  EXPECT_EQ(c.code, 1) << c.err;
  EXPECT_EQ(c.out.rfind("diverged at step ", 0), 0u) << c.out;
  for (const char* f : {"diverge.json", "diverge.md", "diverge.html", "diverge.svg"}) EXPECT_TRUE(fs::exists(out / f)) << f;
  auto j = nlohmann::json::parse(slurp(out / "diverge.json"));
  EXPECT_EQ(j["diverged"], true);
  EXPECT_EQ(j["first"]["step"], on.a.step);
  EXPECT_NE(slurp(out / "diverge.html").find("<svg"), std::string::npos);
  c = run_cli("diverge --trace " + bl.opt.trace_a + " --trace " + bl.opt.trace_b + " --out " + out.string());
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out.rfind("no divergence in 3 steps\n", 0), 0u) << c.out;
  // The first run's plot is not left beside a report that says nothing diverged.
  EXPECT_FALSE(fs::exists(out / "diverge.svg"));
}

TEST(Diverge, AFailureInOneRunStopsBoth) {
  // B fails in the middle of step 1 (A waits at the same record), then B fails before it starts.
  DivergeOptions o = options(native(ReduceOrder::kBlocked), native(ReduceOrder::kBlocked), "");
  o.perturb = [](int step, size_t layer, LayerPass, const char*, Tensor&) {
    return step == 1 && layer == 5 ? Status::invalid("planted failure") : Status::ok();
  };
  DivergeResult r;
  Status st = run_diverge(o, &r);
  EXPECT_EQ(st.code(), Status::Code::kInvalid);
  EXPECT_EQ(st.message(), "planted failure");
  o.perturb = nullptr;
  o.make_b = []() -> BackendOr { return Status::unavailable("no such device"); };
  st = run_diverge(o, &r);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(), "no such device");
}

// A run that failed or was interrupted leaves no partial trace: the traces are written under a temporary
// name and renamed into place when both runs finished, so an earlier run's complete traces stay as they were.
TEST(Diverge, AnInterruptedOrFailedRunLeavesTheEarlierTracesWhole) {
  DivergeOptions o = options(native(ReduceOrder::kBlocked), native(ReduceOrder::kBlocked), "kept");
  DivergeResult r;
  ASSERT_TRUE(run_diverge(o, &r).is_ok());
  const std::string a = slurp(o.trace_a), b = slurp(o.trace_b);
  ASSERT_NE(a.find("\"kind\":\"end\""), std::string::npos);
  auto leftovers = [&] {
    int n = 0;
    for (auto& e : fs::directory_iterator(dir())) n += e.path().filename().string().find(".tmp.") != std::string::npos;
    return n;
  };
  {
    test::InterruptScope interrupts;
    o.perturb = [](int step, size_t layer, LayerPass, const char*, Tensor&) {
      if (step == 1 && layer == 0) ::raise(SIGINT);  // Ctrl-C in the middle of step 1
      return Status::ok();
    };
    EXPECT_EQ(run_diverge(o, &r).code(), Status::Code::kInterrupted);
  }
  EXPECT_EQ(slurp(o.trace_a), a) << "an interrupted run replaced trace A";
  EXPECT_EQ(slurp(o.trace_b), b) << "an interrupted run replaced trace B";
  EXPECT_EQ(leftovers(), 0);
  o.perturb = [](int step, size_t layer, LayerPass, const char*, Tensor&) {
    return step == 2 && layer == 3 ? Status::invalid("planted failure") : Status::ok();
  };
  EXPECT_EQ(run_diverge(o, &r).code(), Status::Code::kInvalid);
  EXPECT_EQ(slurp(o.trace_a), a);
  EXPECT_EQ(slurp(o.trace_b), b);
  EXPECT_EQ(leftovers(), 0);
  // A run that finishes replaces them (here by the same bits).
  o.perturb = nullptr;
  ASSERT_TRUE(run_diverge(o, &r).is_ok());
  EXPECT_EQ(slurp(o.trace_a), a);
  EXPECT_EQ(leftovers(), 0);
}

TEST(Diverge, BadInputExitsTwoWithOneLine) {
  const Outcome& bl = blocked_run();
  const std::string good = slurp(bl.opt.trace_b);

  // A truncated last line.
  const fs::path cut = dir() / "cut.jsonl";
  std::ofstream(cut) << good.substr(0, good.size() - 20);
  DivergeResult r;
  Status st = compare_traces(bl.opt.trace_a, cut.string(), &r);
  EXPECT_FALSE(st.is_ok());
  std::string err = st.message();
  EXPECT_NE(err.find(cut.string() + ":"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  auto c = run_cli("diverge --trace " + bl.opt.trace_a + " --trace " + cut.string() + " --out " + (dir() / "o").string());
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(one_line(c.err)) << c.err;
  EXPECT_NE(c.err.find("cut.jsonl:"), std::string::npos) << c.err;

  // One trace named twice compares nothing.
  c = run_cli("diverge --trace " + bl.opt.trace_a + " --trace " + bl.opt.trace_a + " --out " + (dir() / "o").string());
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find("are one trace file: a trace compared with itself compares nothing"), std::string::npos) << c.err;

  // Whole lines, but no end line: the run did not finish.
  const fs::path unfinished = dir() / "unfinished.jsonl";
  std::ofstream(unfinished) << good.substr(0, good.rfind("{\"kind\":\"end\""));
  st = compare_traces(bl.opt.trace_a, unfinished.string(), &r);
  EXPECT_FALSE(st.is_ok());
  err = st.message();
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;

  // Another design: the initial weights' seed in the header changed (a batch size changed is refused by its
  // records, as the header lies below show).
  const fs::path other = dir() / "other-design.jsonl";
  {
    std::istringstream in(good);
    std::string line;
    std::getline(in, line);
    auto h = nlohmann::json::parse(line);
    h["design"]["init_seed"] = h["design"]["init_seed"].get<uint64_t>() + 1;
    std::ofstream f(other);
    f << h.dump() << '\n' << in.rdbuf();
  }
  st = compare_traces(bl.opt.trace_a, other.string(), &r);
  EXPECT_FALSE(st.is_ok());
  err = st.message();
  EXPECT_NE(err.find("different designs: init_seed "), std::string::npos) << err;
  c = run_cli("diverge --trace " + bl.opt.trace_a + " --trace " + other.string() + " --out " + (dir() / "o").string());
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(one_line(c.err)) << c.err;


  // The same design traced by another version of the tool: its ops may compute differently, so the first op that
  // parts would be blamed for the tool's change. Refused, whichever trace is the other version's.
  // (a trace with its header's tool_version set to 0.0.9, the rest as written)
  auto as_version_009 = [&](const std::string& from, const fs::path& to) {
    std::ifstream in(from);
    std::string line;
    std::getline(in, line);
    auto h = nlohmann::json::parse(line);
    h["tool_version"] = "0.0.9";
    std::ofstream f(to);
    f << h.dump() << '\n' << in.rdbuf();
  };
  const fs::path older = dir() / "older-version.jsonl", older_b = dir() / "older-version-b.jsonl";
  as_version_009(bl.opt.trace_a, older);
  as_version_009(bl.opt.trace_b, older_b);
  for (const auto& [x, y] : {std::pair{bl.opt.trace_a, older.string()}, std::pair{older.string(), bl.opt.trace_a}}) {
    c = run_cli("diverge --trace " + x + " --trace " + y + " --out " + (dir() / "o").string());
    EXPECT_EQ(c.code, 2);
    EXPECT_TRUE(one_line(c.err)) << c.err;
    EXPECT_NE(c.err.find("traces written by different detaudit versions"), std::string::npos) << c.err;
    EXPECT_NE(c.err.find("0.0.9"), std::string::npos) << c.err;
  }
  // Two traces of that one other version are compared (the version is the same on both sides).
  st = compare_traces(older.string(), older_b.string(), &r);
  EXPECT_TRUE(st.is_ok()) << st.message();
  // Lines that lie: a key twice in a record, a field no trace has, and a trace cut short after its header
  // with a matching end line (it said "no divergence" over records nobody wrote).
  {
    std::istringstream in(good);
    std::string header, first;
    std::getline(in, header);
    std::getline(in, first);
    const auto rec = nlohmann::json::parse(first);
    const std::string twice = "{\"step\": 99, " + first.substr(1);
    auto extra = rec;
    extra["note"] = "x";
    const nlohmann::json end = {{"kind", "end"}, {"records", 0}, {"steps", nlohmann::json::parse(header)["design"]["steps"]}};
    const std::pair<std::string, std::string> lies[] = {
        {"twice", header + "\n" + twice + "\n"},
        {"extra", header + "\n" + extra.dump() + "\n"},
        {"short", header + "\n" + end.dump() + "\n"},
    };
    const std::string says[] = {"the key \"step\" appears twice", "\"note\" is not a field of a trace's record line",
                                "the trace was cut short or edited"};
    for (size_t i = 0; i < 3; ++i) {
      const fs::path p = dir() / ("lie-" + lies[i].first + ".jsonl");
      std::ofstream(p) << lies[i].second;
      st = compare_traces(bl.opt.trace_a, p.string(), &r);
      EXPECT_FALSE(st.is_ok()) << lies[i].first;
      EXPECT_NE(st.message().find(says[i]), std::string::npos) << st.message();
      c = run_cli("diverge --trace " + bl.opt.trace_a + " --trace " + p.string() + " --out " + (dir() / "o").string());
      EXPECT_EQ(c.code, 2) << lies[i].first << ": " << c.out;
      EXPECT_TRUE(one_line(c.err)) << c.err;
      // Against itself too: a cut trace is no trace, whatever it is compared with.
      EXPECT_FALSE(compare_traces(p.string(), p.string(), &r).is_ok()) << lies[i].first;
    }
    // A header with a field no header has.
    auto h = nlohmann::json::parse(header);
    h["note"] = 1;
    const fs::path noted = dir() / "lie-header.jsonl";
    std::ofstream(noted) << h.dump() << "\n" << good.substr(good.find('\n') + 1);
    st = compare_traces(bl.opt.trace_a, noted.string(), &r);
    EXPECT_NE(st.message().find("\"note\" is not a field of a trace's header"), std::string::npos) << st.message();
    // A header whose version, backend or details are of another kind than a header writes.
    const std::pair<std::function<void(nlohmann::json&)>, const char*> header_lies[] = {
        {[](nlohmann::json& x) { x["tool_version"] = 5; }, "tool_version is missing or not a version"},
        {[](nlohmann::json& x) { x.erase("tool_version"); }, "tool_version is missing or not a version"},
        {[](nlohmann::json& x) { x["tool_version"] = "0.1 (patched)"; }, "tool_version is missing or not a version"},
        {[](nlohmann::json& x) { x["backend"] = 3; }, "the header's backend must be a string"},
        {[](nlohmann::json& x) { x["details"] = {{"isa", 2}}; }, "the header's details must be an object of strings"},
        {[](nlohmann::json& x) { x["design"]["optimizer"] = "lion"; }, "the header's design field optimizer"},
        {[](nlohmann::json& x) { x["design"]["lr"] = -0.5; }, "the header's design field lr"},
        // The autoencoder trains with Adam at 1e-3, in diverge whatever its options.
        {[](nlohmann::json& x) { x["design"]["lr"] = 0.01; }, "the header's design trains with adam at lr 0.01"},
        {[](nlohmann::json& x) { x["design"]["optimizer"] = "sgd"; }, "the header's design trains with sgd at lr"},
        {[](nlohmann::json& x) { x[""] = 1; }, "\"\"\" is not a field of a trace's header"},
        {[](nlohmann::json& x) { x["design"]["data_fingerprint"] = "zz"; }, "the header's design field data_fingerprint"},
        {[](nlohmann::json& x) { x["design"]["layers"] = nlohmann::json::array(); }, "the header's design field layers"},
        // Another batch size than the records ran: the autoencoder's code (32 values an example) says which.
        {[](nlohmann::json& x) { x["design"]["batch_size"] = x["design"]["batch_size"].get<int>() * 2; },
         "but the autoencoder's code of a batch of"},
        // A header that contradicts itself: a target whose details (or backend) are another's, another model.
        {[](nlohmann::json& x) { x["target"] = "cpu?order=atomic&threads=2&isa=auto"; },
         "the header's details.order is \"blocked\", but its target cpu?order=atomic&threads=2&isa=auto runs order=atomic"},
        {[](nlohmann::json& x) { x["backend"] = "cuda:0?order=tree on NVIDIA H200 (sm_90, 132 SMs)"; },
         "the header's backend \"cuda:0?order=tree on NVIDIA H200 (sm_90, 132 SMs)\" is not a description of a cpu backend"},
        {[](nlohmann::json& x) { x["details"]["threads"] = "8"; }, "the header's details.threads is \"8\", but its target"},
        {[](nlohmann::json& x) { x["design"]["model"] = "prednet"; }, "design.model is \"prednet\", but diverge traces the autoencoder"},
        // A target whose backend has no training ops (openblas: no bias add) traced nothing, whatever else it says.
        {[](nlohmann::json& x) { x["target"] = "openblas?threads=2", x["backend"] = "openblas?threads=2"; },
         "the header's target openblas?core=auto&threads=2 does not train"},
        {[](nlohmann::json& x) { x["backend"] = "cpu?order=atomic&threads=2 (isa avx512)"; },
         "runs order=atomic, but its target"},
        {[](nlohmann::json& x) { x["details"]["conv"] = "im2col"; }, "the header's details.conv is \"im2col\""},
        {[](nlohmann::json& x) { x["details"]["conv"] = "winograd"; }, "the header's details.conv is \"winograd\", but its target"},
        {[](nlohmann::json& x) { x["backend"] = "cpu?order=blocked&threads=2&isa=scalar"; },
         "runs as cpu?order=blocked&threads=2"},
        {[](nlohmann::json& x) { x["backend"] = x["backend"].get<std::string>() + "&conv=winograd"; },
         "is not a description of a cpu backend (its spec, then at most one remark in parentheses)"},
        {[](nlohmann::json& x) { x["target"] = x["target"].get<std::string>() + " x"; },
         "is not a target spec (with at most one label in parentheses after it)"},
        {[](nlohmann::json& x) { x["details"]["isa"] = "sse9"; }, "the header's details.isa is \"sse9\", which is no isa of cpu (auto|avx512|avx2|scalar)"},
        {[](nlohmann::json& x) { x["details"]["isa"] = "scalar"; }, "the header's details.isa is \"scalar\", but its backend says (isa "},
    };
    // A record whose tensor size no tensor has, or another size than at the step before (both traces alike:
    // a lie they share is still a lie).
    // So is a record of no layer, pass or tensor of the design, or out of step order.
    const std::pair<std::function<void(nlohmann::json&)>, std::string> record_lies[] = {
        {[](nlohmann::json& x) { x["n"] = 0; }, "record field n is 0"},
        {[](nlohmann::json& x) { x["n"] = uint64_t(1) << 62; }, "record field n is " + std::to_string(uint64_t(1) << 62)},
        {[](nlohmann::json& x) { x["layer"] = 99; }, "record field layer is 99, but the design has"},
        {[](nlohmann::json& x) { x["name"] = "banana"; }, "record field name is \"banana\", but layer"},
        {[](nlohmann::json& x) { x["pass"] = "banana"; }, "record field pass is \"banana\""},
        {[](nlohmann::json& x) { x["tensor"] = "zz"; }, "record field tensor is \"zz\""},
        {[](nlohmann::json& x) { x["step"] = 0; }, "record field step is 0, after a record of step 1"},
        {[](nlohmann::json& x) { x["pass"] = "forward"; }, "record field pass is forward, after a record of pass loss in step 1"},
        // A tensor its pass does not record (the record is the backward pass of a layer without weights).
        {[](nlohmann::json& x) { x["tensor"] = "dw"; }, "record field tensor is dw in the backward pass of layer"},
        {[](nlohmann::json& x) { x["tensor"] = "y"; }, "record field tensor is y in the backward pass of layer"},
        {[](nlohmann::json& x) { x["loss"] = 0.5; }, "record field loss (not the float its fingerprint is)"},
    };
    for (auto& [lie, says] : record_lies) {
      std::istringstream all(good);
      std::string edited_text;
      bool done = false;
      for (std::string l; std::getline(all, l);) {
        auto x = nlohmann::json::parse(l);
        if (!done && x.value("kind", "") == "record" && x.value("step", -1) == 1 && x.value("tensor", "") == "dx") {
          lie(x);
          done = true;
        }
        edited_text += x.dump() + "\n";
      }
      ASSERT_TRUE(done);
      const fs::path record_lie = dir() / "lie-record.jsonl";
      std::ofstream(record_lie) << edited_text;
      st = compare_traces(record_lie.string(), record_lie.string(), &r);
      EXPECT_FALSE(st.is_ok()) << says;
      EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
    }
    // A tensor edited to another size at every step (both traces alike): the autoencoder's own sizes for the batch
    // and the image say what each holds (a layer's output, the last convolution's 144 weights and its one bias).
    const std::tuple<int, const char*, const char*, int64_t> size_lies[] = {
        {0, "forward", "y", -352}, {14, "update", "w", 7 - 144}, {14, "update", "b", 1}};
    for (auto& [layer, pass, tensor, by] : size_lies) {
      std::istringstream all(good);
      std::string edited_text;
      size_t done = 0;
      for (std::string l; std::getline(all, l);) {
        auto x = nlohmann::json::parse(l);
        if (x.value("kind", "") == "record" && x.value("layer", -1) == layer && x.value("pass", "") == pass &&
            x.value("tensor", "") == tensor) {
          x["n"] = x["n"].get<int64_t>() + by;
          ++done;
        }
        edited_text += x.dump() + "\n";
      }
      ASSERT_GT(done, 1u) << pass << " " << tensor;
      const fs::path size_lie = dir() / "lie-size.jsonl";
      std::ofstream(size_lie) << edited_text;
      st = compare_traces(size_lie.string(), size_lie.string(), &r);
      EXPECT_NE(st.message().find(fmt::format("the autoencoder's {} {} of layer {}", pass, tensor, layer)),
                std::string::npos)
          << st.message();
    }
    // Two forward records of a step swapped (both traces alike): each names its layer, but out of the order the
    // network runs them, a divergence between them would be placed at the wrong op.
    {
      std::vector<std::string> lines;
      std::istringstream all(good);
      for (std::string l; std::getline(all, l);) lines.push_back(l);
      size_t at = 0;
      while (at < lines.size() && !(nlohmann::json::parse(lines[at]).value("step", -1) == 1)) ++at;
      ASSERT_LT(at + 1, lines.size());
      ASSERT_EQ(nlohmann::json::parse(lines[at + 1])["pass"], "forward");
      std::swap(lines[at], lines[at + 1]);
      const fs::path swapped = dir() / "lie-order.jsonl";
      std::ofstream out(swapped);
      for (auto& l : lines) out << l << "\n";
      out.close();
      st = compare_traces(swapped.string(), swapped.string(), &r);
      EXPECT_NE(st.message().find("record field layer is 0, after layer 1 in the forward pass of step 1"), std::string::npos)
          << st.message();
    }
    // A loss edited apart from the bits its record's fingerprint is: refused, not shown as a loss gap between
    // equal bits ("no divergence").
    {
      std::istringstream all(good);
      std::string edited_text;
      bool done = false;
      for (std::string l; std::getline(all, l);) {
        auto x = nlohmann::json::parse(l);
        if (!done && x.value("tensor", "") == "value") {
          x["loss"] = 0.5;
          l = x.dump();
          done = true;
        }
        edited_text += l + "\n";
      }
      ASSERT_TRUE(done);
      const fs::path loss_lie = dir() / "lie-loss.jsonl";
      std::ofstream(loss_lie) << edited_text;
      st = compare_traces(bl.opt.trace_a, loss_lie.string(), &r);
      EXPECT_NE(st.message().find("record field loss (not the float its fingerprint is)"), std::string::npos)
          << st.message();
      // A loss blanked (null: no number) beside the fingerprint of a finite one, in both traces alike.
      std::string blanked;
      std::istringstream again(good);
      for (std::string l; std::getline(again, l);) {
        auto x = nlohmann::json::parse(l);
        if (x.value("tensor", "") == "value") l = (x["loss"] = nullptr, x.dump());
        blanked += l + "\n";
      }
      std::ofstream(loss_lie) << blanked;
      st = compare_traces(loss_lie.string(), loss_lie.string(), &r);
      EXPECT_NE(st.message().find("loss (null, but its fingerprint is not the bits of an infinity or a NaN)"),
                std::string::npos)
          << st.message();
    }
    for (auto& [lie, says] : header_lies) {
      auto hl = nlohmann::json::parse(header);
      lie(hl);
      std::ofstream(noted) << hl.dump() << "\n" << good.substr(good.find('\n') + 1);
      st = compare_traces(bl.opt.trace_a, noted.string(), &r);
      EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
    }
    // Cut inside its last step (one record fewer), its end line edited to match.
    std::vector<std::string> lines;
    {
      std::istringstream all(good);
      for (std::string l; std::getline(all, l);) lines.push_back(l);
    }
    auto end_line = nlohmann::json::parse(lines.back());
    end_line["records"] = end_line["records"].get<int>() - 1;
    std::string cut_text;
    for (size_t i = 0; i + 2 < lines.size(); ++i) cut_text += lines[i] + "\n";
    cut_text += end_line.dump() + "\n";
    const fs::path cut_last = dir() / "lie-last-step.jsonl";
    std::ofstream(cut_last) << cut_text;
    st = compare_traces(cut_last.string(), cut_last.string(), &r);
    EXPECT_NE(st.message().find("the trace was cut short or edited"), std::string::npos) << st.message();
    // One layer's forward records taken out of every step, the end line edited to match: the layer would pass by
    // unseen, and a divergence in it be blamed on the next op (a ReLU, whose input was never compared).
    std::string dropped;
    size_t kept = 0;
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      const auto x = nlohmann::json::parse(lines[i]);
      if (x.value("kind", "") == "record" && x["layer"] == 11 && x["pass"] == "forward") continue;
      dropped += lines[i] + "\n";
      kept += x.value("kind", "") == "record";
    }
    auto dropped_end = nlohmann::json::parse(lines.back());
    dropped_end["records"] = kept;
    const fs::path no_layer = dir() / "lie-no-layer.jsonl";
    std::ofstream(no_layer) << dropped << dropped_end.dump() << "\n";
    st = compare_traces(no_layer.string(), no_layer.string(), &r);
    EXPECT_NE(st.message().find("step 0 holds no forward y record of layer 11 (conv2d), which every step of the "
                                "autoencoder makes: the trace was cut short or edited"),
              std::string::npos)
        << st.message();
    const fs::path no_layer_b = dir() / "lie-no-layer-b.jsonl";
    fs::copy_file(no_layer, no_layer_b, fs::copy_options::overwrite_existing);
    c = run_cli("diverge --trace " + no_layer.string() + " --trace " + no_layer_b.string() + " --out " +
                (dir() / "o").string());
    EXPECT_EQ(c.code, 2) << c.out;
    EXPECT_TRUE(one_line(c.err)) << c.err;
    // A network other than the autoencoder's: its first ReLU renamed in the header and in every record of it.
    std::string renamed;
    for (size_t i = 0; i < lines.size(); ++i) {
      auto x = nlohmann::json::parse(lines[i]);
      if (i == 0) x["design"]["layers"][1] = "gelu";
      if (x.value("kind", "") == "record" && x["layer"] == 1) x["name"] = "gelu";
      renamed += x.dump() + "\n";
    }
    std::ofstream(noted) << renamed;
    st = compare_traces(noted.string(), noted.string(), &r);
    EXPECT_NE(st.message().find("lie-header.jsonl:1: the header's design.layers (conv2d,gelu,maxpool"),
              std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("are not the autoencoder's (conv2d,relu,maxpool"), std::string::npos) << st.message();
  }

  // Not a trace at all.
  const fs::path junk = dir() / "junk.jsonl";
  std::ofstream(junk) << "{\"kind\":\"record\"}\n";
  st = compare_traces(junk.string(), bl.opt.trace_b, &r);
  EXPECT_FALSE(st.is_ok());
  err = st.message();
  EXPECT_NE(err.find("junk.jsonl:1:"), std::string::npos) << err;

  // An unknown target, and a GPU target on a machine without a usable GPU (or one that runs it).
  const fs::path data = dir() / "data";
  write_idx(data, 16, 16);
  const std::string common = " --steps 1 --batch-size 8 --data " + data.string() + " --out " + (dir() / "o").string();
  c = run_cli("diverge --targets nosuch" + common);
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(one_line(c.err)) << c.err;
  // A target whose backend does not train is refused before anything is loaded or written.
  c = run_cli("diverge --targets 'cpu?threads=2,openblas'" + common);
  EXPECT_EQ(c.code, 2);
  EXPECT_TRUE(one_line(c.err)) << c.err;
  EXPECT_NE(c.err.find("target openblas?core=auto&threads=1 does not train"), std::string::npos) << c.err;
  EXPECT_FALSE(fs::exists(dir() / "o")) << "nothing written for a refused target";
  c = run_cli("diverge --targets 'cuda:0?order=atomic'" + common);
  EXPECT_TRUE(c.code == 2 ? one_line(c.err) : c.code == 0 || c.code == 1) << c.code << c.err;

  // A good online run through the CLI.
  c = run_cli("diverge --targets 'cpu?order=blocked&threads=2' --steps 2 --batch-size 8 --data " + data.string() +
              " --out " + (dir() / "cli").string());
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("no divergence in 2 steps"), std::string::npos) << c.out;
  EXPECT_TRUE(fs::exists(dir() / "cli" / "trace-a.jsonl"));
  EXPECT_TRUE(fs::exists(dir() / "cli" / "diverge.json"));
  // A run whose report would be refused (a link where diverge.html goes) stops before it runs: the earlier
  // run's traces and report stay as they were.
  const std::string trace_before = slurp(dir() / "cli" / "trace-a.jsonl"), md_before = slurp(dir() / "cli" / "diverge.md");
  fs::create_symlink("/dev/null", dir() / "cli" / "diverge.html.new");
  fs::rename(dir() / "cli" / "diverge.html.new", dir() / "cli" / "diverge.html");
  c = run_cli("diverge --targets 'cpu?order=blocked&threads=2' --steps 3 --batch-size 8 --data " + data.string() +
              " --out " + (dir() / "cli").string());
  EXPECT_EQ(c.code, 2) << c.out;
  EXPECT_NE(c.err.find("diverge.html"), std::string::npos) << c.err;
  EXPECT_EQ(slurp(dir() / "cli" / "trace-a.jsonl"), trace_before);
  EXPECT_EQ(slurp(dir() / "cli" / "diverge.md"), md_before);
}

}  // namespace
}  // namespace detaudit
