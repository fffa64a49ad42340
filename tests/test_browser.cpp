// The HTML reports in a real browser: headless Chromium (Debian's `chromium`, installed by
// scripts/setup-debian.sh) loads a probe report and a training report written by write_reports and
// dumps the DOM it built. No console message, every inline SVG figure parsed, the verdict shown.
// Without chromium this test fails: a report nobody checked in a browser is not a passing report.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_helpers.hpp"
#include "report/train_report.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::slurp;
namespace fs = std::filesystem;

namespace {

bool have_chromium() { return std::system("command -v chromium >/dev/null 2>&1") == 0; }

struct Page {
  int code = -1;
  std::string dom, log;
};

// Loads file://path in headless Chromium: the serialised DOM after load, and Chromium's log.
Page load(const fs::path& page, const fs::path& work) {
  fs::create_directories(work);
  const fs::path out = work / "dom.html", err = work / "log.txt";
  const std::string cmd = fmt::format(
      "timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir='{}' "
      "--enable-logging=stderr --v=0 --dump-dom 'file://{}' >'{}' 2>'{}'",
      (work / "profile").string(), fs::absolute(page).string(), out.string(), err.string());
  const int st = std::system(cmd.c_str());
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp(out), slurp(err)};
}

// What the page itself said on the console: Chromium logs each message as "...:CONSOLE(line)] ..."
// (console.error, console.log) and uncaught exceptions as "Uncaught ...".
std::vector<std::string> console_messages(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find(":CONSOLE") != std::string::npos || line.find("Uncaught") != std::string::npos) out.push_back(line);
  return out;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

Observation obs(const std::string& w, const std::string& t, const char* verdict, int distinct) {
  const std::string why = std::string(verdict) == "PASS" ? "" : std::string("why it is ") + verdict;
  if (std::string(verdict) == "SKIP") {
    Observation o = test::not_run(w, t, ObsStatus::kSkipped, "no CUDA device", 5);
    o.verdict = test::verdict_named(verdict);
    o.verdict_reason = why;
    return o;
  }
  std::vector<std::string> fps;
  for (int i = 0; i < 5; ++i) fps.push_back(fmt::format("{:032x}", i < distinct ? i : 0));
  Observation o = test::ran(w, t, std::move(fps));
  o.verdict = test::verdict_named(verdict);
  o.verdict_reason = why;
  OracleDistance d;
  d.max_ulp = 12;
  d.err_ratio = std::string(verdict) == "FAIL" ? 7.5 : 0.02;
  d.agree_bits = 20;
  d.bound_k = 256;
  d.ratio_hist = std::vector<uint64_t>(kRatioBuckets, 0);
  d.ratio_hist[4] = 900;
  d.ratio_hist[14] = 3;
  o.oracle = d;
  o.seconds = {0.001, 0.002, 0.001, 0.001, 0.003};
  return o;
}

Results probe_results() {
  Results r;
  r.command = "detaudit probe --suite quick";
  r.started_at = "2026-12-01T00:00:00Z";
  r.finished_at = "2026-12-01T00:01:00Z";
  r.plan = {{"suite", "quick"}, {"repeats", 5}};
  r.machine = {{"hostname", "browser-test"}, {"cpu_model", "a CPU"}, {"cores", 2}};
  const std::vector<std::string> ws = {"matmul?m=64&n=64&k=64", "reduce?op=sum&n=1000", "conv2d?n=1&c=2&h=8&w=8&k=2"};
  for (auto& w : ws) {
    r.observations.push_back(obs(w, "cpu?order=sequential&threads=1", "PASS", 1));
    r.observations.push_back(obs(w, "cpu?order=atomic&threads=2", w == ws[1] ? "EXPECTED" : "PASS", w == ws[1] ? 3 : 1));
    r.observations.push_back(obs(w, "cuda:0?order=tree", "SKIP", 0));
  }
  r.observations[0].verdict = Verdict::kFail;  // sequential's matmul: error beyond the bound
  r.observations[0].verdict_reason = "why it is FAIL";
  r.observations[0].oracle->err_ratio = 7.5;
  return r;
}

