// Bring your own framework: the NPY reader and writer (kernels/npy.hpp), and export / import
// (suites/external.hpp, the `export` and `import` subcommands) end to end: a framework that is in fact one
// of detaudit's own targets, run in-process, must land in that target's bit-identical group with its
// fingerprints; compare and check see it; every bad input exits 2 with one line and writes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/fixtures.hpp"
#include "tests/interrupt_scope.hpp"
#include "kernels/cpu/ref.hpp"
#include "kernels/generator.hpp"
#include "kernels/npy.hpp"
#include "probes/child.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"
#include "contract/cells.hpp"
#include "probes/workload.hpp"
#include "contract/results.hpp"
#include "suites/external.hpp"
#include "tests/cli_helpers.hpp"

namespace fs = std::filesystem;
using namespace detaudit;
using detaudit::cli_test::fresh_dir;
using detaudit::cli_test::run_cli;
using detaudit::cli_test::slurp;

namespace {

Spec W(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_workload(text, &s), &err)) << err;
  return s;
}
Spec T(const std::string& text) {
  Spec s;
  std::string err;
  EXPECT_TRUE(succeeded(parse_target(text, &s), &err)) << err;
  return s;
}

std::string bytes_of(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> npy(const std::string& descr, const std::vector<uint64_t>& shape, const std::vector<float>& v) {
  return npy_encode(descr, shape, v.data(), v.size() * 4);
}
// An .npy file by hand: preamble of `version`, then `header` as it is, then `data` bytes.
std::string raw_npy(const std::string& header, size_t data_bytes, int version = 1) {
  std::string s = std::string("\x93NUMPY", 6) + char(version) + '\0';
  const size_t n = header.size();
  s += char(n & 0xff);
  s += char((n >> 8) & 0xff);
  if (version > 1) s += std::string{char((n >> 16) & 0xff), char(n >> 24)};
  return s + header + std::string(data_bytes, '\0');
}
void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << bytes;
}
Status parse(const std::string& bytes, NpyArray* a) {
  return parse_npy("f.npy", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), a);
}

}  // namespace

// ---- Npy ---------------------------------------------------------------------------------------------

TEST(Npy, WriteReadRoundTripIsNumpysFormat10) {
  const std::vector<float> v = {1, -2.5f, 3, 0.125f, -0.0f, 1e-30f};
  const std::vector<uint8_t> f = npy("<f4", {2, 3}, v);
  // numpy.save's own bytes: version 1.0, the dict, space padding to a multiple of 64, a closing newline.
  const std::string s = bytes_of(f);
  ASSERT_EQ(s.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t hlen = uint8_t(s[8]) | uint8_t(s[9]) << 8;
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_EQ(s[10 + hlen - 1], '\n');
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(s.substr(10, dict.size()), dict);
  NpyArray a;
  ASSERT_TRUE(parse(s, &a).is_ok());
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{2, 3}));
  ASSERT_EQ(a.data.size(), v.size() * 4);
  EXPECT_EQ(std::memcmp(a.data.data(), v.data(), a.data.size()), 0);

  // A scalar (shape ()), a vector ((n,)) and float64 too; and from a file.
  const double d[2] = {0.1, -7};
  ASSERT_TRUE(parse(bytes_of(npy_encode("<f8", {2}, d, 16)), &a).is_ok());
  EXPECT_EQ(a.descr, "<f8");
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{2}));
  EXPECT_EQ(npy_shape_text({2}), "(2,)");
  ASSERT_TRUE(parse(bytes_of(npy("<f4", {}, {42})), &a).is_ok());
  EXPECT_TRUE(a.shape.empty());
  EXPECT_EQ(a.elements(), 1u);
  const fs::path dir = fresh_dir("npy-roundtrip");
  fs::create_directories(dir);
  write_file(dir / "a.npy", s);
  ASSERT_TRUE(read_npy((dir / "a.npy").string(), &a).is_ok());
  EXPECT_EQ(a.shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(a.data.data(), v.data(), a.data.size()), 0);
  fs::remove_all(dir);
}

TEST(Npy, ReadsTheHeaderSpellingsNumpyWrites) {
  NpyArray a;
  // Other key orders and quotes, no trailing comma, version 2.0 (a u32 header length), no 64-byte padding.
  for (const std::string& h : {std::string("{\"shape\": (3,), \"descr\": \"<f4\", \"fortran_order\": False}\n"),
                               std::string("{'fortran_order': False, 'shape': (1, 3, ), 'descr': '<f4'}   \n")}) {
    EXPECT_TRUE(parse(raw_npy(h, 12), &a).is_ok()) << h;
    EXPECT_TRUE(parse(raw_npy(h, 12, 2), &a).is_ok()) << h;
    EXPECT_EQ(a.elements(), 3u);
  }
}

