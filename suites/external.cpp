#include "suites/external.hpp"
#include "contract/results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "contract/atomic_file.hpp"
#include "kernels/input_file.hpp"
#include "kernels/npy.hpp"
#include "probes/child.hpp"
#include "probes/env.hpp"
#include "probes/oracle_cache.hpp"
#include "probes/registry.hpp"
#include "probes/results_file.hpp"
#include "probes/worker.hpp"  // kMaxRepeats
#include "probes/workload.hpp"

namespace detaudit {

namespace fs = std::filesystem;
using Json = nlohmann::json;
// The manifest is written in this key order (spec first, then what it computes, then the files), for
// people; read back as plain json, whose comparison ignores the order.
using OrderedJson = nlohmann::ordered_json;

namespace {

// ---- a workload's arrays, from its spec alone: what export writes and import checks against -------------

struct ArrayDesc {
  std::string name, role, meaning;
  std::vector<uint64_t> shape;
};
struct Layout {
  std::string dtype = "<f4";
  std::string computes, reference, pass;
  std::vector<ArrayDesc> inputs;  // in the order Workload::setup uploads them
  ArrayDesc output;
  std::vector<uint64_t> rows;  // batchinv: the rows of C detaudit also computes alone
};

uint64_t dim(const Spec& s, const char* key, int64_t fallback) { return uint64_t(s.get_int(key, fallback)); }
uint64_t elements(const std::vector<uint64_t>& shape) {
  uint64_t e = 1;
  for (uint64_t d : shape) e *= d;
  return e;
}
std::string type_word(const std::string& dtype) { return dtype == "<f8" ? "float64" : "float32"; }

Layout layout_matmul(const Spec& s) {
  Layout l;
  const uint64_t m = dim(s, "m", 1), n = dim(s, "n", 1), k = dim(s, "k", 1);
  const bool ta = s.get("ta", "n") == "t", tb = s.get("tb", "n") == "t";
  l.dtype = s.get("dtype", "f32") == "f64" ? "<f8" : "<f4";
  const std::string a = ta ? "A.T" : "A", b = tb ? "B.T" : "B";
  l.inputs.push_back({"a", "input",
                      ta ? "A as stored, k x m (ta=t): the left operand is its transpose A.T, m x k" : "A, m x k: the left operand",
                      ta ? std::vector<uint64_t>{k, m} : std::vector<uint64_t>{m, k}});
  l.inputs.push_back({"b", "input",
                      tb ? "B as stored, n x k (tb=t): the right operand is its transpose B.T, k x n" : "B, k x n: the right operand",
                      tb ? std::vector<uint64_t>{n, k} : std::vector<uint64_t>{k, n}});
  l.output = {"c", "output", fmt::format("C = {} @ {}, m x n; each element is a sum of k = {} products", a, b, k), {m, n}};
  l.computes = fmt::format("the matrix product C = {} @ {} of an {} x {} and a {} x {} matrix in {} (alpha 1, beta 0: "
                           "nothing is added to C)",
                           a, b, m, k, k, n, type_word(l.dtype));
  l.reference = fmt::format("numpy: c = {} @ {}; torch: torch.matmul({}, {})", ta ? "a.T" : "a", tb ? "b.T" : "b",
                            ta ? "a.t()" : "a", tb ? "b.t()" : "b");
  return l;
}

Layout layout_batchinv(const Spec& s) {
  Layout l = layout_matmul(s);
  const uint64_t m = dim(s, "m", 1), rows = dim(s, "rows", 1);
  // Evenly spaced rows, first and last included when rows > 1 (BatchInvWorkload::batch_check).
  for (uint64_t r = 0; r < rows; ++r) l.rows.push_back(rows == 1 ? 0 : r * (m - 1) / (rows - 1));
  l.computes += "; detaudit also computes each of `rows_output.row_indices` alone (row i of A, a 1 x k matrix, times "
                "B) and compares it with that row of C bit for bit: batch invariance";
  l.reference += "; rows: numpy.stack([a[i:i+1] @ b for i in row_indices])[:, 0]";
  return l;
}

Layout layout_conv(const Spec& s) {
  const ConvShape c = conv_shape_of(s);
  const std::vector<uint64_t> x = {uint64_t(c.n), uint64_t(c.c), uint64_t(c.h), uint64_t(c.w)},
                              w = {uint64_t(c.k), uint64_t(c.c), uint64_t(c.r), uint64_t(c.s)},
                              y = {uint64_t(c.n), uint64_t(c.k), uint64_t(c.p()), uint64_t(c.q())};
  const ArrayDesc ax = {"x", "input", "x, the convolution's input activations, N x C x H x W (NCHW)", x},
                  aw = {"w", "filter", "w, the filter, K x C x R x S (KCRS: output channels, input channels, rows, columns)", w},
                  ady = {"dy", "grad_output", "dy, the gradient of the loss with respect to the forward output y, N x K x P x Q", y};
  const std::string sp = fmt::format("stride={}, padding={}", c.stride, c.pad);
  const std::string pass = s.get("pass", "fwd");
  const std::string window = fmt::format("x[n, c, p*{0} - {1} + r, q*{0} - {1} + s] (zero outside x)", c.stride, c.pad);
  Layout l;
  if (pass == "fwd") {
    l.pass = "forward";
    l.inputs = {ax, aw};
    l.output = {"y", "output", "y, the forward output, N x K x P x Q", y};
    l.computes = "the forward pass: y[n, k, p, q] = sum over c, r, s of " + window + " * w[k, c, r, s]";
    l.reference = fmt::format("torch: torch.nn.functional.conv2d(x, w, {})", sp);
  } else if (pass == "bwd_data") {
    l.pass = "backward-data";
    l.inputs = {ady, aw};
    l.output = {"dx", "grad_input", "dx, the gradient of the loss with respect to x, N x C x H x W", x};
    l.computes = "the backward-data pass: dx = d(sum(y * dy))/dx for y = conv2d(x, w): each x element of " + window +
                 " receives dy[n, k, p, q] * w[k, c, r, s], summed over every (k, p, q, r, s) that reads it";
    l.reference = fmt::format("torch: torch.nn.grad.conv2d_input(({}, {}, {}, {}), w, dy, {})", c.n, c.c, c.h, c.w, sp);
  } else {
    l.pass = "backward-filter";
    l.inputs = {ax, ady};
    l.output = {"dw", "grad_filter", "dw, the gradient of the loss with respect to w, K x C x R x S", w};
    l.computes = "the backward-filter pass: dw[k, c, r, s] = sum over n, p, q of " + window + " * dy[n, k, p, q]";
    l.reference = fmt::format("torch: torch.nn.grad.conv2d_weight(x, ({}, {}, {}, {}), dy, {})", c.k, c.c, c.r, c.s, sp);
  }
  l.computes += fmt::format("; P = (H + 2*{1} - R) / {0} + 1 = {2}, Q = {3} (cross-correlation as in deep-learning "
                            "frameworks: no filter flip; no bias, dilation 1, groups 1)",
                            c.stride, c.pad, c.p(), c.q());
  return l;
}

Layout layout_reduce(const Spec& s) {
  Layout l;
  const std::string op = s.get("op", "sum");
  const uint64_t n = dim(s, "n", 1);
  if (op == "softmax") {
    const uint64_t cols = dim(s, "cols", 1000), rows = n / cols;
    l.inputs = {{"x", "input", "x, rows x cols", {rows, cols}}};
    l.output = {"y", "output", "y = softmax of each row of x, rows x cols", {rows, cols}};
    l.computes = "softmax along the last axis: y[i, j] = exp(x[i, j] - max_j x[i, j]) / sum_j exp(x[i, j] - max_j x[i, j])";
    l.reference = "numpy: e = np.exp(x - x.max(1, keepdims=True)); y = e / e.sum(1, keepdims=True); torch: "
                  "torch.softmax(x, dim=-1)";
    return l;
  }
  l.inputs = {{"x", "input", "x, a vector of n elements", {n}}};
  if (op == "dot") l.inputs.push_back({"y", "input", "y, a vector of n elements", {n}});
  l.output = {"s", "output", "the result, one float32 (a 0-dimensional array, shape ())", {}};
  l.computes = op == "sum" ? "the sum of x's n elements" : op == "dot" ? "the dot product sum_i x[i] * y[i]"
                                                                       : "the L2 norm sqrt(sum_i x[i]^2)";
  l.computes += ", in float32";
  l.reference = op == "sum" ? "torch: torch.sum(x)" : op == "dot" ? "torch: torch.dot(x, y)" : "torch: torch.linalg.norm(x)";
  return l;
}

Layout layout_pool(const Spec& s) {
  PoolShape p;
  p.n = int(s.get_int("n", 1)), p.c = int(s.get_int("c", 1)), p.h = int(s.get_int("h", 1)), p.w = int(s.get_int("w", 1));
  p.window = int(s.get_int("window", 2)), p.stride = int(s.get_int("stride", 2));
  const std::vector<uint64_t> x = {uint64_t(p.n), uint64_t(p.c), uint64_t(p.h), uint64_t(p.w)},
                              y = {uint64_t(p.n), uint64_t(p.c), uint64_t(p.p()), uint64_t(p.q())};
  const std::string over = fmt::format("the {0} x {0} window at (p*{1}, q*{1}), no padding; P = (H - {0}) / {1} + 1 = {2}, "
                                       "Q = {3}",
                                       p.window, p.stride, p.p(), p.q());
  Layout l;
  l.inputs = {{"x", "input", "x, N x C x H x W (NCHW)", x}};
  if (s.get("pass", "bwd") == "fwd") {
    l.output = {"y", "output", "y, N x C x P x Q", y};
    l.computes = "max pooling: y[n, c, p, q] = the maximum of x[n, c] over " + over;
    l.reference = fmt::format("torch: torch.nn.functional.max_pool2d(x, {}, {})", p.window, p.stride);
    return l;
  }
  l.inputs.push_back({"y", "forward_output", "y = max_pool(x), N x C x P x Q: the forward output, given so that a backward "
                                             "kernel need not recompute it",
                      y});
  l.inputs.push_back({"dy", "grad_output", "dy, the gradient of the loss with respect to y, N x C x P x Q", y});
  l.output = {"dx", "grad_input", "dx, the gradient of the loss with respect to x, N x C x H x W", x};
  l.computes = "max-pooling backward: dy[n, c, p, q] goes to the position of the maximum of x[n, c] over " + over +
               " (the first maximum in row-major window order when several are equal); where windows overlap the "
               "contributions add; every other dx is 0";
  l.reference = fmt::format("torch: x.requires_grad_(); torch.nn.functional.max_pool2d(x, {}, {}).backward(dy); dx = x.grad",
                            p.window, p.stride);
  return l;
}

Layout layout_of(const Spec& w) {
  if (w.name == "matmul") return layout_matmul(w);
  if (w.name == "batchinv") return layout_batchinv(w);
  if (w.name == "conv2d") return layout_conv(w);
  if (w.name == "reduce") return layout_reduce(w);
  return layout_pool(w);  // maxpool: parse_workload knows no other
}

// ---- the inputs, exactly as every target's worker uploads them ------------------------------------------

// Host memory that keeps a copy of every upload: Workload::setup on it yields the inputs in upload order.
class InputRecorder : public Backend {
 public:
  std::string name() const override { return "detaudit export"; }
  Status upload(void* dst, const void* src, size_t bytes) override {
    const auto* b = static_cast<const uint8_t*>(src);
    uploads.emplace_back(b, b + bytes);
    return Backend::upload(dst, src, bytes);
  }
  std::vector<std::vector<uint8_t>> uploads;
};

// The inputs (may be null: the fingerprint only) and their fingerprint, the oracle cache's key.
Status capture_inputs(const Spec& w, const Layout& l, std::vector<std::vector<uint8_t>>* out, Fingerprint* fp) {
  InputRecorder rec;
  auto wl = Workload::create(w);
  if (!wl) return Status::invalid("unknown workload " + w.name);
  Status st = wl->setup(rec);
  if (st) *fp = wl->input_fingerprint();
  wl->teardown(rec);
  DETAUDIT_RETURN_IF_ERROR(st);
  const size_t item = l.dtype == "<f8" ? 8 : 4;
  bool sizes = rec.uploads.size() == l.inputs.size();
  for (size_t i = 0; sizes && i < l.inputs.size(); ++i) sizes = rec.uploads[i].size() == elements(l.inputs[i].shape) * item;
  if (!sizes) return Status::error("internal: the inputs of " + w.str() + " do not match their export layout");
  if (out) *out = std::move(rec.uploads);
  return Status::ok();
}

// ---- the manifest ----------------------------------------------------------------------------------------

std::string output_pattern(const std::string& id) { return id + ".out.{r}.npy"; }
std::string output_file(const std::string& id, int r) { return id + ".out." + std::to_string(r) + ".npy"; }
std::string rows_file(const std::string& id) { return id + ".rows.npy"; }

OrderedJson array_json(const std::string& id, const ArrayDesc& a, const std::string& dtype) {
  return {{"name", a.name}, {"role", a.role}, {"file", id + "." + a.name + ".npy"}, {"shape", a.shape}, {"dtype", dtype},
          {"meaning", a.meaning}};
}

// One workload's entry. Import rebuilds it from the spec and requires the manifest's to be identical.
OrderedJson manifest_entry(const Spec& w, const Layout& l, const Fingerprint& inputs) {
  const std::string id = export_id(w);
  OrderedJson params = OrderedJson::object();
  for (auto& [k, v] : w.params) params[k] = v;
  OrderedJson e = {{"id", id}, {"spec", w.str()}, {"op", w.name}, {"params", params}};
  if (!l.pass.empty()) e["pass"] = l.pass;
  e["computes"] = l.computes;
  e["reference"] = l.reference;
  OrderedJson in = OrderedJson::array();
  for (auto& a : l.inputs) in.push_back(array_json(id, a, l.dtype));
  e["inputs"] = in;
  e["oracle"] = {{"file", id + ".oracle.npy"}, {"shape", l.output.shape}, {"dtype", l.dtype},
                 {"meaning", "detaudit's reference output (cpu-ref: fixed order, double accumulation, rounded once): "
                             "to compare with, not to copy"}};
  e["output"] = {{"role", l.output.role},       {"file_pattern", output_pattern(id)}, {"first_file", output_file(id, 0)},
                 {"shape", l.output.shape},     {"dtype", l.dtype},                  {"meaning", l.output.meaning}};
  if (!l.rows.empty())
    e["rows_output"] = {{"file", rows_file(id)},
                        {"shape", OrderedJson::array({l.rows.size(), l.output.shape[1]})},
                        {"dtype", l.dtype},
                        {"row_indices", l.rows},
                        {"optional", true},
                        {"meaning", "row j is row row_indices[j] of A alone (a 1 x k matrix) times B, computed as its "
                                    "own product after repeat 0; import compares it with that row of repeat 0's output"}};
  e["inputs_fingerprint"] = inputs.hex();
  return e;
}

OrderedJson conventions() {
  return {
      {"files", "NumPy .npy, format version 1.0, C order (row-major, the last index varies fastest), little-endian: "
                "dtype '<f4' (float32) or '<f8' (float64) as each array's dtype says"},
      {"matrices", "row-major: element (i, j) of an m x n matrix is at i*n + j"},
      {"activations", "NCHW: batch, channels, rows, columns"},
      {"filters", "KCRS: output channels, input channels, filter rows, filter columns"},
      {"conv2d", "cross-correlation (no filter flip), as in every deep-learning framework; `pass` says which of the "
                 "three computations of a convolution layer the workload is: forward (y from x and w), backward-data "
                 "(dx from dy and w), backward-filter (dw from x and dy); one stride and one zero padding for both "
                 "spatial axes; no bias, dilation 1, groups 1"},
      {"batchinv", "a matmul C = A @ B (m x k times k x n) whose rows `rows_output.row_indices` detaudit also "
                   "computes one at a time; batch invariance holds when each such row equals the same row of C bit "
                   "for bit. Writing rows_output is optional: without it the import measures C only"},
      {"reduce", "sum, dot and norm give one float32, a 0-dimensional array (shape ()); softmax a rows x cols array"},
      {"how_to_run", "load each input file as it is (do not regenerate, convert, reorder or copy it into another "
                     "layout on the way in unless the op needs it), run the op once per repeat, and write repeat r's "
                     "output to output.file_pattern with {r} = 0, 1, 2, ... in output.dtype and output.shape, C order. "
                     "detaudit import reads repeats 0, 1, ... up to the first missing file; remove the outputs of an "
                     "earlier run first"},
      {"producer", std::string("optional ") + kProducerFile +
                       ": {\"describe\": \"what ran, in words\", \"details\": {\"key\": \"value\"}, \"seconds\": "
                       "{\"<workload id>\": [seconds of each repeat]}}, recorded with the observations"},
      {"fingerprint", "detaudit fingerprints an output as the XXH3-128 of its data bytes (the .npy file without "
                      "its header); two outputs are bit-identical when their fingerprints are equal"},
  };
}

Status write_npy_file(const std::string& path, const std::string& dtype, const std::vector<uint64_t>& shape,
                      const std::vector<uint8_t>& bytes) {
  const std::vector<uint8_t> f = npy_encode(dtype, shape, bytes.data(), bytes.size());
  return write_file_atomic(path, std::string(f.begin(), f.end()), Own::kNpy);
}

}  // namespace

std::string export_id(const Spec& workload) { return safe_file_name(workload.str()); }

// A spec's inputs (and oracle) are generated in memory: one whose estimate exceeds what the machine has
// available is refused in one line before anything is allocated.
Status fits_in_memory(const Spec& w, double need, const std::string& where) {
  std::string source;
  const uint64_t have = available_memory_bytes(&source);
  if (have == 0 || need <= double(have)) return Status::ok();
  return Status::invalid(fmt::format("{}: {} would need {:.1f} GiB of memory; {:.1f} GiB are available ({})", where,
                                     w.str(), need / (1u << 30), double(have) / (1u << 30), source));
}

namespace {

// The oracle of a large workload takes seconds (a 1024^3 matmul, 3 s): it is computed on a thread of its
// own while this one watches for a signal, so export and import stop within a fraction of a second of one.
// An abandoned computation ends with the process; it holds its own copies of what it uses (`work` is
// copied, and writes only into the job's own T).
template <class T>
Status unless_interrupted(std::function<Status(T*)> work, T* out) {
  struct Job {
    T value{};
    Status st = Status::ok();
    std::atomic<bool> done{false};
  };
  auto job = std::make_shared<Job>();
  std::thread([job, work] {
    job->st = work(&job->value);
    job->done.store(true, std::memory_order_release);
  }).detach();
  // A signal before the work ends stops it, even when the work ends before this thread first looks.
  for (;;) {
    if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
    if (job->done.load(std::memory_order_acquire)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *out = std::move(job->value);
  return job->st;
}

Status oracle_unless_interrupted(const Spec& w, std::vector<uint8_t>* oracle, Fingerprint* inputs) {
  std::pair<std::vector<uint8_t>, Fingerprint> r;
  const Status st = unless_interrupted<std::pair<std::vector<uint8_t>, Fingerprint>>(
      [w](std::pair<std::vector<uint8_t>, Fingerprint>* o) { return compute_oracle(w, &o->first, &o->second); }, &r);
  *oracle = std::move(r.first);
  *inputs = r.second;
  return st;
}

}  // namespace

Status export_workloads(const std::vector<Spec>& workloads, const std::string& dir,
                        const std::function<void(const std::string&)>& progress) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return Status::invalid(
        fmt::format("{}: cannot create the directory: {}", dir, ec ? ec.message() : "not a directory"));
  }
  // A runner's notes belong to the export they ran: a new export drops them.
  fs::remove(dir + "/" + kProducerFile, ec);
  OrderedJson entries = OrderedJson::array();
  std::set<std::string> ids;
  for (const Spec& w : workloads) {
    if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
    if (!ids.insert(export_id(w)).second) continue;
    DETAUDIT_RETURN_IF_ERROR(fits_in_memory(w, estimate_memory(w).total(), "export"));
    const Layout l = layout_of(w);
    std::vector<std::vector<uint8_t>> inputs;
    Fingerprint fp, oracle_inputs;
    std::vector<uint8_t> oracle;
    Status st = capture_inputs(w, l, &inputs, &fp);
    if (st) st = oracle_unless_interrupted(w, &oracle, &oracle_inputs);
    if (st && oracle_inputs != fp) st = Status::error("internal: the oracle of " + w.str() + " saw other inputs");
    if (st.code() == Status::Code::kInterrupted) return st;
    if (!st) {
      return Status::invalid(fmt::format("{}: {}", w.str(), st.message()));
    }
    const OrderedJson e = manifest_entry(w, l, fp);
    for (size_t i = 0; i < inputs.size(); ++i)
      DETAUDIT_RETURN_IF_ERROR(
          write_npy_file(dir + "/" + e["inputs"][i]["file"].get<std::string>(), l.dtype, l.inputs[i].shape, inputs[i]));
    DETAUDIT_RETURN_IF_ERROR(
        write_npy_file(dir + "/" + e["oracle"]["file"].get<std::string>(), l.dtype, l.output.shape, oracle));
    entries.push_back(e);
    if (progress) progress(fmt::format("exported {} as {}.*.npy", w.str(), export_id(w)));
  }
  // A signal during the last workload: stop before the manifest, as between workloads.
  if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
  const OrderedJson m = {{"schema", kExportSchema},       {"tool", "detaudit"},
                  {"tool_version", DETAUDIT_VERSION}, {"tool_commit", git_commit()},
                  {"created_at", utc_now_iso8601()},  {"conventions", conventions()},
                  {"workloads", entries}};
  return write_file_atomic(dir + "/" + kManifestFile, m.dump(1) + "\n", Own::kExport);
}

namespace {

// ---- import: the manifest, the framework's outputs, the producer's notes ---------------------------------

struct ManifestWorkload {
  Spec spec;
  Layout layout;
  Fingerprint inputs;
  std::string id;
};

Status load_manifest(const std::string& dir, std::vector<ManifestWorkload>* out) {
  const std::string path = dir + "/" + kManifestFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status::invalid(path + ": missing (DIR must be a directory written by `detaudit export`)");
  }
  Json j;
  DETAUDIT_RETURN_IF_ERROR(load_json_document(path, kExportSchema, "export manifest", &j));
  const Json version = j.value("tool_version", Json());
  if (!version.is_string() || version.get<std::string>() != DETAUDIT_VERSION) {
    return Status::invalid(
        fmt::format("{}: written by detaudit {}, this is detaudit {}: export again with this version (its inputs, "
                    "layout and oracle may differ)",
                    path, version.is_string() ? version.get<std::string>() : version.dump(), DETAUDIT_VERSION));
  }
  // The manifest is detaudit's, whole: its header as export writes it (the conventions are what a framework
  // reads the files by, so an edited or missing one would have it read them otherwise), no other key.
  if (const std::string k = unknown_field(j, {"schema", "tool", "tool_version", "tool_commit", "created_at",
                                              "conventions", "workloads"});
      !k.empty())
    return Status::invalid(fmt::format("{}: \"{}\" is not a key of an export manifest", path, shown_safely(k.substr(0, 40))));
  if (j.value("tool", Json()) != "detaudit")
    return Status::invalid(fmt::format("{}: \"tool\" is {}, not \"detaudit\"", path, shown_safely(j.value("tool", Json()).dump().substr(0, 40))));
  if (!j.contains("tool_commit") || !j["tool_commit"].is_string())
    return Status::invalid(path + ": \"tool_commit\" must be a string");
  if (!j.contains("created_at") || !j["created_at"].is_string() || !is_utc_iso8601(j["created_at"].get<std::string>()) ||
      j["created_at"].get<std::string>() > utc_iso8601(std::time(nullptr) + 86400))
    return Status::invalid(path + ": \"created_at\" must be a time (YYYY-MM-DDTHH:MM:SSZ), not in the future");
  if (j.value("conventions", Json()) != Json::parse(conventions().dump()))
    return Status::invalid(path + ": \"conventions\" is not what this detaudit exports (edited or removed): export again");
  const Json ws = j.value("workloads", Json());
  if (!ws.is_array() || ws.empty()) {
    return Status::invalid(path + ": \"workloads\" must be a non-empty array");
  }
  std::set<std::string> ids;
  for (size_t i = 0; i < ws.size(); ++i) {
    const std::string where = fmt::format("{}: workloads[{}]", path, i);
    ManifestWorkload m;
    if (!ws[i].is_object() || !ws[i].contains("spec") || !ws[i]["spec"].is_string())
      return Status::invalid(where + ".spec must be a string");
    if (Status st = parse_workload(ws[i]["spec"].get<std::string>(), &m.spec); !st)
      return Status::invalid(where + ".spec: " + st.message());
    DETAUDIT_RETURN_IF_ERROR(fits_in_memory(m.spec, estimate_memory(m.spec).total(), where));
    m.layout = layout_of(m.spec);
    m.id = export_id(m.spec);
    Status st = capture_inputs(m.spec, m.layout, nullptr, &m.inputs);
    if (!st) {
      return Status::invalid(where + ": " + st.message());
    }
    const Json want = Json::parse(manifest_entry(m.spec, m.layout, m.inputs).dump());
    std::string differs;
    for (auto& [key, value] : want.items())
      if (differs.empty() && ws[i].value(key, Json()) != value) differs = "\"" + key + "\"";
    for (auto& [key, value] : ws[i].items())
      if (differs.empty() && !want.contains(key)) differs = "\"" + key + "\" (not a key of an export)";
    if (!differs.empty()) {
      return Status::invalid(
          fmt::format("{} ({}): {} is not what this detaudit exports for the spec (edited, or written by another "
                      "build): export again",
                      where, m.spec.str(), differs));
    }
    if (!ids.insert(m.id).second) {
      return Status::invalid(fmt::format("{}: {} is listed twice", where, m.spec.str()));
    }
    out->push_back(std::move(m));
  }
  return Status::ok();
}

}  // namespace

