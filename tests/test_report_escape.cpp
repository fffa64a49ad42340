// Names, reasons and other text from results.json reach the reports escaped: no raw tag, no broken
// table, no injected markup in report.md; and the training sections render whatever the analysis holds.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "report/probe_report.hpp"
#include "report/train_report.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;

namespace {

const std::string kScript = "<script>alert(1)</script>";
const std::vector<std::string> kNasty = {kScript, "a|b", "x`y`z", "two\nlines", "**bold** [l](http://e) _i_ # h",
                                         "tail\\", "<img src=x onerror=alert(1)>|`"};

Observation obs(const std::string& w, const std::string& t, ObsStatus st, const std::string& reason, int distinct) {
  Observation o = st == ObsStatus::kOk
                      ? test::ran(w, t, {test::fingerprint('a'), test::fingerprint(distinct == 1 ? 'a' : 'b')})
                      : test::not_run(w, t, st, reason, 2);
  o.reason = reason;
  o.distinct = distinct;
  o.seconds = {0.001, 0.002};
  o.describe = reason;
  return o;
}

Results nasty_results() {
  Results r;
  r.started_at = kScript;
  r.finished_at = "x|`y`";
  r.command = "detaudit probe --targets '" + kScript + "|`x`'";
  r.tool_commit = "<b>|`";
  r.tool_version = "0.1 **b**";
  r.plan = {{"suite", "s|`<b>`"}, {"repeats", 2}};
  r.machine = {{"hostname", kScript + "|x\ny"},
               {"cpu_model", "cpu`|"},
               {"libraries", {{"lib<i>|", "1.0 <script>"}}},
               {"gpus", {{{"index", 0}, {"name", "H|200 `x`"}, {"uuid", kScript}, {"compute_capability", "<9>"}}}},
               {"cuda", kScript + ": x"}};
  for (size_t i = 0; i < kNasty.size(); ++i) {
    const std::string& s = kNasty[i];
    Observation nd = obs(s, s, ObsStatus::kOk, s, 2);
    KernelRecord k;
    k.name = s;
    nd.kernels = {std::vector<KernelRecord>{k}, std::vector<KernelRecord>{k, k}};
    nd.tracing = s;
    nd.details = {{"claimed_deterministic", "yes"}, {"algo_name", s}, {"corename", s}};
    nd.target = s + "?core=" + s;
    nd.batch = BatchInvariance{4, 1};
    // Judged: the verdict's reason is text from results.json too, shown in the lists and the figures.
    nd.verdict = Verdict::kFail;
    nd.verdict_reason = s;
    OracleDistance dist;
    dist.err_ratio = 3.0;
    dist.agree_bits = 4;
    dist.ratio_hist = std::vector<uint64_t>(kRatioBuckets, 1);
    nd.oracle = dist;
    r.observations.push_back(nd);
    Observation ok = obs(s, "ok-" + s, ObsStatus::kOk, "", 1);
    ok.verdict = i % 2 ? Verdict::kWarn : Verdict::kPass;
    ok.verdict_reason = s;
    r.observations.push_back(ok);
    Observation crash = obs("w" + std::to_string(i), s, ObsStatus::kCrashed, s + " more", 0);
    crash.verdict = Verdict::kExpected;
    crash.verdict_reason = s;
    r.observations.push_back(crash);
    r.observations.push_back(obs("w" + std::to_string(i), "cuda:" + s, ObsStatus::kSkipped, s, 0));
  }
  r.observations.push_back(obs("reduce?op=sum&n=100", "cpu?order=atomic&threads=2", ObsStatus::kOk, "", 2));
  return r;
}

// '|' that are table borders: not escaped by a backslash.
int borders(const std::string& line) {
  int n = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\') ++i;
    else if (line[i] == '|') ++n;
  }
  return n;
}