TEST(Npy, BadInputIsOneLineNamingTheFileAndTheProblem) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
  const std::string huge = std::to_string(uint64_t(1) << 40);
  struct Case {
    std::string bytes, says;
  };
  const std::vector<Case> cases = {
      {"", "empty file"},
      {"\x93NUM", "truncated"},
      {"PK\x03\x04 not numpy at all", "not an .npy file"},
      {raw_npy(good, 24).substr(0, 40), "truncated"},                 // inside the header
      {raw_npy(good, 20), "truncated: shape (2, 3) of '<f4' needs 24 bytes of data, the file has 20"},
      {raw_npy(good, 28), "4 bytes after the data"},
      {raw_npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24), "big-endian"},
      {raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", 24), "dtype '<i4'"},
      {raw_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", 24), "Fortran-order"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (" + huge + ", " + huge + "), }\n", 0),
       "more elements than 2^64"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (" + huge + ", 100), }\n", 0), "needs more than"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }\n", 0), "64 bits"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }\n", 24), "(n,), not (n)"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-6,), }\n", 24), "non-negative integers"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}\n", 24), "unknown key 'x'"},
      {raw_npy("{'descr': '<f4', 'shape': (2, 3), }\n", 24), "lacks 'fortran_order'"},
      {raw_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n", 24), "given twice"},
      {raw_npy(good + "garbage", 24), "after the header's '}'"},
      {raw_npy(std::string(70000, ' '), 0, 2), "header of 70000 bytes"},
      {raw_npy(good, 24, 4), "version 4.0"},
  };
  for (const Case& c : cases) {
    NpyArray a;
    const Status st = parse(c.bytes, &a);
    ASSERT_FALSE(st.is_ok()) << c.says;
    EXPECT_EQ(st.message().rfind("f.npy: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << "expected '" << c.says << "' in: " << st.message();
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << st.message();
  }
}

// The file reader takes the size first: a header that claims gigabytes over a short file is refused
// before anything of that size is allocated; a missing file and a directory are named.
TEST(Npy, FileReaderChecksTheSizeBeforeReadingTheData) {
  const fs::path dir = fresh_dir("npy-file");
  fs::create_directories(dir);
  write_file(dir / "big.npy", raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }\n", 8));
  NpyArray a;
  Status st = read_npy((dir / "big.npy").string(), &a);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("big.npy: truncated"), std::string::npos) << st.message();
  st = read_npy((dir / "missing.npy").string(), &a);
  EXPECT_NE(st.message().find("missing.npy: cannot open"), std::string::npos) << st.message();
  st = read_npy(dir.string(), &a);
  EXPECT_NE(st.message().find("is a directory, not a NPY file"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

// The checked-in seeds of tests/fuzz/npy/ (run by scripts/ci-extra.sh fuzz) still say what they were
// written to: bad_* is rejected with a message, every other one is accepted.
TEST(Npy, FuzzSeedsParseOrAreRejectedWithAReason) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(DETAUDIT_SOURCE_DIR) / "tests" / "fuzz" / "npy")) {
    const std::string bytes = slurp(e.path()), name = e.path().filename().string();
    NpyArray a;
    const Status st = parse_npy(name, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &a);
    EXPECT_EQ(st.is_ok(), name.rfind("bad_", 0) != 0) << name << ": " << st.message();
    if (!st.is_ok()) {
      EXPECT_FALSE(st.message().empty()) << name;
    }
    ++n;
  }
  EXPECT_GE(n, 3u);
}

// ---- External ----------------------------------------------------------------------------------------