Status read_manifest_specs(const std::string& dir, std::vector<Spec>* specs) {
  std::vector<ManifestWorkload> ms;
  DETAUDIT_RETURN_IF_ERROR(load_manifest(dir, &ms));
  specs->clear();
  for (auto& m : ms) specs->push_back(m.spec);
  return Status::ok();
}

namespace {

// One output file checked against the manifest's dtype and shape.
Status read_checked(const std::string& path, const std::string& dtype, const std::vector<uint64_t>& shape,
                    NpyArray* a) {
  // dtype and shape are judged from the header, before the data is read (a wrong header can declare GiB).
  Status st = read_npy(path, a, [&](const NpyArray& h) {
    if (h.descr != dtype)
      return Status::invalid(
          fmt::format("{}: dtype '{}', the manifest expects '{}' ({})", path, h.descr, dtype, type_word(dtype)));
    if (h.shape != shape)
      return Status::invalid(
          fmt::format("{}: shape {}, the manifest expects {}", path, npy_shape_text(h.shape), npy_shape_text(shape)));
    return Status::ok();
  });
  if (!st) {
    return Status::invalid(st.message());
  }
  return Status::ok();
}

// The input files are the exported bytes: a framework that ran on an input damaged or replaced since the export
// computed another workload, and its outputs would be judged (and its error blamed) as this one's.
Status exported_inputs_intact(const std::string& dir, const ManifestWorkload& m) {
  std::vector<std::vector<uint8_t>> inputs;
  Fingerprint fp;
  DETAUDIT_RETURN_IF_ERROR(capture_inputs(m.spec, m.layout, &inputs, &fp));
  for (size_t i = 0; i < m.layout.inputs.size(); ++i) {
    const std::string path = dir + "/" + m.id + "." + m.layout.inputs[i].name + ".npy";
    NpyArray a;
    if (Status st = read_checked(path, m.layout.dtype, m.layout.inputs[i].shape, &a); !st)
      return Status::invalid(fmt::format("{} (an exported input: export again)", st.message()));
    if (a.data != inputs[i])
      return Status::invalid(fmt::format("{}: not the input detaudit exported for {} (its bytes differ): the framework "
                                         "ran on another input; export again",
                                         path, m.spec.str()));
  }
  return Status::ok();
}

struct Outputs {
  std::vector<std::string> fingerprints;
  std::vector<std::vector<uint8_t>> distinct;  // the data of each new fingerprint, in order of appearance
  std::vector<uint8_t> first;                  // repeat 0's data (batch invariance)
  std::optional<BatchInvariance> batch;
};

Status read_outputs(const std::string& dir, const ManifestWorkload& m, Outputs* out) {
  std::set<std::string> seen;
  for (int r = 0; r < int(kMaxRepeats); ++r) {
    const std::string path = dir + "/" + output_file(m.id, r);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      if (r > 0) break;
      return Status::invalid(fmt::format("{}: missing: no output of {} (the manifest names {}, r = 0, 1, ...)", path,
                                         m.spec.str(), output_pattern(m.id)));
    }
    NpyArray a;
    DETAUDIT_RETURN_IF_ERROR(read_checked(path, m.layout.dtype, m.layout.output.shape, &a));
    const std::string hex = fingerprint_bytes(a.data.data(), a.data.size()).hex();
    out->fingerprints.push_back(hex);
    if (r == 0) out->first = a.data;
    if (seen.insert(hex).second) out->distinct.push_back(std::move(a.data));
  }
  // Outputs are numbered from 0 without a gap: one past the first missing number would be left out unseen (a
  // repeat that differed among them).
  {
    const std::string prefix = m.id + ".out.", suffix = ".npy";
    const size_t have = out->fingerprints.size();
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
        continue;
      const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (digits.find_first_not_of("0123456789") != std::string::npos) continue;
      if (digits.size() <= 9 && std::stoul(digits) < have) continue;  // one of those read
      if (have == size_t(kMaxRepeats))
        return Status::invalid(fmt::format("{}/{}: more outputs than the {} repeats detaudit reads", dir,
                                           shown_safely(name.substr(0, 120)), kMaxRepeats));
      return Status::invalid(fmt::format("{}/{}: an output after a gap: {} is missing (outputs are numbered from 0 "
                                           "without a gap, and a gap would leave this one out)",
                                           dir, shown_safely(name.substr(0, 120)), output_file(m.id, int(have))));
    }
  }
  if (m.layout.rows.empty()) return Status::ok();
  const std::string path = dir + "/" + rows_file(m.id);
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::ok();  // optional: batch invariance is then not measured
  NpyArray rows;
  const uint64_t n = m.layout.output.shape[1];
  DETAUDIT_RETURN_IF_ERROR(read_checked(path, m.layout.dtype, {m.layout.rows.size(), n}, &rows));
  BatchInvariance b;
  const size_t row_bytes = size_t(n) * 4;
  for (size_t j = 0; j < m.layout.rows.size(); ++j) {
    ++b.rows_checked;
    if (std::memcmp(rows.data.data() + j * row_bytes, out->first.data() + m.layout.rows[j] * row_bytes, row_bytes) != 0)
      ++b.rows_differing;
  }
  out->batch = b;
  return Status::ok();
}