Results training_results() {
  Results r;
  r.command = "detaudit train autoencoder --seeds 2";
  r.started_at = "2026-12-01T00:00:00Z";
  r.finished_at = "2026-12-01T00:02:00Z";
  r.plan = {{"design", {{"design", "sony2021"}, {"model", "autoencoder"}, {"seeds", 2}, {"batches", 30}, {"window", 5}}}};
  r.machine = {{"hostname", "browser-test"}};
  const char* target[] = {"cpu?order=atomic&threads=2&isa=auto", "cpu?order=blocked&threads=2&isa=auto"};
  for (const char* c : {"a", "b", "c", "d"})
    for (int seed = 0; seed < 2; ++seed) {
      TrainingRun t;
      for (int i = 1; i <= 30; ++i) t.curve.push_back(0.08 / (1.0 + 0.05 * i) + 0.001 * seed);
      const bool det = std::string(c) == "b" || std::string(c) == "d";
      t.status = ObsStatus::kOk;
      t.condition = c;
      t.target = target[det ? 1 : 0];
      t.seed = uint64_t(seed);
      t.final_loss = t.curve.back();
      r.training.push_back(t);
    }
  r.analysis = {
      {"table",
       {{{"condition", "d"}, {"target", target[1]}, {"runs", 2}, {"mean", 0.05}, {"std", 0.0}, {"bitwise_identical", true},
         {"distinct_weights", 1}, {"distinct_curves", 1}}}},
      {"variance",
       {{{"condition", "a"}, {"targets", {target[0]}}, {"seeds", 2}, {"replicates", 1},
         {"shares", {{"target", 0.0}, {"seed", 0.9}, {"interaction", 0.0}, {"residual", 0.1}}},
         {"components", {{"target", 0.0}, {"seed", 1e-6}, {"interaction", 0.0}, {"residual", 1e-7}}}}}}};
  return r;
}

struct Checked {
  Page page;
  size_t figures_in_file = 0;
};

Checked render_and_load(const Results& r, const std::string& name) {
  const fs::path dir = fresh_dir("browser-" + name);
  fs::create_directories(dir);
  std::string err;
  EXPECT_TRUE(succeeded(write_reports(dir.string(), r), &err)) << err;
  Checked c;
  c.figures_in_file = count(slurp(dir / "report.html"), "<svg ");
  c.page = load(dir / "report.html", dir / "chromium");
  return c;
}

}  // namespace

TEST(Browser, ReportsRenderInHeadlessChromium) {
  if (!have_chromium()) FAIL() << "chromium missing: run scripts/setup-debian.sh";

  // The detector first: a page that logs an error and throws is caught.
  const fs::path bad_dir = fresh_dir("browser-broken");
  fs::create_directories(bad_dir);
  std::ofstream(bad_dir / "broken.html")
      << "<!DOCTYPE html><html><body><p>broken</p><script>console.error('boom'); no_such_function();</script></body></html>";
  const Page bad = load(bad_dir / "broken.html", bad_dir / "chromium");
  ASSERT_EQ(bad.code, 0) << bad.log;
  ASSERT_NE(bad.dom.find("<p>broken</p>"), std::string::npos) << "chromium dumped no DOM: " << bad.log;
  const auto bad_messages = console_messages(bad.log);
  EXPECT_EQ(bad_messages.size(), 2u) << bad.log;
  EXPECT_NE(bad.log.find("Uncaught ReferenceError: no_such_function is not defined"), std::string::npos) << bad.log;

  // The probe report: heatmap, per-target strip, error histograms of the failing cell.
  const Checked probe = render_and_load(probe_results(), "probe");
  ASSERT_EQ(probe.page.code, 0) << probe.page.log;
  EXPECT_TRUE(console_messages(probe.page.log).empty()) << probe.page.log;
  EXPECT_EQ(probe.figures_in_file, 3u);
  EXPECT_EQ(count(probe.page.dom, "<svg "), 3u) << "every figure parsed into the DOM";
  EXPECT_EQ(count(probe.page.dom, "</svg>"), 3u);
  EXPECT_NE(probe.page.dom.find("<h2>Verdict</h2>"), std::string::npos);
  EXPECT_NE(probe.page.dom.find("<strong>1 FAIL</strong>: 1 of 9 cells broke their target's promise."), std::string::npos);
  EXPECT_NE(probe.page.dom.find("why it is FAIL"), std::string::npos);
  EXPECT_NE(probe.page.dom.find("<summary>EXPECTED: 1 cell behaved as its target promises"), std::string::npos);

  // The training report: final loss per condition, variance shares, learning curves in four panels.
  const Checked train = render_and_load(training_results(), "train");
  ASSERT_EQ(train.page.code, 0) << train.page.log;
  EXPECT_TRUE(console_messages(train.page.log).empty()) << train.page.log;
  EXPECT_EQ(train.figures_in_file, 3u);
  EXPECT_EQ(count(train.page.dom, "<svg "), 3u);
  EXPECT_EQ(count(train.page.dom, "class=\"facet-title\""), 4u) << "one panel per condition";
  EXPECT_NE(train.page.dom.find("<h2>Training verdict</h2>"), std::string::npos);
  EXPECT_NE(train.page.dom.find("bitwise identical, standard deviation exactly 0"), std::string::npos);
  EXPECT_NE(train.page.dom.find("<code>detaudit train autoencoder --seeds 2</code>"), std::string::npos)
      << "the command line is shown";
  for (const char* name : {"browser-broken", "browser-probe", "browser-train"}) fs::remove_all(fresh_dir(name));
}