namespace {

const char* kTarget = "cpu?order=blocked&threads=1";
const std::vector<std::string> kWorkloads = {"matmul?m=16&n=12&k=70&ta=t", "conv2d?n=2&c=3&h=7&w=7&k=4&pass=fwd",
                                             "conv2d?n=2&c=3&h=7&w=7&k=4&stride=2&pass=bwd_filter",
                                             "reduce?op=sum&n=5000", "batchinv?m=8&n=16&k=40&rows=3"};

std::string quoted_workloads() {
  std::string s;
  for (auto& w : kWorkloads) s += " '" + w + "'";
  return s;
}

// The output of `target` for a workload, run in this process as its worker would run it.
std::vector<uint8_t> run_in_process(const std::string& target, const Spec& w) {
  BackendOr made = make_target_backend(T(target));
  EXPECT_TRUE(made) << made.message();
  std::unique_ptr<Backend> b = std::move(made).value();
  auto wl = Workload::create(w);
  std::vector<uint8_t> out(wl->output_bytes());
  Status st = wl->setup(*b);
  if (st) st = wl->run(*b);
  if (st) st = b->download(out.data(), wl->output(), out.size());
  EXPECT_TRUE(st.is_ok()) << st.message();
  wl->teardown(*b);
  return out;
}

std::vector<uint64_t> shape_of(const nlohmann::json& j) { return j.get<std::vector<uint64_t>>(); }

// Writes `target`'s outputs of every workload of an export as a framework would: <id>.out.<r>.npy for
// two repeats, and for batchinv the sampled rows (copied from C: order=blocked is batch-invariant).
void write_outputs_of(const std::string& target, const fs::path& dir) {
  const nlohmann::json m = nlohmann::json::parse(slurp(dir / "manifest.json"));
  for (auto& w : m["workloads"]) {
    const std::vector<uint8_t> out = run_in_process(target, W(w["spec"].get<std::string>()));
    const auto shape = shape_of(w["output"]["shape"]);
    for (int r = 0; r < 2; ++r)
      write_file(dir / (w["id"].get<std::string>() + ".out." + std::to_string(r) + ".npy"),
                 bytes_of(npy_encode("<f4", shape, out.data(), out.size())));
    if (!w.contains("rows_output")) continue;
    const size_t n = shape[1];
    std::vector<uint8_t> rows;
    for (auto& i : w["rows_output"]["row_indices"])
      rows.insert(rows.end(), out.begin() + long(i.get<size_t>() * n * 4), out.begin() + long((i.get<size_t>() + 1) * n * 4));
    write_file(dir / w["rows_output"]["file"].get<std::string>(),
               bytes_of(npy_encode("<f4", shape_of(w["rows_output"]["shape"]), rows.data(), rows.size())));
  }
}

Results load(const fs::path& dir) {
  Results r;
  std::string err;
  EXPECT_TRUE(succeeded(load_results((dir / "results.json").string(), &r), &err)) << err;
  return r;
}

const Observation* find_obs(const Results& r, const std::string& workload, const std::string& target) {
  for (auto& o : r.observations)
    if (o.workload == workload && o.target == target) return &o;
  return nullptr;
}

}  // namespace