struct Producer {
  std::string describe;
  std::map<std::string, std::string> details;
  std::map<std::string, std::vector<double>> seconds;
};

Status load_producer(const std::string& dir, Producer* p) {
  const std::string path = dir + "/" + kProducerFile;
  std::error_code ec;
  if (!fs::exists(path, ec)) return Status::ok();
  std::string text;
  DETAUDIT_RETURN_IF_ERROR(read_regular_file(path, "producer file", &text));
  // Strictly first (a key twice, NUL or trailing bytes refused), then in the order the producer wrote it.
  nlohmann::json strict;
  DETAUDIT_RETURN_IF_ERROR(parse_json_text(text, path, &strict));
  const Json j = Json::parse(text, nullptr, false);
  auto bad = [&](const std::string& why) { return Status::invalid(path + ": " + why); };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object (truncated or corrupt?)");
  for (auto& [k, v] : j.items()) {
    if (k == "describe") {
      if (!v.is_string()) return bad("\"describe\" must be a string");
      p->describe = v.get<std::string>();
    } else if (k == "details") {
      if (!v.is_object()) return bad("\"details\" must be an object of strings");
      for (auto& [dk, dv] : v.items()) {
        if (!dv.is_string()) return bad(fmt::format("details.{} must be a string", dk));
        p->details[dk] = dv.get<std::string>();
      }
    } else if (k == "seconds") {
      if (!v.is_object()) return bad("\"seconds\" must be an object of arrays of numbers");
      for (auto& [id, s] : v.items()) {
        if (!s.is_array()) return bad(fmt::format("seconds.{} must be an array of numbers", id));
        for (auto& x : s)
          if (!x.is_number() || !plausible_seconds(x.get<double>()))
            return bad(fmt::format("seconds.{} must hold times of 0, or from a nanosecond (a clock's tick) to a year, "
                                   "in seconds", id));
        p->seconds[id] = s.get<std::vector<double>>();
      }
    } else {
      return bad(fmt::format("unknown key \"{}\" (known: describe, details, seconds)", k));
    }
  }
  return Status::ok();
}

