// report.md is read in a PR comment: it opens with the verdict and stays under 60,000 characters
// whatever the suite (the quick suite on a machine without a GPU, the full suite with every GPU cell
// run, 2,000 targets); report.html holds everything and grows linearly with the observations.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <fmt/format.h>

#include "report/probe_report.hpp"
#include "report/train_report.hpp"
#include "tests/fixtures.hpp"

using namespace detaudit;

namespace {

Observation observation(const std::string& w, const std::string& t, bool deterministic) {
  Observation o =
      test::ran(w, t, {test::fingerprint('a'), test::fingerprint('a'), test::fingerprint(deterministic ? 'a' : 'b')});
  OracleDistance d;  // no error bound: results of a detaudit before bounds
  d.max_ulp = 2;
  d.max_rel_err = 1e-7;
  d.mismatched = 5;
  o.oracle = d;
  o.seconds = {0.001, 0.002, 0.0015};
  o.describe = "cpu blocked";
  return o;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// An observation as the suites write them, judged: ran with `distinct` outputs of `repeats`, an error
// ratio against the bound, or not run (status and reason).
Observation cell(const std::string& w, const std::string& t, const char* verdict, int distinct = 1, int repeats = 20) {
  std::vector<std::string> fps;
  for (int i = 0; i < repeats; ++i) fps.push_back(fmt::format("{:032x}", i < distinct ? i : 0));
  Observation o = test::ran(w, t, std::move(fps));
  o.verdict = test::verdict_named(verdict);
  OracleDistance d;
  d.max_ulp = 566887;
  d.max_rel_err = 1e-3;
  d.mismatched = 4000;
  d.err_ratio = 0.031;
  d.agree_bits = 21;
  d.bound_k = 1024;
  d.ratio_hist = std::vector<uint64_t>(kRatioBuckets, 0);
  d.ratio_hist[3] = 1000;
  o.oracle = d;
  o.seconds = std::vector<double>(static_cast<size_t>(repeats), 0.0123);
  o.describe = "what ran, in the backend's words, a sentence of some length";
  o.verdict_reason = std::string(verdict) == "PASS" ? "" : "the promise and what was observed, in one line of text";
  return o;
}
Observation not_run(const std::string& w, const std::string& t, ObsStatus st, const std::string& reason,
                    const char* verdict) {
  Observation o = test::not_run(w, t, st, reason, 10);
  o.verdict = test::verdict_named(verdict);
  o.verdict_reason = std::string(verdict) == "SKIP" ? reason : "crash with an unmet requirement: AVX-512F";
  return o;
}

std::vector<std::string> cpu_targets(bool full) {
  std::vector<std::string> t = {"cpu-ref"};
  for (const char* order : {"sequential", "pairwise", "blocked", "atomic"})
    for (int n : {1, 2}) t.push_back(fmt::format("cpu?order={}&threads={}&isa=auto", order, n));
  std::vector<std::string> cores = {"Haswell", "SkylakeX", "Sandybridge", "Nehalem", "Core2", "Bulldozer"};
  if (full)
    cores = {"Haswell",  "Zen",  "SkylakeX", "CooperLake", "Sandybridge", "Nehalem",   "Core2",    "Penryn",
             "Dunnington", "Prescott", "Atom", "Nano", "Barcelona", "Bulldozer", "Excavator"};
  for (auto& c : cores) t.push_back(fmt::format("openblas?core={}&threads=1", c));
  t.push_back("openblas?core=Haswell&threads=2");
  if (full) t.push_back("openblas?core=Haswell&threads=4");
  for (const char* isa : {"SSE41", "AVX", "AVX2", "AVX512_CORE"}) {
    t.push_back(fmt::format("onednn?isa={}&threads=1&layout=plain", isa));
    if (full) t.push_back(fmt::format("onednn?isa={}&threads=1&layout=blocked", isa));
  }
  if (full) {
    t.push_back("onednn?isa=ALL&threads=1&layout=plain");
    t.push_back("onednn?isa=ALL&threads=1&layout=blocked");
    t.push_back("onednn?isa=ALL&threads=2&layout=plain");
    t.push_back("cpu?order=blocked&threads=4&isa=auto");
    t.push_back("cpu?order=atomic&threads=4&isa=auto");
  } else {
    t.push_back("onednn?isa=AVX2&threads=1&layout=blocked");
  }
  return t;
}

// The GPU targets of both suites after `=all` expansion (cublaslt algo x8, cuDNN fwd x8, bwd_data x6,
// bwd_filter x7): 41 of them.
std::vector<std::string> gpu_targets() {
  std::vector<std::string> t = {"cuda:0?order=tree", "cuda:0?order=atomic"};
  for (const char* m : {"math=pedantic&atomics=not_allowed&streams=1&workspace=per_stream",
                        "math=default&atomics=not_allowed&streams=1&workspace=per_stream",
                        "math=tf32&atomics=not_allowed&streams=1&workspace=per_stream",
                        "math=bf16x9&atomics=not_allowed&streams=1&workspace=per_stream",
                        "math=pedantic&atomics=allowed&streams=1&workspace=per_stream",
                        "math=pedantic&atomics=not_allowed&streams=4&workspace=shared",
                        "math=pedantic&atomics=not_allowed&streams=4&workspace=per_stream"})
    t.push_back(std::string("cublas:0?") + m);
  for (int i = 0; i < 8; ++i) t.push_back(fmt::format("cublaslt:0?algo={}", i));
  auto cudnn = [](const std::string& f, const std::string& d, const std::string& b, const char* math, const char* pool) {
    return fmt::format("cudnn:0?fwd_algo={}&bwd_data_algo={}&bwd_filter_algo={}&math={}&pool={}", f, d, b, math, pool);
  };
  t.push_back(cudnn("auto", "auto", "auto", "fma", "deterministic"));
  for (int i = 0; i < 8; ++i) t.push_back(cudnn(std::to_string(i), "auto", "auto", "fma", "deterministic"));
  for (int i = 0; i < 6; ++i) t.push_back(cudnn("auto", std::to_string(i), "auto", "fma", "deterministic"));
  for (int i = 0; i < 7; ++i) t.push_back(cudnn("auto", "auto", std::to_string(i), "fma", "deterministic"));
  t.push_back(cudnn("auto", "auto", "auto", "tf32", "deterministic"));
  t.push_back(cudnn("auto", "auto", "auto", "fma", "nondeterministic"));
  return t;
}

std::vector<std::string> workloads(bool full) {
  std::vector<std::string> w;
  const char* tail = "&dist=uniform&seed=1";
  if (!full) {
    for (const char* s : {"matmul?m=256&n=256&k=515&ta=n&tb=n&dtype=f32", "matmul?m=96&n=80&k=72&ta=t&tb=t&dtype=f32",
                          "matmul?m=128&n=128&k=257&ta=n&tb=n&dtype=f64",
                          "conv2d?n=4&c=16&h=16&w=16&k=32&r=3&s=3&stride=1&pad=1&pass=fwd",
                          "conv2d?n=4&c=16&h=16&w=16&k=32&r=3&s=3&stride=1&pad=1&pass=bwd_data",
                          "conv2d?n=4&c=16&h=16&w=16&k=32&r=3&s=3&stride=1&pad=1&pass=bwd_filter",
                          "conv2d?n=2&c=8&h=15&w=15&k=8&r=3&s=3&stride=2&pad=1&pass=bwd_filter", "reduce?op=sum&n=1000000",
                          "reduce?op=dot&n=1000000", "reduce?op=norm&n=1000000", "reduce?op=softmax&n=256000&cols=1000",
                          "maxpool?n=4&c=16&h=32&w=32&window=3&stride=2&pass=bwd", "batchinv?m=128&n=256&k=256&rows=8"})
      w.push_back(s + std::string(tail));
    return w;
  }
  for (const char* s : {"matmul?m=1024&n=1024&k=1024&ta=n&tb=n&dtype=f32", "matmul?m=515&n=515&k=515&ta=n&tb=n&dtype=f32",
                        "matmul?m=96&n=80&k=72&ta=t&tb=t&dtype=f32", "matmul?m=512&n=512&k=512&ta=n&tb=n&dtype=f64",
                        "matmul?m=64&n=64&k=64&ta=n&tb=n&dtype=f32",
                        "conv2d?n=8&c=32&h=28&w=28&k=64&r=3&s=3&stride=1&pad=1&pass=fwd",
                        "conv2d?n=8&c=32&h=28&w=28&k=64&r=3&s=3&stride=1&pad=1&pass=bwd_data",
                        "conv2d?n=8&c=32&h=28&w=28&k=64&r=3&s=3&stride=1&pad=1&pass=bwd_filter",
                        "conv2d?n=4&c=16&h=31&w=31&k=16&r=5&s=5&stride=2&pad=2&pass=bwd_filter", "reduce?op=sum&n=10000000",
                        "reduce?op=dot&n=10000000", "reduce?op=norm&n=10000000", "reduce?op=softmax&n=1024000&cols=1000",
                        "maxpool?n=8&c=32&h=56&w=56&window=3&stride=2&pass=bwd", "batchinv?m=512&n=512&k=512&rows=16"})
    w.push_back(s + std::string(tail));
  return w;
}

nlohmann::json a_machine(bool gpu) {
  nlohmann::json m = {{"hostname", "vm"},
                      {"os", "Linux 6.18 x86_64"},
                      {"cpu_model", "AMD EPYC"},
                      {"cores", 2},
                      {"cpu_features", {"sse4.1", "avx", "avx2", "fma", "avx512f"}},
                      {"caches", {{{"level", 1}, {"size_bytes", 32768}, {"count", 2}, {"line_bytes", 64}}}},
                      {"libraries",
                       {{"openblas", "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64"},
                        {"onednn", "2.6.3 (git hash N/A) omp"},
                        {"cublas", "13.1.0"},
                        {"cudnn", "9.19.0"}}},
                      {"gpus", nlohmann::json::array()}};
  if (gpu)
    for (int i = 0; i < 8; ++i)
      m["gpus"].push_back({{"index", i}, {"name", "NVIDIA H200"}, {"uuid", fmt::format("GPU-{:032x}", i)},
                           {"compute_capability", "9.0"}, {"sm_count", 132}, {"memory_bytes", 150e9}});
  else
    m["cuda"] = "no CUDA device: cudaGetDeviceCount returned cudaErrorInsufficientDriver (35): CUDA driver version is "
                "insufficient for CUDA runtime version";
  return m;
}

Results run_header(const char* suite, int repeats) {
  Results r;
  r.command = std::string("detaudit probe --suite ") + suite;
  r.tool_commit = "b2550cc7ecf6";
  r.started_at = "2026-12-01T02:41:50Z";
  r.finished_at = "2026-12-01T02:41:59Z";
  r.plan = {{"suite", suite}, {"repeats", repeats}};
  return r;
}

// The quick suite as it runs on a machine without a GPU: the CPU targets judged (atomic's promised
// nondeterminism EXPECTED, Bulldozer's SIGILL EXPECTED), every cell of the 41 GPU targets skipped.
Results quick_without_gpu() {
  Results r = run_header("quick", 10);
  r.machine = a_machine(false);
  const auto ws = workloads(false);
  for (auto& t : cpu_targets(false))
    for (size_t w = 0; w < ws.size(); ++w) {
      if (t.find("Bulldozer") != std::string::npos && w != 9)
        r.observations.push_back(not_run(ws[w], t, ObsStatus::kCrashed, "SIGILL (Illegal instruction)", "EXPECTED"));
      else if (t.rfind("openblas", 0) == 0 && w >= 10 && w <= 11)
        r.observations.push_back(not_run(ws[w], t, ObsStatus::kSkipped, "softmax is not provided by this backend", "SKIP"));
      else if (t.find("atomic&threads=2") != std::string::npos && w >= 7 && w <= 10)
        r.observations.push_back(cell(ws[w], t, "EXPECTED", 4, 10));
      else
        r.observations.push_back(cell(ws[w], t, "PASS", 1, 10));
    }
  const std::string why = "no CUDA device: cudaGetDeviceCount returned cudaErrorInsufficientDriver (35): CUDA driver "
                          "version is insufficient for CUDA runtime version";
  for (auto& t : gpu_targets())
    for (size_t w = 0; w < ws.size(); w += (t.rfind("cudnn", 0) == 0 ? 4 : 1))
      r.observations.push_back(
          not_run(ws[w], t, ObsStatus::kSkipped, t.substr(0, t.find(':')) + ": " + why, "SKIP"));
  return r;
}

// The full suite on a GPU machine with every cell present and run: every target on every workload,
// with failures, promised nondeterminism, warnings, kernel traces, cuDNN claims, batch invariance.
Results full_with_gpu() {
  Results r = run_header("full", 20);
  r.machine = a_machine(true);
  const auto ws = workloads(true);
  auto targets = cpu_targets(true);
  for (auto& t : gpu_targets()) targets.push_back(t);
  size_t k = 0;
  for (auto& t : targets)
    for (auto& w : ws) {
      ++k;
      const char* v = k % 9 == 0 ? "FAIL" : k % 7 == 0 ? "EXPECTED" : k % 11 == 0 ? "WARN" : "PASS";
      Observation o = cell(w, t, v, std::string(v) == "PASS" || std::string(v) == "WARN" ? 1 : 7);
      if (t.rfind("cu", 0) == 0) {
        KernelRecord kr;
        kr.name = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off";
        o.kernels = std::vector<RepeatKernels>(20, std::vector<KernelRecord>{kr, kr});
        o.tracing = "ok";
        o.details["claimed_deterministic"] = k % 2 ? "yes" : "no";
        o.details["algo_name"] = "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM";
      }
      if (w.rfind("batchinv", 0) == 0) o.batch = BatchInvariance{16, static_cast<int>(k % 3)};
      r.observations.push_back(o);
    }
  return r;
}

// The markdown between a heading and the next one.
std::string section(const std::string& md, const std::string& heading) {
  size_t a = md.find("## " + heading + "\n");
  if (a == std::string::npos) return "";
  size_t b = md.find("\n## ", a + 1);
  return md.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

}  // namespace

TEST(ReportSize, LinearInObservationsMatrixOnlyWhenDense) {
  constexpr size_t kN = 2000, kBytesPerObservation = 4096;
  Results sparse;
  sparse.plan = nlohmann::json::object();
  for (size_t i = 0; i < kN; ++i)
    sparse.observations.push_back(observation("reduce?op=sum&n=" + std::to_string(1000 + i),
                                              "cpu?order=atomic&threads=" + std::to_string(i + 1), false));
  Document d = build_report(sparse);
  std::string md = render_markdown(d), html = render_html(d);
  EXPECT_LT(md.size(), kMarkdownLimit) << "2,000 targets still fit a PR comment";
  EXPECT_LT(html.size(), kBytesPerObservation * kN);
  EXPECT_EQ(md.find("| target | w1 |"), std::string::npos) << "no grid for a sparse matrix";
  EXPECT_NE(md.find("| workload | target | result |"), std::string::npos) << "one row per observation instead";
  EXPECT_NE(html.find("<td><code>reduce?op=sum&amp;n=2999</code></td><td><code>cpu?order=atomic&amp;threads=2000</code>"
                      "</td><td class=\"muted\"><strong>2/3</strong> 2 ulp</td>"),
            std::string::npos)
      << "every row in report.html; unjudged results show ULPs and are coloured by status";
  EXPECT_NE(md.find(" more rows (see report.html)"), std::string::npos) << "report.md counts the rows it leaves out";
  EXPECT_NE(html.find("<li>… and 1900 more (see the matrix)</li>"), std::string::npos) << "the verdict lists the first 100";
  EXPECT_EQ(count(html, "<li>nondeterministic: "), 100u);
  EXPECT_GT(count(md, "- nondeterministic: "), 10u);
  EXPECT_NE(md.find(" more (see report.html and the matrix)\n"), std::string::npos) << "past the budget and the cap";

  // A full grid (every target ran every workload) and a small sparse one are drawn as a matrix.
  Results dense;
  dense.plan = nlohmann::json::object();
  for (size_t t = 0; t < 40; ++t)
    for (size_t w = 0; w < 50; ++w)
      dense.observations.push_back(
          observation(fmt::format("w{}", w), fmt::format("t{}", t), (t + w) % 7 != 0));  // (not "w" + string: GCC 12 -Wrestrict)
  std::string dmd = render_markdown(build_report(dense));
  EXPECT_LT(dmd.size(), kMarkdownLimit);
  EXPECT_NE(dmd.find("| target | w1 | w2 |"), std::string::npos);
  EXPECT_NE(dmd.find("- w50: `w49`\n"), std::string::npos);
  Results small;
  small.plan = nlohmann::json::object();
  small.observations = {observation("a", "x", true), observation("b", "y", false), observation("c", "z", true)};
  std::string smd = render_markdown(build_report(small));
  EXPECT_NE(smd.find("| target | w1 | w2 | w3 |"), std::string::npos);
  EXPECT_NE(smd.find("| `x` | 2 ulp | — | — |"), std::string::npos) << smd;
  EXPECT_NE(smd.find("| `y` | — | **2/3** 2 ulp | — |"), std::string::npos) << smd;
}

TEST(ReportSize, QuickSuiteWithoutGpuFitsAPrComment) {
  const Results r = quick_without_gpu();
  ASSERT_EQ(r.observations.size(), 21u * 13u + 17u * 13u + 24u * 4u);
  std::map<std::string, int> n;
  for (auto& o : r.observations) ++n[verdict_text(o.verdict)];
  ASSERT_EQ(n["FAIL"], 0);
  const Document d = build_report(r);
  const std::string md = render_markdown(d), html = render_html(d);
  EXPECT_LT(md.size(), kMarkdownLimit);
  // Verdict first: the run and the machine in two lines, then the headline.
  const size_t verdict = md.find("## Verdict");
  EXPECT_LT(md.find("`detaudit probe --suite quick` · detaudit "), verdict);
  EXPECT_LT(md.find("(commit `b2550cc7ecf6`)"), verdict);
  EXPECT_LT(md.find("Machine: `vm` · AMD EPYC, 2 cores · no GPU (no CUDA device) · cublas 13.1.0, cudnn 9.19.0, onednn 2.6.3, "
                    "openblas 0.3.21"),
            verdict);
  EXPECT_EQ(md.find(fmt::format("**No FAIL**: every promise held in the 590 cells judged ({} PASS, {} EXPECTED, 0 WARN, "
                                 "{} SKIP).",
                                 n["PASS"], n["EXPECTED"], n["SKIP"])),
            md.find('\n', verdict) + 2)
      << section(md, "Verdict");
  EXPECT_NE(html.find("<p class=\"ok\"><strong>No FAIL</strong>"), std::string::npos) << "green";
  EXPECT_NE(md.find(fmt::format("| PASS | FAIL | EXPECTED | WARN | SKIP |\n|---|---|---|---|---|\n| {} | 0 | {} | 0 | {} |",
                                n["PASS"], n["EXPECTED"], n["SKIP"])),
            std::string::npos);
  // EXPECTED is not red: blue cells, a collapsed list.
  EXPECT_NE(html.find("<td class=\"expected\">EXPECTED <strong>4/10</strong> 0.031× 21b</td>"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("<details class=\"expected\"><summary>EXPECTED: {} cells", n["EXPECTED"])),
            std::string::npos);
  EXPECT_EQ(html.find("class=\"bad\""), std::string::npos) << "nothing failed, nothing is red";
  // The 41 all-skipped GPU targets are one line in the matrix section, not 41 rows.
  const std::string mx = section(md, "Determinism matrix");
  const size_t table = mx.find("| target | w1 |");
  const std::string grid = mx.substr(table, mx.find("\n\n", table) - table);
  EXPECT_EQ(grid.find("`cuda:0?order=tree`"), std::string::npos);
  EXPECT_EQ(count(grid, "\n| `"), 21u) << "one row per target that ran something";
  EXPECT_EQ(count(mx, "skipped every workload: no CUDA device: cudaGetDeviceCount"), 1u) << mx;
  EXPECT_NE(mx.find("- 41 targets (317 cells) skipped every workload: no CUDA device"), std::string::npos);
  EXPECT_NE(mx.find("<details><summary>The 41 targets that skipped every workload</summary>"), std::string::npos);
  // The matrix shows the error ratio and bits of agreement, not the ULP count.
  EXPECT_NE(mx.find("| `cpu-ref` | 0.031× 21b |"), std::string::npos) << mx.substr(0, 3000);
  EXPECT_EQ(md.find("566887"), std::string::npos);
  // The timing table is summarised: a row per target, every cell in report.html only.
  const std::string timing = section(md, "Timing");
  EXPECT_EQ(count(timing, "\n| `"), 21u);
  EXPECT_EQ(timing.find("Every cell"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("<summary>Every cell ({})</summary>", n["PASS"] + 4)), std::string::npos)
      << "every cell that ran: the PASS cells and atomic's four";
  // Pictures in HTML only: the heatmap and the per-target strip (nothing failed: no histograms).
  EXPECT_EQ(count(html, "<svg "), 2u);
  EXPECT_EQ(md.find("<svg"), std::string::npos);
  // No placeholder where a figure stood; one closing line says where the figures are.
  EXPECT_EQ(count(md, "(figure"), 0u);
  EXPECT_EQ(count(md, "; see report.html)"), 0u);
  EXPECT_NE(md.find("The 2 figures of this report are in report.html.\n"), std::string::npos);
}

TEST(ReportSize, FullSuiteWithEveryGpuCellRunFitsAPrComment) {
  const Results r = full_with_gpu();
  ASSERT_EQ(r.observations.size(), (39u + 41u) * 15u);
  const Document d = build_report(r);
  const std::string md = render_markdown(d), html = render_html(d);
  EXPECT_LT(md.size(), kMarkdownLimit);
  const size_t verdict = md.find("## Verdict");
  EXPECT_LT(md.find("Machine: `vm` · AMD EPYC, 2 cores · 8 × NVIDIA H200 (CC 9.0, 132 SMs)"), verdict);
  // The FAIL list first, then the counts, then the WARN list.
  const size_t head = md.find("**133 FAIL**: 133 of 1200 cells broke their target's promise.");
  ASSERT_EQ(head, md.find('\n', verdict) + 2) << section(md, "Verdict").substr(0, 2000);
  const size_t first_fail = md.find("\n- `", head), counts = md.find("| PASS | FAIL |", head),
               warn = md.find("**WARN** (cell, reason):", head);
  EXPECT_LT(first_fail, counts);
  EXPECT_LT(counts, warn);
  EXPECT_NE(html.find("<p class=\"bad\"><strong>133 FAIL</strong>"), std::string::npos);
  EXPECT_NE(md.find(" more (see report.html)"), std::string::npos) << "long lists are cut in report.md";
  EXPECT_NE(html.find("<td class=\"bad\"><strong>FAIL</strong> <strong>7/20</strong> 0.031× 21b</td>"), std::string::npos);
  // Every section is still there, in order, the machine last.
  size_t at = 0;
  for (const char* s : {"## Verdict", "## Determinism matrix", "## Error distribution of failing cells",
                        "## Bit-identical groups", "## Claimed vs observed determinism", "## Kernel attribution",
                        "## Batch invariance", "## Timing", "## Machine"}) {
    const size_t p = md.find(s, at);
    EXPECT_NE(p, std::string::npos) << s;
    at = p == std::string::npos ? at : p;
  }
  // Pictures: heatmap, per-target strip, and the error histograms of failing cells.
  EXPECT_EQ(count(html, "<svg "), 3u);
  EXPECT_NE(html.find("133 failing cells with an error histogram (the first 12 drawn)"), std::string::npos);
}

// Whatever results.json holds: hundreds of long target and workload names, every cell failing with a
// long reason, kernel traces, claims, many skip reasons, failed oracles, a huge command line and
// machine description. The markdown budgets hold; report.html has it all.
TEST(ReportSize, PathologicalResultsStillFitAPrComment) {
  Results r = run_header("custom", 20);
  r.command = "detaudit probe --targets " + std::string(5000, 't');
  r.machine = a_machine(true);
  for (int i = 0; i < 200; ++i) r.machine["libraries"][fmt::format("library{:03}", i)] = std::string(300, 'v');
  const std::string pad(120, 'x');
  for (int t = 0; t < 300; ++t)
    for (int w = 0; w < 20; ++w) {
      Observation o = cell(fmt::format("matmul?m={}&{}", w, pad), fmt::format("cudnn:0?algo={}&{}", t, pad), "FAIL", 7);
      o.verdict_reason = fmt::format("reason {} of cell {}: {}", t * 20 + w, w, std::string(300, 'r'));
      KernelRecord kr;
      kr.name = "kernel_" + std::string(200, 'k');
      o.kernels = std::vector<RepeatKernels>(20, std::vector<KernelRecord>{kr});
      o.details["claimed_deterministic"] = "yes";
      o.batch = BatchInvariance{16, 3};
      r.observations.push_back(o);
    }
  for (int t = 0; t < 60; ++t)
    r.observations.push_back(not_run("w", fmt::format("cuda:{}?{}", t, pad), ObsStatus::kSkipped,
                                     fmt::format("reason {} {}", t, std::string(300, 's')), "SKIP"));
  for (int w = 0; w < 50; ++w) r.oracle_failures[fmt::format("w{}{}", w, pad)] = std::string(300, 'o');
  const Document d = build_report(r);
  const std::string md = render_markdown(d), html = render_html(d);
  EXPECT_LT(md.size(), kMarkdownLimit);
  EXPECT_NE(md.find("**6000 FAIL**"), std::string::npos);
  EXPECT_NE(md.find("`detaudit probe --targets ttt"), std::string::npos);
  EXPECT_EQ(md.find(std::string(500, 't')), std::string::npos) << "a huge command line is cut";
  EXPECT_NE(html.find("reason 5999 of cell 19"), std::string::npos) << "report.html has the whole FAIL list";
}