class External : public ::testing::Test {
 protected:
  // One probe run and one export for the whole suite (CI runs this under ASan on 2 cores).
  static void SetUpTestSuite() {
    root_ = fresh_dir("external").string();
    fs::create_directories(root_);
    const auto probe = run_cli(std::string("probe --targets '") + kTarget + ",cpu-ref,cpu?order=pairwise&threads=1' " +
                               "--workloads '" + [] {
                                 std::string s;
                                 for (auto& w : kWorkloads) s += (s.empty() ? "" : ",") + w;
                                 return s;
                               }() + "' --repeats 2 --out " + results() + " --no-fail");
    ASSERT_EQ(probe.code, 0) << probe.err;
    const auto ex = run_cli("export" + quoted_workloads() + " --out " + exported());
    ASSERT_EQ(ex.code, 0) << ex.err;
    write_outputs_of(kTarget, exported());
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static std::string results() { return root_ + "/R"; }
  static std::string exported() { return root_ + "/X"; }
  // A copy of the export with its outputs, to break one file of.
  static std::string copy_of_export(const std::string& name) {
    const std::string d = root_ + "/" + name;
    fs::remove_all(d);
    fs::copy(exported(), d, fs::copy_options::recursive);
    return d;
  }
  static std::string root_;
};
std::string External::root_;

TEST_F(External, ExportWritesTheWorkloadsInputsAndTheOracle) {
  const fs::path x = exported();
  const nlohmann::json m = nlohmann::json::parse(slurp(x / kManifestFile));
  EXPECT_EQ(m["schema"], kExportSchema);
  EXPECT_EQ(m["tool_version"], DETAUDIT_VERSION);
  for (const char* k : {"matrices", "activations", "filters", "conv2d", "batchinv", "how_to_run"})
    EXPECT_TRUE(m["conventions"].contains(k)) << k;
  ASSERT_EQ(m["workloads"].size(), kWorkloads.size());
  for (size_t i = 0; i < kWorkloads.size(); ++i) {
    const auto& e = m["workloads"][i];
    const Spec w = W(kWorkloads[i]);
    EXPECT_EQ(e["spec"], w.str());
    EXPECT_EQ(e["output"]["first_file"], export_id(w) + ".out.0.npy");
    // The inputs' fingerprints, in order, are the workload's own (what the oracle cache is keyed by).
    std::string hashes;
    for (auto& in : e["inputs"]) {
      NpyArray a;
      ASSERT_TRUE(read_npy((x / in["file"].get<std::string>()).string(), &a).is_ok());
      EXPECT_EQ(a.shape, shape_of(in["shape"]));
      hashes += fingerprint_bytes(a.data.data(), a.data.size()).hex();
    }
    auto wl = Workload::create(w);
    auto ref = make_cpu_ref();
    ASSERT_TRUE(wl->setup(*ref).is_ok());
    EXPECT_EQ(fingerprint_bytes(hashes.data(), hashes.size()), wl->input_fingerprint()) << w.str();
    EXPECT_EQ(e["inputs_fingerprint"], wl->input_fingerprint().hex());
    wl->teardown(*ref);
    // The oracle's output, byte for byte.
    std::vector<uint8_t> oracle;
    ASSERT_TRUE(compute_oracle(w, &oracle).is_ok());
    NpyArray o;
    ASSERT_TRUE(read_npy((x / e["oracle"]["file"].get<std::string>()).string(), &o).is_ok());
    EXPECT_EQ(o.data, oracle) << w.str();
  }
  // The matmul's A (ta=t: stored k x m) is the generator's stream 1, B stream 2, as the worker makes them.
  const auto& mm = m["workloads"][0];
  EXPECT_EQ(mm["inputs"][0]["shape"], nlohmann::json::array({70, 16}));
  NpyArray a, b;
  ASSERT_TRUE(read_npy((x / mm["inputs"][0]["file"].get<std::string>()).string(), &a).is_ok());
  ASSERT_TRUE(read_npy((x / mm["inputs"][1]["file"].get<std::string>()).string(), &b).is_ok());
  const auto ga = make_input<float>(16 * 70, 1, 1, Dist::kUniform), gb = make_input<float>(70 * 12, 1, 2, Dist::kUniform);
  EXPECT_EQ(std::memcmp(a.data.data(), ga.data(), a.data.size()), 0);
  EXPECT_EQ(std::memcmp(b.data.data(), gb.data(), b.data.size()), 0);
  EXPECT_EQ(m["workloads"][2]["pass"], "backward-filter");
  EXPECT_EQ(m["workloads"][3]["output"]["shape"], nlohmann::json::array());
  EXPECT_EQ(m["workloads"][4]["rows_output"]["row_indices"], nlohmann::json::array({0, 3, 7}));
}

// The framework here is order=blocked itself: its import lands in that target's groups with its
// fingerprints and its oracle distances, judged, and the report says so in one line.
TEST_F(External, ImportOfATargetsOwnOutputsJoinsItsBitIdenticalGroup) {
  const auto r = run_cli("import " + exported() + " --name mine --out " + results());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string line = std::string("external?name=mine matches ") + T(kTarget).str() + " bit for bit on 5 of 5 workloads";
  EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
  // report.md says the same, its '&' as written (a bare '&' is literal in markdown; no "&amp;" in the text).
  const std::string md = slurp(fs::path(results()) / "report.md");
  EXPECT_NE(md.find(line), std::string::npos) << md;
  EXPECT_EQ(md.find("&amp;"), std::string::npos);
  const Results res = load(results());
  const std::string ext = T("external?name=mine").str(), target = T(kTarget).str();
  for (auto& text : kWorkloads) {
    const std::string w = W(text).str();
    const Observation* mine = find_obs(res, w, ext);
    const Observation* theirs = find_obs(res, w, target);
    ASSERT_TRUE(mine && theirs) << w;
    EXPECT_EQ(mine->repeats, 2);
    EXPECT_EQ(mine->fingerprints[0], theirs->fingerprints[0]) << w;
    EXPECT_EQ(mine->distinct, 1);
    EXPECT_EQ(verdict_text(mine->verdict), "PASS") << mine->verdict_reason;
    ASSERT_TRUE(mine->oracle && theirs->oracle);
    EXPECT_EQ(mine->oracle->max_ulp, theirs->oracle->max_ulp) << w;
    EXPECT_EQ(mine->oracle->err_ratio, theirs->oracle->err_ratio) << w;
    EXPECT_EQ(mine->details.at("imported_from"), fs::path(exported()).lexically_normal().string());
  }
  for (auto& wg : identity_groups(res.observations))
    for (auto& g : wg.groups) {
      const bool has_target = std::count(g.targets.begin(), g.targets.end(), target) > 0;
      const bool has_mine = std::count(g.targets.begin(), g.targets.end(), ext) > 0;
      EXPECT_EQ(has_target, has_mine) << wg.workload;
    }
  const Observation* batch = find_obs(res, W(kWorkloads[4]).str(), ext);
  ASSERT_TRUE(batch && batch->batch);
  EXPECT_EQ(batch->batch->rows_checked, 3);
  EXPECT_EQ(batch->batch->rows_differing, 0);
  // Importing again replaces the cells instead of adding a second copy.
  ASSERT_EQ(run_cli("import " + exported() + " --name mine --out " + results()).code, 0);
  EXPECT_EQ(load(results()).observations.size(), res.observations.size());
}

// An oracle cache entry rewritten whole (its output doubled, its checksum made again: the checksum has no secret)
// passes every check of the entry, so neither import nor a probe session trusts one it did not compute: import computes
// its oracles, and a probe (resumed or not) computes its own at its start. The import still matches its target bit for
// bit, and cpu-ref still passes against its own output.
TEST_F(External, AForgedOracleCacheEntryIsNotUsed) {
  const std::string d = root_ + "/forged";
  fs::remove_all(d);
  fs::copy(results(), d, fs::copy_options::recursive);
  const Spec w = W(kWorkloads[0]);
  const std::string entry = oracle_path(d, w);
  OracleEntry e;
  ASSERT_TRUE(read_oracle_entry(entry, oracle_key(w), &e).is_ok());
  for (size_t i = 0; i + 4 <= e.payload.size(); i += 4) {
    float v;
    std::memcpy(&v, e.payload.data() + i, 4);
    v *= 2;
    std::memcpy(e.payload.data() + i, &v, 4);
  }
  ASSERT_TRUE(write_oracle_entry(entry, e).is_ok());
  ASSERT_TRUE(read_oracle_entry(entry, oracle_key(w), &e).is_ok()) << "the forged entry passes the entry's own checks";
  auto r = run_cli("import " + exported() + " --name forged --out " + d);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("computing cpu-ref's oracle of " + w.str()), std::string::npos) << r.err;
  EXPECT_NE(r.out.find(std::string("external?name=forged matches ") + T(kTarget).str() + " bit for bit on 5 of 5"),
            std::string::npos)
      << r.out;
  const Results res = load(d);
  const Observation* mine = find_obs(res, w.str(), T("external?name=forged").str());
  const Observation* theirs = find_obs(res, w.str(), T(kTarget).str());
  ASSERT_TRUE(mine && theirs && mine->oracle && theirs->oracle);
  EXPECT_EQ(mine->oracle->err_ratio, theirs->oracle->err_ratio);
  EXPECT_EQ(verdict_text(mine->verdict), "PASS") << mine->verdict_reason;
  // A probe into a folder holding the forged cache computes its own, and its cpu-ref cell passes against it.
  const std::string p = root_ + "/forged-probe";
  fs::remove_all(p);
  fs::create_directories(p);
  fs::copy(fs::path(d) / ".oracle", fs::path(p) / ".oracle", fs::copy_options::recursive);
  r = run_cli("probe --targets cpu-ref --workloads '" + kWorkloads[0] + "' --repeats 2 --no-history --out " + p);
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("oracles: computing 1 with cpu-ref (1 an earlier session left in .oracle/ among them"),
            std::string::npos)
      << r.err;
  ASSERT_TRUE(read_oracle_entry(oracle_path(p, w), oracle_key(w), &e).is_ok());
  OracleEntry genuine;
  ASSERT_TRUE(read_oracle_entry(oracle_path(results(), w), oracle_key(w), &genuine).is_ok());
  EXPECT_EQ(e.payload, genuine.payload) << "the forged entry was replaced by the oracle's own output";
  fs::remove_all(d);
  fs::remove_all(p);
}