// cpu-ref's output and error bound, computed here: a results directory's .oracle cache is never read (its checksum
// has no secret; an entry rewritten whole, with the results edited to vouch for it, would judge the framework
// against another output).
Status oracle_of(const ManifestWorkload& m, OracleEntry* e, const std::function<void(const std::string&)>& progress) {
  // On its own thread while this one watches for a signal (a 1280^3 f64 matmul ignored Ctrl-C for 13 s).
  if (progress) progress(fmt::format("computing cpu-ref's oracle of {}", m.spec.str()));
  const Spec spec = m.spec;
  DETAUDIT_RETURN_IF_ERROR(unless_interrupted<OracleEntry>(
      [spec](OracleEntry* o) { return compute_oracle(spec, &o->payload, &o->inputs, &o->bound); }, e));
  if (e->inputs != m.inputs) return Status::error("internal: the oracle of " + m.spec.str() + " saw other inputs");
  return Status::ok();
}

OracleDistance distance(const ManifestWorkload& m, const std::vector<std::vector<uint8_t>>& outputs, const OracleEntry& e) {
  OracleDistance dist;
  const ErrorBound* b = e.bound.bound.empty() ? nullptr : &e.bound;
  for (auto& o : outputs) {
    dist.merge(m.layout.dtype == "<f8"
                   ? compare_to_oracle(reinterpret_cast<const double*>(o.data()),
                                       reinterpret_cast<const double*>(e.payload.data()), o.size() / 8, b)
                   : compare_to_oracle(reinterpret_cast<const float*>(o.data()),
                                       reinterpret_cast<const float*>(e.payload.data()), o.size() / 4, b));
  }
  return dist;
}

}  // namespace