// Every table row has the header's number of borders, and no '<' is left but the tags the renderer
// writes itself (<code>, and the collapsible <details><summary> with <strong> in a summary).
testing::AssertionResult safe_markdown(const std::string& md) {
  std::istringstream in(md);
  std::string line;
  int header = -1, tables = 0, lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) {
      header = -1;
      continue;
    }
    if (header < 0 && line[0] == '|') {
      header = borders(line);
      ++tables;
    } else if (header >= 0 && (line[0] != '|' || borders(line) != header)) {
      return testing::AssertionFailure() << "line " << lineno << " has " << borders(line) << " borders, header "
                                         << header << ": " << line;
    }
    std::string rest = line;
    for (const char* tag : {"<code>", "</code>", "<details>", "<details open>", "</details>", "<summary>", "</summary>",
                            "<strong>", "</strong>"})
      for (size_t p; (p = rest.find(tag)) != std::string::npos;) rest.erase(p, std::string(tag).size());
    if (rest.find('<') != std::string::npos)
      return testing::AssertionFailure() << "raw '<' on line " << lineno << ": " << line;
  }
  if (tables == 0) return testing::AssertionFailure() << "no table";
  return testing::AssertionSuccess();
}

// The markdown without what it shows literally: `code spans` and backslash-escaped characters.
std::string without_code_spans(const std::string& md) {
  std::string o;
  bool code = false;
  for (size_t i = 0; i < md.size(); ++i) {
    if (md[i] == '\\' && !code) {  // an escaped character is literal (in a code span, so is '\\')
      o += ' ';
      ++i;
    } else if (md[i] == '`') {
      code = !code;
    } else if (!code) {
      o += md[i];
    }
  }
  return o;
}

}  // namespace