// Two frameworks imported into the export directory itself: the import's own plan names both, so the results
// stay readable by every command and each framework keeps its cells.
TEST_F(External, TwoFrameworksImportedIntoOneDirectoryBothStay) {
  const std::string x = copy_of_export("two-frameworks");
  ASSERT_EQ(run_cli("import " + x + " --name first").code, 0);
  const auto second = run_cli("import " + x + " --name second");
  ASSERT_EQ(second.code, 0) << second.err;
  const Results res = load(x);
  EXPECT_EQ(res.plan["suite"], "import");
  EXPECT_EQ(res.plan["targets"], nlohmann::json::array({T("external?name=first").str(), T("external?name=second").str()}));
  EXPECT_EQ(res.observations.size(), 2 * kWorkloads.size());
  for (const char* command : {"report ", "baseline save "}) {
    const auto r = run_cli(command + x);
    EXPECT_EQ(r.code, 0) << command << r.err;
  }
  // The first imported again replaces its own cells.
  ASSERT_EQ(run_cli("import " + x + " --name first").code, 0);
  EXPECT_EQ(load(x).observations.size(), 2 * kWorkloads.size());
  // A fleet rank's probe folder is the rank's (its node.json and qualify.json speak of its results): refused, and
  // nothing written.
  const fs::path rank = fs::path(root_) / "fleet" / "ranks" / "0-host";
  fs::create_directories(rank / "probe");
  write_file(rank / "node.json", "{}");
  const auto into_rank = run_cli("import " + x + " --name first --out " + (rank / "probe").string() + "/");
  EXPECT_EQ(into_rank.code, 2) << into_rank.out;
  EXPECT_NE(into_rank.err.find("a fleet rank's folder (" + fs::weakly_canonical(rank).string() + " holds its node.json)"),
            std::string::npos)
      << into_rank.err;
  EXPECT_FALSE(fs::exists(rank / "probe" / "results.json"));
  // Through a link to it, and for probe and train, the same.
  fs::create_directory_symlink(rank / "probe", fs::path(root_) / "link-to-rank");
  for (const std::string& cmd : {"import " + x + " --name first --out " + root_ + "/link-to-rank",
                                 "probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " + root_ + "/link-to-rank",
                                 "train autoencoder --out " + (rank / "train").string(),
                                 "probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " +
                                     (rank / "probe" / "logs").string(),
                                 "probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " +
                                     (rank.parent_path()).string(),
                                 // every other command that writes into an --out of the user's
                                 "qualify --out " + (rank / "probe").string(),
                                 "export 'reduce?op=sum&n=10' --out " + (rank / "probe" / "x").string(),
                                 "analyze " + x + " " + x + " --out " + (rank / "probe").string(),
                                 "diverge --targets 'cpu?threads=1' --steps 1 --out " + (rank / "probe").string(),
                                 "diverge --targets 'cpu?threads=1' --steps 1 --out " + root_ + "/dv --trace-out " +
                                     (rank / "probe" / "t").string(),
                                 "diverge --trace " + x + "/a --trace " + x + "/b --out " + root_ + "/link-to-rank",
                                 // a fleet nested in a rank's folder or in ranks/, a baseline or a history there
                                 "fleet --rank 0 --ranks 1 --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " +
                                     rank.string(),
                                 "fleet --rank 0 --ranks 1 --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " +
                                     rank.parent_path().string(),
                                 "baseline save " + x + " --out " + (rank / "b.json").string(),
                                 "baseline save " + (rank / "probe").string(),  // its default: DIR/baseline.json
                                 "probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --out " + root_ +
                                     "/elsewhere --history " + (rank / "probe" / "h.db").string()}) {
    const auto r = run_cli(cmd);
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.err.find("holds its node.json"), std::string::npos) << cmd << ": " << r.err;
  }
  // A new folder beside the ranks' in ranks/ would be read as a rank's: refused for every command that writes one.
  const fs::path sibling = rank.parent_path() / "new";
  for (const std::string& cmd : {"probe --targets cpu-ref --workloads 'reduce?op=sum&n=10' --no-history --out " +
                                     sibling.string(),
                                 "train autoencoder --seeds 1 --batches 2 --window 1 --replicates 1 --no-history --out " +
                                     sibling.string(),
                                 "diverge --targets 'cpu?threads=1' --steps 1 --out " + sibling.string(),
                                 "export 'reduce?op=sum&n=10' --out " + sibling.string()}) {
    const auto r = run_cli(cmd);
    EXPECT_EQ(r.code, 2) << cmd << ": " << r.out;
    EXPECT_NE(r.err.find("in a fleet's ranks/ (" + fs::weakly_canonical(rank.parent_path()).string() + ")"),
              std::string::npos)
        << cmd << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(sibling));
  EXPECT_FALSE(fs::exists(rank / "probe" / "results.json"));
  EXPECT_FALSE(fs::exists(rank / "probe" / "logs"));
  EXPECT_FALSE(fs::exists(rank / "ranks"));
  EXPECT_FALSE(fs::exists(rank / "b.json"));
  EXPECT_FALSE(fs::exists(rank / "probe" / "baseline.json"));
  EXPECT_FALSE(fs::exists(rank / "probe" / "h.db"));
  {  // the option the path came from is the one named
    const auto r = run_cli("diverge --targets 'cpu?threads=1' --steps 1 --out " + root_ + "/dv2 --trace-out " +
                           (rank / "t").string());
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err.rfind("detaudit: error: --trace-out " + rank.string() + ": a fleet rank's folder", 0), 0u) << r.err;
  }
  EXPECT_FALSE(fs::exists(rank.parent_path() / "results.json"));
  EXPECT_FALSE(fs::exists(rank / "train"));
}