Status read_external_outputs(const std::string& dir, const std::string& name, std::vector<Observation>* out,
                             const std::function<void(const std::string&)>& progress) {
  Spec target;
  DETAUDIT_RETURN_IF_ERROR(parse_target(imported_backend().name + "?name=" + name, &target));
  std::vector<ManifestWorkload> ms;
  DETAUDIT_RETURN_IF_ERROR(load_manifest(dir, &ms));
  Producer producer;
  DETAUDIT_RETURN_IF_ERROR(load_producer(dir, &producer));
  // Every output is read and checked before any oracle is computed.
  std::vector<Outputs> outs(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
    DETAUDIT_RETURN_IF_ERROR(exported_inputs_intact(dir, ms[i]));
    DETAUDIT_RETURN_IF_ERROR(read_outputs(dir, ms[i], &outs[i]));
  }
  for (auto& entry : producer.seconds) {
    // Not a structured binding: clang 14 (the fuzz and sanitizer builds) cannot capture one in a lambda.
    const std::string& id = entry.first;
    const auto& s = entry.second;
    auto it = std::find_if(ms.begin(), ms.end(), [&](const ManifestWorkload& m) { return m.id == id; });
    if (it == ms.end() || s.size() != outs[size_t(it - ms.begin())].fingerprints.size()) {
      return Status::invalid(
          fmt::format("{}/{}: seconds.{} {}", dir, kProducerFile, id,
                      it == ms.end() ? "names no workload of the manifest" : "must hold one number per output file"));
    }
  }
  std::error_code ec;
  const std::string from = fs::absolute(dir, ec).lexically_normal().string();
  const std::string at = utc_now_iso8601();
  out->clear();
  std::vector<Observation> done;  // handed back only whole: an interruption leaves *out empty
  for (size_t i = 0; i < ms.size(); ++i) {
    if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
    Observation o;
    o.workload = ms[i].spec.str();
    o.target = target.str();
    o.workload_spec = ms[i].spec, o.target_spec = target;
    o.repeats = int(outs[i].fingerprints.size());
    o.fingerprints = outs[i].fingerprints;
    o.distinct = count_distinct(o.fingerprints);
    OracleEntry e;
    if (Status st = oracle_of(ms[i], &e, progress); !st) {
      if (st.code() == Status::Code::kInterrupted) return st;  // nothing written: the same command resumes
      return Status::invalid(fmt::format("{}: oracle: {}", ms[i].spec.str(), st.message()));
    }
    o.oracle = distance(ms[i], outs[i].distinct, e);
    o.batch = outs[i].batch;
    if (auto s = producer.seconds.find(ms[i].id); s != producer.seconds.end()) o.seconds = s->second;
    o.details = producer.details;
    o.details["imported_from"] = from;
    o.details["imported_at"] = at;
    o.describe = producer.describe.empty() ? "outputs imported from " + from : producer.describe;
    if (progress)
      progress(fmt::format("compared {} ({}/{}): {} output(s), {} distinct", o.workload, i + 1, ms.size(), o.repeats,
                           o.distinct));
    done.push_back(std::move(o));
  }
  *out = std::move(done);
  return Status::ok();
}