TEST(ReportEscape, UntrustedNamesCannotBreakMarkdownOrHtml) {
  Results r = nasty_results();
  Document d = build_report(r);
  std::string md = render_markdown(d), html = render_html(d);
  EXPECT_EQ(md.find("<script"), std::string::npos);
  EXPECT_EQ(md.find("<img"), std::string::npos);
  EXPECT_TRUE(safe_markdown(md));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << "shown, as text";
  // The text is still there, escaped: a backslash-escaped pipe, entities, and no markup of its own.
  EXPECT_NE(md.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(md.find("<code>a\\|b</code>"), std::string::npos) << md;
  std::string outside = without_code_spans(md);
  EXPECT_EQ(outside.find("**bold**"), std::string::npos) << "no injected bold";
  EXPECT_EQ(outside.find("](http"), std::string::npos) << "no injected link";
  EXPECT_EQ(html.find("<strong>bold"), std::string::npos) << "no injected bold in HTML";
  EXPECT_EQ(md.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<b>"), std::string::npos);
  EXPECT_EQ(html.find("<9>"), std::string::npos);
  // The new text paths: the run line, the FAIL list, the figures' labels and tooltips.
  EXPECT_NE(md.find("<code>detaudit probe --targets '&lt;script&gt;"), std::string::npos) << md.substr(0, 600);
  EXPECT_NE(html.find("<title>&lt;script&gt;alert(1)&lt;/script&gt; on &lt;script&gt;"), std::string::npos)
      << "SVG tooltips escaped";
  EXPECT_NE(html.find("<h2>Error distribution of failing cells</h2>"), std::string::npos);
  EXPECT_NE(html.find("<code>x`y`z</code>"), std::string::npos) << "a backtick stays inside its code span";
  // Ordinary specs keep their plain code spans.
  EXPECT_NE(md.find(": `reduce?op=sum&n=100`\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| `cpu?order=atomic&threads=2` |"), std::string::npos) << md;
  EXPECT_NE(html.find("<code>cpu?order=atomic&amp;threads=2</code>"), std::string::npos);
  EXPECT_NE(html.find("<strong>2/2</strong>"), std::string::npos);
}

TEST(ReportEscape, TrainingTextIsEscaped) {
  Results r;
  r.plan = {{"design", {{"design", kScript}, {"model", "m|`"}}}};
  // Typed runs hold only known conditions and statuses; their strings (targets, reasons, keys) are free.
  for (auto& s : kNasty) {
    TrainingRun t;
    t.status = ObsStatus::kError;
    t.target = t.base_target = t.reason = t.key = s;
    t.condition = "a";
    t.seed = 1;
    r.training.push_back(t);
  }
  TrainingRun ok;
  ok.status = ObsStatus::kOk;
  ok.target = kScript;
  ok.condition = "c";
  ok.final_loss = 0.5;
  ok.curve = {1.0, 0.5};
  ok.phases = CurvePhases{kScript, 1, std::nullopt, false, std::nullopt};
  r.training.push_back(ok);
  r.analysis = {{"table", {{{"condition", kScript}, {"target", "a|b"}, {"runs", 2}, {"mean", 0.5}, {"std", 0.0}}}},
                {"variance", {{{"condition", "a|b"}, {"note", kScript}}}},
                {"confounding", {{{"targets", {kScript, "x`"}}, {"hardware", {"a|b", "c\nd"}}, {"attributable_to", kScript}}}},
                {"phases", {{kScript, {{"runs", 1}, {"labels", {{kScript, 1}}}}}}}};
  Document d = build_report(r);
  std::string md = render_markdown(d), html = render_html(d);
  EXPECT_EQ(md.find("<script"), std::string::npos);
  EXPECT_TRUE(safe_markdown(md));
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

// The analysis is free-form JSON: fields of unexpected types are shown as "—", not thrown.
TEST(ReportEscape, TrainingSectionsTolerateAnyAnalysis) {
  Results r;
  TrainingRun t;  // a run with nothing but its status: every other field empty
  t.status = ObsStatus::kOk;
  r.training.push_back(t);
  TrainingRun f;
  f.status = ObsStatus::kTimeout;
  r.training.push_back(f);
  r.plan = {{"design", 5}};
  r.analysis = nlohmann::json::parse(R"({
    "table": [{"condition": 1, "runs": "2", "mean": "x", "std": null, "min": 1.0}, 7],
    "variance": [{"condition": "a", "shares": {"target": "x"}, "bootstrap": {"share_ci": {"seed": [1]}}, "targets": 5},
                 {"note": 3}, "v"],
    "confounding": [{"targets": 5, "hardware": [1, 2]}, 3],
    "phases": {"a": {"labels": {"biphasic": "x"}, "escape_median": 3.0, "escape_q25": "q"}, "b": 1}})");
  std::string md;
  EXPECT_NO_THROW(md = render_markdown(build_report(r)));
  EXPECT_NE(md.find("## Variance components"), std::string::npos);
  r.analysis = {{"table", 5}, {"variance", "x"}, {"confounding", {{"a", 1}}}, {"phases", {1, 2}}};
  EXPECT_NO_THROW(md = render_markdown(build_report(r)));
  r.analysis = 5;
  EXPECT_NO_THROW(md = render_markdown(build_report(r)));
  r.analysis = nlohmann::json::object();
  r.machine = {{"caches", {{{"level", "x"}}, 5}}, {"gpus", {3, {{"name", 5}}}}, {"libraries", 5}};
  EXPECT_NO_THROW(md = render_markdown(build_report(r)));
}

// The plan says what a report is of: a training design stopped before its first run is a training report that says
// no run finished, never a probe report of "0 cells" in a suite its plan does not have.
TEST(ReportKind, ADesignStoppedBeforeItsFirstRunIsATrainingReport) {
  Results r;
  r.started_at = "2026-01-01T00:00:00Z";
  r.plan = {{"kind", "train"},
            {"design", {{"model", "autoencoder"}, {"design", "sony2021"}, {"seeds", 2}, {"batches", 30}, {"window", 20}}},
            {"runs", 4}};
  const std::string md = render_markdown(build_report(r));
  EXPECT_EQ(md.rfind("# detaudit training report", 0), 0u) << md.substr(0, 200);
  EXPECT_NE(md.find("0 runs finished"), std::string::npos) << md;
  EXPECT_EQ(md.find("probe report"), std::string::npos) << md;
  EXPECT_EQ(md.find("Suite `"), std::string::npos) << "a probe's counts in a training design's report";
  EXPECT_EQ(md.find("## Final loss by condition and target"), std::string::npos) << "a table with no row";
  // A probe plan with no cell yet is still a probe's report.
  r.plan = {{"suite", "quick"}, {"targets", nlohmann::json::array()}, {"workloads", nlohmann::json::array()}};
  EXPECT_EQ(render_markdown(build_report(r)).rfind("# detaudit probe report", 0), 0u);
}