// compare and check treat an external target as any other: a framework whose bits changed is a changed
// cell for compare; check warns, since nothing is promised for it.
TEST_F(External, CompareAndCheckSeeExternalTargets) {
  ASSERT_EQ(run_cli("import " + exported() + " --name mine --out " + results()).code, 0);
  const std::string base = root_ + "/base.json";
  ASSERT_EQ(run_cli("baseline save " + results() + " --out " + base).code, 0);
  // (The run it was saved from, checked against it, judges nothing: its cells would be compared with themselves.)
  auto check = run_cli("check " + results() + " --baseline " + base);
  EXPECT_EQ(check.code, 2) << check.out << check.err;
  EXPECT_NE(check.err.find("it is the run the baseline was saved from"), std::string::npos) << check.err;

  // The same framework, now giving cpu-ref's bits: another results directory.
  const std::string x2 = copy_of_export("X-ref"), r2 = root_ + "/R2";
  fs::remove_all(r2);
  fs::copy(results(), r2, fs::copy_options::recursive);
  write_outputs_of("cpu-ref", x2);
  auto imp = run_cli("import " + x2 + " --name mine --out " + r2);
  ASSERT_EQ(imp.code, 0) << imp.err;
  EXPECT_NE(imp.out.find("external?name=mine matches cpu-ref bit for bit on 5 of 5 workloads"), std::string::npos) << imp.out;
  auto cmp = run_cli("compare " + results() + " " + r2);
  EXPECT_EQ(cmp.code, 1) << cmp.out;
  EXPECT_NE(cmp.out.find("external?name=mine"), std::string::npos) << cmp.out;
  check = run_cli("check " + r2 + " --baseline " + base);
  EXPECT_NE(check.code, 2) << check.err;
  EXPECT_NE(check.out.find("external?name=mine"), std::string::npos) << check.out;
}

