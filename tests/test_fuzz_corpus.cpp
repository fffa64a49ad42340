// The checked-in fuzz seeds (tests/fuzz/<harness>/, run by scripts/ci-extra.sh fuzz) still say what
// they were written to say: a seed named bad_* is rejected with a message, every other one is accepted,
// so the fuzzers start from inputs that reach past the first check. Run through the same functions as
// the harnesses, in the regular build.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "contract/results.hpp"
#include "models/idx.hpp"
#include "probes/spec.hpp"
#include "probes/worker.hpp"
#include "suites/diverge.hpp"
#include "suites/external.hpp"
#include "tests/fixtures.hpp"

namespace detaudit {
namespace {

namespace fs = std::filesystem;

struct Seed {
  std::string name;
  fs::path path;
  std::string bytes;
  bool bad() const { return name.rfind("bad_", 0) == 0; }
  // The name without "bad_", e.g. "images_raw" or "target_openblas".
  std::string kind() const { return bad() ? name.substr(4) : name; }
};

std::vector<Seed> seeds(const std::string& harness) {
  std::vector<Seed> out;
  for (const auto& e : fs::directory_iterator(fs::path(DETAUDIT_SOURCE_DIR) / "tests" / "fuzz" / harness)) {
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    out.push_back({e.path().filename().string(), e.path(), ss.str()});
  }
  EXPECT_GE(out.size(), 3u) << "tests/fuzz/" << harness << " holds a handful of seeds";
  return out;
}

TEST(FuzzSeeds, SpecSeedsParseOrAreRejectedWithAReason) {
  for (const Seed& s : seeds("spec")) {
    const bool target = s.kind().rfind("target_", 0) == 0;
    ASSERT_TRUE(target || s.kind().rfind("workload_", 0) == 0) << s.name << ": name it [bad_]target_* or [bad_]workload_*";
    Spec spec;
    std::string err;
    const bool ok =
        target ? succeeded(parse_target(s.bytes, &spec), &err) : succeeded(parse_workload(s.bytes, &spec), &err);
    EXPECT_EQ(ok, !s.bad()) << s.name << ": " << err;
    if (!ok) {
      EXPECT_FALSE(err.empty()) << s.name;
    }
  }
}

TEST(FuzzSeeds, WorkerRequestSeedsParseOrAreRejectedWithAReason) {
  for (const Seed& s : seeds("worker_request")) {
    WorkerRequest req;
    const Status st = parse_worker_request(s.bytes, &req);
    EXPECT_EQ(st.is_ok(), !s.bad()) << s.name << ": " << st.message();
    if (!st) {
      EXPECT_FALSE(st.message().empty()) << s.name;
    }
  }
}

TEST(FuzzSeeds, ResultsSeedsLoadOrAreRejectedWithAReason) {
  for (const Seed& s : seeds("results")) {
    Results r;
    std::string err;
    const bool ok = succeeded(load_results(s.path.string(), &r), &err);
    EXPECT_EQ(ok, !s.bad()) << s.name << ": " << err;
    if (!ok) {
      EXPECT_FALSE(err.empty()) << s.name;
      continue;
    }
    // The harness's invariant: what loads saves and loads again to the same JSON.
    const fs::path dir = fs::temp_directory_path() / ("detaudit-test-fuzz-seed-" + std::to_string(getpid()));
    fs::create_directories(dir);
    const std::string again_path = (dir / "again.json").string();
    const std::string first = to_json(r).dump();
    ASSERT_TRUE(save_results(again_path, r).is_ok()) << s.name;
    Results again;
    const Status st = load_results(again_path, &again);
    ASSERT_TRUE(st.is_ok()) << s.name << ": saved results do not load: " << st.message();
    EXPECT_EQ(to_json(again).dump(), first) << s.name;
    fs::remove_all(dir);
  }
}

// A trace seed is compared with itself, as the harness does.
TEST(FuzzSeeds, TraceSeedsCompareOrAreRejectedWithAReason) {
  for (const Seed& s : seeds("trace")) {
    DivergeResult r;
    const Status st = compare_traces(s.path.string(), s.path.string(), &r);
    EXPECT_EQ(st.is_ok(), !s.bad()) << s.name << ": " << st.message();
    if (!st.is_ok()) {
      EXPECT_FALSE(st.message().empty()) << s.name;
      EXPECT_EQ(st.message().find('\n'), std::string::npos) << s.name << ": one line";
    } else {
      EXPECT_FALSE(r.first.has_value()) << s.name << ": a trace diverges from itself";
    }
  }
}

// A manifest seed is an export's manifest.json in which @VERSION@ stands for this build's version. The
// accepted one is an export of this build: a change to what export writes for its specs (a key, a text)
// makes it bad, and it is written again with `detaudit export 'reduce?op=sum&n=10,matmul?m=4&n=4&k=4'`.
TEST(FuzzSeeds, ManifestSeedsLoadOrAreRejectedWithAReason) {
  const fs::path dir = fs::temp_directory_path() / ("detaudit-manifest-seed-" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const Seed& s : seeds("manifest")) {
    std::string text = s.bytes;
    for (size_t at; (at = text.find("@VERSION@")) != std::string::npos;) text.replace(at, 9, DETAUDIT_VERSION);
    std::ofstream(dir / "manifest.json", std::ios::binary) << text;
    std::vector<Spec> specs;
    const Status st = read_manifest_specs(dir.string(), &specs);
    EXPECT_EQ(st.is_ok(), !s.bad()) << s.name << ": " << st.message();
    if (!st.is_ok()) {
      EXPECT_FALSE(st.message().empty()) << s.name;
      EXPECT_EQ(st.message().find('\n'), std::string::npos) << s.name;
    } else {
      EXPECT_EQ(specs.size(), 2u) << s.name;
    }
  }
  fs::remove_all(dir);
}

// The first byte of an IDX seed is the harness's switch (odd: gzip the rest first); the rest is the
// file, raw or already gzip'd, which both parsers read as it is.
TEST(FuzzSeeds, IdxSeedsParseOrAreRejectedWithAReason) {
  for (const Seed& s : seeds("idx")) {
    const bool images = s.kind().rfind("images_", 0) == 0;
    ASSERT_TRUE(images || s.kind().rfind("labels_", 0) == 0) << s.name << ": name it [bad_]images_* or [bad_]labels_*";
    ASSERT_FALSE(s.bytes.empty()) << s.name;
    const auto* p = reinterpret_cast<const uint8_t*>(s.bytes.data()) + 1;
    const size_t n = s.bytes.size() - 1;
    IdxImages im;
    IdxLabels lb;
    const Status st = images ? parse_idx_images(s.name, p, n, &im) : parse_idx_labels(s.name, p, n, &lb);
    EXPECT_EQ(st.is_ok(), !s.bad()) << s.name << ": " << st.message();
    if (!st.is_ok()) {
      EXPECT_FALSE(st.message().empty()) << s.name;
    }
  }
}

}  // namespace
}  // namespace detaudit