Status merge_external(const std::string& results_dir, const std::vector<Observation>& obs, const std::string& command,
                      Results* out) {
  const std::string path = results_file(results_dir);
  Results r;
  std::error_code ec;
  if (fs::exists(path, ec)) {
    DETAUDIT_RETURN_IF_ERROR(load_checked_results(path, &r));
    if (!r.training.empty())
      return Status::invalid(
          fmt::format("{}: holds a training design ({} runs); a framework's outputs go beside probe "
                      "results, not into training runs: choose another --out",
                      path, r.training.size()));
    // An import's own plan names what was imported: another framework (or workload) imported into it joins the
    // plan, as its cells join the results.
    if (r.plan.value("suite", "") == "import") {
      auto add = [&](const char* list, const std::string& name) {
        if (!r.plan.contains(list) || !r.plan[list].is_array()) r.plan[list] = Json::array();
        if (std::find(r.plan[list].begin(), r.plan[list].end(), name) == r.plan[list].end()) r.plan[list].push_back(name);
      };
      for (auto& o : obs) {
        add("targets", o.target);
        add("workloads", o.workload);
        r.plan["repeats"] = std::max(r.plan.value("repeats", 0), o.repeats);
      }
    }
  } else {
    // A directory of its own: this machine's description, and a plan that names what was imported (a probe
    // run with --out here later refuses it as another plan instead of mixing the two).
    r.started_at = r.finished_at = utc_now_iso8601();
    r.command = command;
    r.machine = machine_fingerprint();
    Json targets = Json::array(), workloads = Json::array();
    std::set<std::string> ts;
    int repeats = 0;
    for (auto& o : obs) {
      if (ts.insert(o.target).second) targets.push_back(o.target);
      workloads.push_back(o.workload);
      repeats = std::max(repeats, o.repeats);
    }
    r.plan = {{"suite", "import"}, {"targets", targets}, {"workloads", workloads}, {"repeats", repeats}};
  }
  std::set<std::pair<std::string, std::string>> replaced;
  for (auto& o : obs) replaced.insert({o.workload, o.target});
  std::erase_if(r.observations, [&](const Observation& o) { return replaced.count({o.workload, o.target}) > 0; });
  for (auto& o : obs) r.observations.push_back(o);
  *out = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