TEST_F(External, ProbeRefusesToRunAnExternalTarget) {
  const std::string out = root_ + "/never";
  auto r = run_cli("probe --targets 'external?name=torch' --workloads 'reduce?op=sum&n=10' --out " + out);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("cannot be run"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(find_backend("external")->imported);
}

// Every bad input: exit 2, one line naming the file and the problem, and the results untouched.
TEST_F(External, BadInputExitsTwoWithOneLineAndWritesNothing) {
  const nlohmann::json m = nlohmann::json::parse(slurp(fs::path(exported()) / kManifestFile));
  const std::string mm = m["workloads"][0]["id"], sum = m["workloads"][3]["id"];
  const std::string out0 = mm + ".out.0.npy";
  struct Case {
    std::string name, file, says;
    std::function<void(const fs::path&)> spoil;
  };
  auto rewrite = [](const fs::path& p, const std::function<void(std::string&)>& f) {
    std::string s = slurp(p);
    f(s);
    write_file(p, s);
  };
  auto manifest = [&](const std::function<void(nlohmann::json&)>& f) {
    return [f](const fs::path& d) {
      nlohmann::json j = nlohmann::json::parse(slurp(d / kManifestFile));
      f(j);
      write_file(d / kManifestFile, j.dump());
    };
  };
  std::vector<float> c(16 * 12, 1.0f);
  const std::vector<Case> cases = {
      {"truncated", out0, "truncated", [&](const fs::path& d) { rewrite(d / out0, [](std::string& s) { s.resize(s.size() - 5); }); }},
      {"dtype", out0, "dtype '<f8', the manifest expects '<f4'",
       [&](const fs::path& d) {
         std::vector<double> v(16 * 12, 1.0);
         write_file(d / out0, bytes_of(npy_encode("<f8", {16, 12}, v.data(), v.size() * 8)));
       }},
      {"shape", out0, "shape (12, 16), the manifest expects (16, 12)",
       [&](const fs::path& d) { write_file(d / out0, bytes_of(npy("<f4", {12, 16}, c))); }},
      {"scalar", sum + ".out.0.npy", "shape (1,), the manifest expects ()",
       [&](const fs::path& d) { write_file(d / (sum + ".out.0.npy"), bytes_of(npy("<f4", {1}, {1}))); }},
      {"big-endian", out0, "big-endian",
       [&](const fs::path& d) { rewrite(d / out0, [](std::string& s) { s.replace(s.find("<f4"), 3, ">f4"); }); }},
      {"fortran", out0, "Fortran-order",
       [&](const fs::path& d) { rewrite(d / out0, [](std::string& s) { s.replace(s.find("False"), 5, "True "); }); }},
      {"missing", out0, "missing", [&](const fs::path& d) { fs::remove(d / out0); }},
      // The inputs are the exported bytes: a bit flipped, a header of another shape, the file gone.
      {"input-bit", mm + ".a.npy", "not the input detaudit exported for",
       [&](const fs::path& d) { rewrite(d / (mm + ".a.npy"), [](std::string& s) { s.back() ^= 1; }); }},
      {"input-shape", mm + ".a.npy", "shape (16, 70), the manifest expects (70, 16)",
       [&](const fs::path& d) {
         std::vector<float> a(16 * 70, 0.5f);
         write_file(d / (mm + ".a.npy"), bytes_of(npy("<f4", {16, 70}, a)));
       }},
      {"input-gone", mm + ".b.npy", "cannot open the NPY file", [&](const fs::path& d) { fs::remove(d / (mm + ".b.npy")); }},
      // Outputs 0, 1 and 5, no 2: the one after the gap would have been left out (it may differ).
      {"gap", mm + ".out.5.npy", "an output after a gap: " + mm + ".out.2.npy is missing",
       [&](const fs::path& d) { fs::copy_file(d / out0, d / (mm + ".out.5.npy")); }},
      {"version", kManifestFile, "written by detaudit 0.0.1", manifest([](nlohmann::json& j) { j["tool_version"] = "0.0.1"; })},
      {"schema", kManifestFile, "not a detaudit export manifest",
       manifest([](nlohmann::json& j) { j["schema"] = "detaudit-export/0"; })},
      {"edited", kManifestFile, "\"output\" is not what this detaudit exports",
       manifest([](nlohmann::json& j) { j["workloads"][0]["output"]["shape"] = {16, 13}; })},
      {"tool", kManifestFile, "\"tool\" is \"pytorch\", not \"detaudit\"",
       manifest([](nlohmann::json& j) { j["tool"] = "pytorch"; })},
      {"unknown-key", kManifestFile, "\"note\" is not a key of an export manifest",
       manifest([](nlohmann::json& j) { j["note"] = "x"; })},
      {"no-conventions", kManifestFile, "\"conventions\" is not what this detaudit exports",
       manifest([](nlohmann::json& j) { j.erase("conventions"); })},
      {"created", kManifestFile, "\"created_at\" must be a time", manifest([](nlohmann::json& j) { j["created_at"] = "now"; })},
      {"created-later", kManifestFile, "not in the future",
       manifest([](nlohmann::json& j) { j["created_at"] = "2099-01-01T00:00:00Z"; })},
      {"producer-seconds", kProducerFile, "must hold times of 0, or from a nanosecond (a clock's tick) to a year",
       [](const fs::path& d) { write_file(d / kProducerFile, R"({"seconds": {"x": [1e12]}})"); }},
      // A time no clock measured: between 0 and one nanosecond.
      {"producer-seconds-tiny", kProducerFile, "must hold times of 0, or from a nanosecond (a clock's tick) to a year",
       [](const fs::path& d) { write_file(d / kProducerFile, R"({"seconds": {"x": [1e-300]}})"); }},
      {"malformed", kManifestFile, "not valid JSON",
       [&](const fs::path& d) { rewrite(d / kManifestFile, [](std::string& s) { s.resize(s.size() / 2); }); }},
      {"producer", kProducerFile, "\"details\" must be an object",
       [](const fs::path& d) { write_file(d / kProducerFile, R"({"details": 3})"); }},
      {"producer-twice", kProducerFile, "the key \"describe\" appears twice",
       [](const fs::path& d) { write_file(d / kProducerFile, R"({"describe": "x", "describe": "y"})"); }},
  };
  const std::string before = slurp(fs::path(results()) / "results.json");
  for (const Case& k : cases) {
    const std::string d = copy_of_export("bad-" + k.name);
    k.spoil(d);
    auto r = run_cli("import " + d + " --name bad --out " + results());
    EXPECT_EQ(r.code, 2) << k.name << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << k.name << ": " << r.err;
    EXPECT_NE(r.err.find(d + "/" + k.file), std::string::npos) << k.name << ": " << r.err;
    EXPECT_NE(r.err.find(k.says), std::string::npos) << k.name << ": expected '" << k.says << "' in " << r.err;
    fs::remove_all(d);
  }
  EXPECT_EQ(slurp(fs::path(results()) / "results.json"), before);
  // A results directory that did not exist is not created.
  auto r = run_cli("import " + root_ + "/nothing-here --name bad --out " + root_ + "/new-results");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("manifest.json: missing"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root_ + "/new-results"));
}

// Ctrl-C while import computes an oracle: it stops there and hands back nothing to write, so the same
// command resumes. The signal is raised from the oracle's own progress line: at a known point, not a time.
TEST_F(External, ImportStopsOnASignalDuringItsOracleAndReturnsNothing) {
  const std::string d = copy_of_export("interrupted");  // no probe run's cache here: every oracle is computed
  std::vector<std::string> lines;
  bool raised = false;
  size_t oracles = 0;
  // During the last workload's oracle: no check between workloads comes after it to catch the signal.
  auto progress = [&](const std::string& line) {
    lines.push_back(line);
    if (line.rfind("computing cpu-ref's oracle of ", 0) == 0) ++oracles;
    if (!raised && oracles == kWorkloads.size()) {
      raised = true;
      ::raise(SIGINT);
    }
  };
  std::vector<Observation> obs;
  Status st = Status::ok();
  {
    test::InterruptScope interrupts;
    st = read_external_outputs(d, "mine", &obs, progress);
  }
  ASSERT_TRUE(raised) << "no oracle was computed";
  EXPECT_EQ(st.code(), Status::Code::kInterrupted) << st.message();
  EXPECT_EQ(st.message(), "interrupted by SIGINT (Interrupt)");
  EXPECT_TRUE(obs.empty()) << "nothing to write after the interruption";
  EXPECT_EQ(lines.back().rfind("computing cpu-ref's oracle of ", 0), 0u) << "nothing ran after it: " << lines.back();
  // The same call without a signal completes: the interruption left nothing behind that blocks it.
  lines.clear();
  raised = true;
  ASSERT_TRUE(read_external_outputs(d, "mine", &obs, progress).is_ok());
  EXPECT_EQ(obs.size(), kWorkloads.size());
}
