#include "suites/diverge.hpp"

#include <fmt/format.h>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "contract/atomic_file.hpp"
#include "contract/metrics.hpp"
#include "contract/results.hpp"
#include "kernels/input_file.hpp"
#include "probes/child.hpp"
#include "probes/registry.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

namespace {

constexpr const char* kTraceSchema = "detaudit-diverge-trace/1";

}  // namespace

// ---- records -----------------------------------------------------------------------------------------

namespace {
DivergeRecord at_place(int step, int layer, std::string name, std::string pass, std::string tensor) {
  DivergeRecord r;
  r.step = step, r.layer = layer, r.name = std::move(name), r.pass = std::move(pass), r.tensor = std::move(tensor);
  return r;
}
}  // namespace

RecordOp record_op(const DivergeRecord& r) {
  const std::string& n = r.name;
  const std::string& t = r.tensor;
  if (r.pass == "update") return {"adam/sgd step (elementwise)", false};
  if (r.pass == "loss") {
    if (t == "value") return {"loss value: the mean over the batch's pixels (a reduction)", true};
    return {"loss gradient 2(y - x)/n (elementwise)", false};
  }
  if (n == "conv2d") {
    if (t == "y") return {"conv2d_fwd_bias: a reduction over C*R*S", true};
    if (t == "dw") return {"conv2d_bwd_filter: a reduction over N*P*Q", true};
    if (t == "db") return {"bias_grad: a reduction over N*P*Q", true};
    if (t == "dx") return {"conv2d_bwd_data: a reduction over K*R*S", true};
  }
  if (n == "linear") {
    if (t == "y") return {"gemm x W^T + bias_add: a reduction over the inputs", true};
    if (t == "dw") return {"gemm dy^T x: a reduction over the batch", true};
    if (t == "db") return {"bias_grad: a reduction over the batch", true};
    if (t == "dx") return {"gemm dy W: a reduction over the outputs", true};
  }
  if (n == "maxpool2") return {t == "y" ? "maxpool_fwd (a selection)" : "maxpool_bwd (a routing)", false};
  if (n == "upsample2") return {t == "y" ? "upsample2_fwd (a copy)" : "upsample2_bwd: 4 terms in a fixed order", false};
  if (n == "reshape") return {"reshape (a view)", false};
  return {t == "y" ? "unary " + n + " (elementwise)" : "unary_bwd " + n + " (elementwise)", false};
}

namespace {

// ---- trace lines ---------------------------------------------------------------------------------------

// One run's trace file, written as the run goes under a temporary name beside its path (flushed at the end
// of every step), and renamed into place when both runs finished: an interrupted or failed run leaves no
// partial trace, and an earlier run's traces (and the report beside them) as they were.
class TraceWriter {
 public:
  Status open(const std::string& path) {
    if (path.empty()) return Status::ok();
    return f_.open(path, Own::kDivergeTrace);
  }
  void line(const nlohmann::json& j) {
    if (f_.is_open()) f_.write(j.dump() + '\n');
  }
  Status flush() { return f_.flush(); }
  Status commit() { return f_.commit(); }

 private:
  StreamedFile f_;
};

// ---- lockstep ------------------------------------------------------------------------------------------

// The baton: run r computes only while turn == r. A run that finished or failed wakes the other.
class Baton {
 public:
  enum Wake { kTurn, kFailed, kOtherDone };
  // Waits for r's turn, or until the other run failed or finished.
  Wake wait(int r) {
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return turn_ == r || failed_ || done_[1 - r]; });
    return failed_ ? kFailed : turn_ == r ? kTurn : kOtherDone;
  }
  void give(int r) {
    std::lock_guard<std::mutex> l(m_);
    turn_ = r;
    cv_.notify_all();
  }
  void done(int r) {
    std::lock_guard<std::mutex> l(m_);
    done_[r] = true;
    cv_.notify_all();
  }
  bool other_done(int r) {
    std::lock_guard<std::mutex> l(m_);
    return done_[1 - r];
  }
  // The first failure is the one reported; the other run then stops.
  void fail(const Status& st) {
    std::lock_guard<std::mutex> l(m_);
    if (!failed_) first_error_ = st;
    failed_ = true;
    cv_.notify_all();
  }
  Status first_error() {
    std::lock_guard<std::mutex> l(m_);
    return first_error_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  int turn_ = 0;
  bool failed_ = false, done_[2] = {false, false};
  Status first_error_;
};

// What a run shows the comparison at a record: the record and its data (a tensor in the run's backend,
// or one host float for the loss value).
struct Pending {
  DivergeRecord rec;
  const Tensor* tensor = nullptr;
  float host = 0;
  std::vector<std::string> kernels;
};

Status download(const Pending& p, std::vector<float>* out) {
  if (!p.tensor) {
    out->assign(1, p.host);
    return Status::ok();
  }
  return p.tensor->download(out);
}

TensorDistance distance(const std::vector<float>& a, const std::vector<float>& b) {
  TensorDistance d;
  double diff2 = 0, norm2 = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    uint32_t ba, bb;
    std::memcpy(&ba, &a[i], 4);
    std::memcpy(&bb, &b[i], 4);
    if (ba == bb) continue;
    ++d.mismatched;
    d.max_ulp = std::max(d.max_ulp, ulp_distance(a[i], b[i]));
  }
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = double(a[i]) - double(b[i]);
    diff2 += e * e;
    norm2 += double(a[i]) * double(a[i]);
  }
  d.rel_l2 = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
  return d;
}

double squared_distance(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = double(a[i]) - double(b[i]);
    s += e * e;
  }
  return s;
}

struct Shared {
  const DivergeOptions* opt = nullptr;
  Baton baton;
  Pending pending;  // A's record, waiting for B's
  DivergeResult* result = nullptr;
  std::vector<double> weight_sq;  // per step
  size_t equal = 0;
  std::string kernel_note[2];     // why a run has no kernel list ("" : it has one)
  // B asks A for A's pending tensor: each backend is used only from its own run's thread (a GPU
  // backend's device and stream are bound there).
  bool fetch_request = false;
  std::vector<float> fetched;
  Status fetch_status;
};

const Status kStopped = Status::error("diverge: stopped because the other run failed");

// B's side: A's pending tensor, downloaded by A on A's thread.
Status fetch_a(Shared& sh, std::vector<float>* out) {
  sh.fetch_request = true;
  sh.baton.give(0);
  if (sh.baton.wait(1) == Baton::kFailed) return kStopped;
  *out = std::move(sh.fetched);
  return sh.fetch_status;
}

// A's side, paused at a record: serves B's requests until B gives the turn back for good.
Baton::Wake serve_b(Shared& sh) {
  for (;;) {
    const Baton::Wake w = sh.baton.wait(0);
    if (w != Baton::kTurn || !sh.fetch_request) return w;
    sh.fetch_request = false;
    sh.fetch_status = download(sh.pending, &sh.fetched);
    sh.baton.give(1);
  }
}

// B's side of one record, with A paused at the same record: compare, and measure what differs.
Status compare(Shared& sh, const Pending& b) {
  const Pending& a = sh.pending;
  if (!a.rec.same_place(b.rec))
    return Status::error("diverge: the runs are out of step: A at " + a.rec.where() + ", B at " + b.rec.where());
  DivergeResult& r = *sh.result;
  ++r.records;
  const int step = b.rec.step;
  if (b.rec.loss) {
    r.loss_a[size_t(step)] = *a.rec.loss;
    r.loss_b[size_t(step)] = *b.rec.loss;
    r.loss_gap[size_t(step)] = std::fabs(*a.rec.loss - *b.rec.loss);
  }
  if (a.rec.fp == b.rec.fp) {
    if (!r.first) ++sh.equal;
    return Status::ok();
  }
  const bool first = !r.first, update = b.rec.pass == "update";
  if (!first && !update) return Status::ok();
  std::vector<float> ha, hb;
  DETAUDIT_RETURN_IF_ERROR(fetch_a(sh, &ha));
  DETAUDIT_RETURN_IF_ERROR(download(b, &hb));
  if (update) sh.weight_sq[size_t(step)] += squared_distance(ha, hb);
  if (first) {
    FirstDivergence f;
    f.a = a.rec, f.b = b.rec;
    f.equal_before = sh.equal;
    f.distance = distance(ha, hb);
    f.op = record_op(a.rec);
    f.kernels_a = a.kernels, f.kernels_b = b.kernels;
    r.first = std::move(f);
  }
  return Status::ok();
}

// One run (r = 0: A, 1: B) on its own thread.
class Run {
 public:
  Run(Shared& sh, int r) : sh_(sh), r_(r), opt_(*sh.opt) {}
  // Runs to the end; on a failure tells the other run to stop. The status of the first failure is
  // sh.baton.first_error().
  void main();
  Status commit_trace() { return trace_.commit(); }

 private:
  Status body();
  Status setup(Autoencoder& model);
  Status observe(size_t layer, const Layer& l, LayerPass pass, const char* tensor, const Tensor& t);
  Status record(DivergeRecord rec, const Tensor* t, float host);
  void kernels_since_last(std::vector<std::string>* names);
  void restart_kernel_trace();

  Shared& sh_;
  int r_;
  const DivergeOptions& opt_;
  std::unique_ptr<Backend> be_;
  TraceWriter trace_;
  size_t layers_ = 0, records_ = 0;
  int step_ = 0;
  bool tracing_kernels_ = false;
  uint64_t trace_id_ = 0;
};

void Run::main() {
  // B starts when A shows its first record (or ends without one).
  if (r_ == 1 && sh_.baton.wait(1) == Baton::kFailed) return;
  Status st = body();
  if (!st) return sh_.baton.fail(st);
  sh_.baton.done(r_);
}

Status Run::body() {
  BackendOr made = (r_ == 0 ? opt_.make_a : opt_.make_b)();
  if (!made) return made.status();
  be_ = std::move(made).value();
  if (!be_) return Status::error("diverge: the backend factory returned nothing");
  const Dataset& d = *opt_.data;
  const TrainConfig& cfg = opt_.train;
  // What train_autoencoder does, with an observer on the network and a record per update.
  Autoencoder model(be_.get(), d.rows, d.cols);
  DETAUDIT_RETURN_IF_ERROR(model.init(cfg.init_seed));
  DETAUDIT_RETURN_IF_ERROR(setup(model));
  std::unique_ptr<Optimizer> optim = make_optimizer(be_.get(), cfg);
  const std::vector<Tensor*> params = model.params(), grads = model.grads();
  BatchFeed feed(d, cfg.batch_size, cfg.data_seed);
  DETAUDIT_RETURN_IF_ERROR(feed.init(be_.get()));
  model.net().set_observer([this](size_t layer, const Layer& l, LayerPass pass, const char* tensor, const Tensor& t) {
    return observe(layer, l, pass, tensor, t);
  });
  const auto& layers = model.net().layers();
  for (step_ = 0; step_ < cfg.batches; ++step_) {
    // Ctrl-C, SIGTERM, SIGHUP: both runs stop at the next step (the other is woken by the failure).
    if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
    const Tensor* batch = nullptr;
    DETAUDIT_RETURN_IF_ERROR(feed.load(uint64_t(step_), &batch));
    float loss = 0;
    DETAUDIT_RETURN_IF_ERROR(model.forward_backward(*batch, &loss));
    DivergeRecord v = at_place(step_, int(layers_), "mse", "loss", "value");
    v.loss = loss;
    DETAUDIT_RETURN_IF_ERROR(record(v, nullptr, loss));
    DETAUDIT_RETURN_IF_ERROR(optim->step(params, grads));
    for (size_t i = 0; i < layers.size(); ++i) {
      const std::vector<Tensor*> ps = layers[i]->params();
      for (size_t k = 0; k < ps.size(); ++k)
        DETAUDIT_RETURN_IF_ERROR(
            record(at_place(step_, int(i), layers[i]->name(), "update", k == 0 ? "w" : k == 1 ? "b" : "param"), ps[k], 0));
    }
    DETAUDIT_RETURN_IF_ERROR(trace_.flush());
    if (r_ == 1 && opt_.progress && ((step_ + 1) % 10 == 0 || step_ + 1 == cfg.batches))
      opt_.progress(fmt::format("step {}/{}{}", step_ + 1, cfg.batches, sh_.result->first ? " (diverged)" : ""));
  }
  if (tracing_kernels_) {
    std::vector<std::string> rest;
    kernels_since_last(&rest);
  }
  trace_.line({{"kind", "end"}, {"steps", cfg.batches}, {"records", records_}});
  return trace_.flush();
}

Status Run::setup(Autoencoder& model) {
  DivergeResult& r = *sh_.result;
  DivergeSide& s = r_ == 0 ? r.a : r.b;
  if (s.target.empty()) s.target = be_->name();
  s.backend = be_->describe();
  s.details = be_->details();
  DivergeDesign design = r.design;
  design.layers.clear();
  for (auto& l : model.net().layers()) design.layers.push_back(l->name());
  layers_ = design.layers.size();
  if (r_ == 0) r.design.layers = design.layers;  // B runs only once A holds its first record
  DETAUDIT_RETURN_IF_ERROR(trace_.open(s.trace));
  trace_.line({{"kind", "header"},
               {"schema", kTraceSchema},
               {"tool_version", DETAUDIT_VERSION},
               {"design", design_json(design)},
               {"target", s.target},
               {"backend", s.backend},
               {"details", details_json(s.details)}});
  if (!be_->traces_kernels()) return Status::ok();
  // CUPTI (kernels/backend.hpp trace_begin/trace_end): a record's window is the ops since the previous
  // record, fingerprinting excluded.
  tracing_kernels_ = true;
  restart_kernel_trace();
  return Status::ok();
}

void Run::kernels_since_last(std::vector<std::string>* names) {
  std::vector<KernelRecord> k;
  Status st = be_->trace_end(&k);
  if (!st) {
    tracing_kernels_ = false;
    sh_.kernel_note[r_] = st.message();
    return;
  }
  for (const KernelRecord& x : k) names->push_back(x.name);
}

void Run::restart_kernel_trace() {
  Status st = be_->trace_begin(++trace_id_ + (uint64_t(r_ + 1) << 40));
  if (!st) {
    tracing_kernels_ = false;
    sh_.kernel_note[r_] = st.message();
  }
}

Status Run::observe(size_t layer, const Layer& l, LayerPass pass, const char* tensor, const Tensor& t) {
  DivergeRecord rec = at_place(step_, int(layer), l.name(), to_string(pass), tensor);
  if (pass == LayerPass::kBackward && std::strcmp(tensor, "dy") == 0) {
    rec.layer = int(layers_);  // the loss gradient: an op of the loss, not of the last layer
    rec.name = "mse";
    rec.pass = "loss";
  }
  if (r_ == 1 && opt_.perturb) {
    Tensor view = t;  // shares the storage: a change reaches the next layer
    DETAUDIT_RETURN_IF_ERROR(opt_.perturb(step_, layer, pass, tensor, view));
  }
  return record(std::move(rec), &t, 0);
}

// Fingerprints, writes the trace line, then meets the other run at this record.
Status Run::record(DivergeRecord rec, const Tensor* t, float host) {
  Pending p;
  if (tracing_kernels_) kernels_since_last(&p.kernels);
  if (t) {
    DETAUDIT_RETURN_IF_ERROR(be_->fingerprint(t->data(), t->bytes(), &rec.fp));
    rec.count = t->size();
  } else {
    rec.fp = fingerprint_bytes(&host, sizeof host);
    rec.count = 1;
  }
  trace_.line(record_json(rec));
  ++records_;
  p.rec = std::move(rec);
  p.tensor = t;
  p.host = host;
  if (r_ == 0) {
    sh_.pending = std::move(p);
    sh_.baton.give(1);
    const Baton::Wake w = serve_b(sh_);
    if (w == Baton::kFailed) return kStopped;
    if (w == Baton::kOtherDone)
      return Status::error("diverge: run B ended before reaching A's " + sh_.pending.rec.where());
  } else {
    if (sh_.baton.other_done(1)) return Status::error("diverge: run A ended before reaching B's " + p.rec.where());
    DETAUDIT_RETURN_IF_ERROR(compare(sh_, p));
    sh_.baton.give(0);
    if (sh_.baton.wait(1) == Baton::kFailed) return kStopped;  // A done: B has no record left either
  }
  if (tracing_kernels_) restart_kernel_trace();
  return Status::ok();
}

Status check_options(const DivergeOptions& o) {
  if (!o.make_a || !o.make_b) return Status::invalid("diverge: two backends are needed");
  if (!o.data) return Status::invalid("diverge: no data");
  const TrainConfig& c = o.train;
  if (c.batch_size < 1) return Status::invalid("diverge: the batch size must be positive");
  if (c.batches < 1) return Status::invalid("diverge: at least one step");
  if (o.data->count < c.batch_size)
    return Status::invalid(fmt::format("diverge: {} images, fewer than one batch of {}", o.data->count, c.batch_size));
  if (o.data->rows % 4 || o.data->cols % 4)
    return Status::invalid(fmt::format("diverge: images of {} x {} (the autoencoder needs sides divisible by 4)",
                                       o.data->rows, o.data->cols));
  if (!o.trace_a.empty() && o.trace_a == o.trace_b)
    return Status::invalid("diverge: both runs would write the trace " + o.trace_a);
  return Status::ok();
}

}  // namespace

Status run_diverge(const DivergeOptions& opt, DivergeResult* out) {
  DETAUDIT_RETURN_IF_ERROR(check_options(opt));
  const TrainConfig& c = opt.train;
  DivergeResult r;
  r.design.batch_size = c.batch_size;
  r.design.steps = c.batches;
  r.design.init_seed = c.init_seed;
  r.design.data_seed = c.data_seed;
  r.design.optimizer = c.optimizer == TrainConfig::Optim::kAdam ? "adam" : "sgd";
  r.design.lr = c.lr;
  r.design.data_fingerprint = opt.data_fingerprint.empty() ? dataset_fingerprint(*opt.data) : opt.data_fingerprint;
  r.a.target = opt.target_a, r.b.target = opt.target_b;
  r.a.trace = opt.trace_a, r.b.trace = opt.trace_b;
  r.steps = c.batches;
  r.loss_a.assign(size_t(c.batches), 0.0);
  r.loss_b = r.loss_gap = r.loss_a;
  Shared sh;
  sh.opt = &opt;
  sh.result = &r;
  sh.weight_sq.assign(size_t(c.batches), 0.0);
  {
    Run a(sh, 0), b(sh, 1);
    std::thread ta([&] { a.main(); }), tb([&] { b.main(); });
    ta.join();
    tb.join();
    if (Status st = sh.baton.first_error(); !st) return st;  // (the partial traces go with the runs)
    DETAUDIT_RETURN_IF_ERROR(a.commit_trace());
    DETAUDIT_RETURN_IF_ERROR(b.commit_trace());
  }
  r.weight_l2.resize(sh.weight_sq.size());
  for (size_t i = 0; i < sh.weight_sq.size(); ++i) r.weight_l2[i] = std::sqrt(sh.weight_sq[i]);
  if (r.first) {
    std::vector<std::string> notes;
    for (int i = 0; i < 2; ++i)
      if (!sh.kernel_note[i].empty()) notes.push_back(fmt::format("{}: {}", i == 0 ? "A" : "B", sh.kernel_note[i]));
    r.first->kernels_note = fmt::format("{}", fmt::join(notes, "; "));
  }
  *out = std::move(r);
  return Status::ok();
}

// ---- offline: two traces ---------------------------------------------------------------------------------

namespace {

struct Trace {
  std::string path;
  DivergeDesign design;
  DivergeSide side;
  std::string tool_version;  // the version that wrote it
  std::vector<DivergeRecord> records;
  std::vector<size_t> lines;  // the line of each record
};

template <typename T>
bool field(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else if constexpr (std::is_same_v<T, double>) {
    if (!it->is_number()) return false;
  } else if constexpr (std::is_unsigned_v<T>) {
    // A value the field cannot hold is refused, not truncated ("layer": 2^62 read as 0 compared as equal).
    if (!it->is_number_unsigned() || it->get<uint64_t>() > std::numeric_limits<T>::max()) return false;
  } else {
    if (!it->is_number_integer()) return false;
    if (it->is_number_unsigned() ? it->get<uint64_t>() > uint64_t(std::numeric_limits<T>::max())
                                 : it->get<int64_t>() < int64_t(std::numeric_limits<T>::min()) ||
                                       it->get<int64_t>() > int64_t(std::numeric_limits<T>::max()))
      return false;
  }
  *out = it->get<T>();
  return true;
}

bool parse_design(const nlohmann::json& j, DivergeDesign* d, std::string* bad) {
  auto need = [&](bool ok, const char* k) {
    if (!ok && bad->empty()) *bad = k;
    return ok;
  };
  Fingerprint fp;  // data_fingerprint: 32 hex digits
  need(field(j, "model", &d->model), "model");
  need(field(j, "batch_size", &d->batch_size) && d->batch_size > 0, "batch_size");
  // At most a live run's steps: the comparison allocates per step, before the records are matched.
  need(field(j, "steps", &d->steps) && d->steps > 0 && d->steps <= kMaxTrainBatches, "steps");
  need(field(j, "init_seed", &d->init_seed), "init_seed");
  need(field(j, "data_seed", &d->data_seed), "data_seed");
  need(field(j, "optimizer", &d->optimizer) && (d->optimizer == "adam" || d->optimizer == "sgd"), "optimizer");
  need(field(j, "lr", &d->lr) && std::isfinite(d->lr) && d->lr > 0, "lr");
  need(field(j, "data_fingerprint", &d->data_fingerprint) && Fingerprint::from_hex(d->data_fingerprint, &fp),
       "data_fingerprint");
  auto l = j.find("layers");
  if (need(l != j.end() && l->is_array() && !l->empty(), "layers"))
    for (auto& x : *l) {
      if (!need(x.is_string(), "layers")) break;
      d->layers.push_back(x.get<std::string>());
    }
  return bad->empty();
}

bool parse_record(const nlohmann::json& j, DivergeRecord* r, std::string* bad) {
  std::string fp;
  const char* missing = !field(j, "step", &r->step) || r->step < 0     ? "step"
                        : !field(j, "layer", &r->layer) || r->layer < 0 ? "layer"
                        : !field(j, "name", &r->name)                   ? "name"
                        : !field(j, "pass", &r->pass)                   ? "pass"
                        : !field(j, "tensor", &r->tensor)               ? "tensor"
                        : !field(j, "n", &r->count)                     ? "n"
                        : !field(j, "fp", &fp) || !Fingerprint::from_hex(fp, &r->fp) ? "fp"
                                                                                     : nullptr;
  if (missing) {
    *bad = missing;
    return false;
  }
  if (j.contains("loss")) {
    double v = std::nan("");  // JSON has no NaN: a non-finite loss is written as null
    if (!j["loss"].is_null() && !field(j, "loss", &v)) {
      *bad = "loss";
      return false;
    }
    // The loss is the float whose bits the record's fingerprint is (a mean squared error: 0 or more), so a
    // loss edited apart from its fingerprint is refused rather than shown as a gap between equal bits. A null
    // loss stands for one that is no number: the bits of an infinity or of the NaN an operation makes.
    if (!std::isnan(v)) {
      const float f = float(v);
      if (double(f) != v || !(v >= 0) || r->count != 1 || fingerprint_bytes(&f, sizeof f) != r->fp) {
        *bad = "loss (not the float its fingerprint is)";
        return false;
      }
    } else {
      bool nonfinite = false;
      for (const uint32_t bits : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u})
        nonfinite = nonfinite || fingerprint_bytes(&bits, sizeof bits) == r->fp;
      if (r->count != 1 || !nonfinite) {
        *bad = "loss (null, but its fingerprint is not the bits of an infinity or a NaN)";
        return false;
      }
    }
    // Only the loss value's record holds the loss.
    if (r->pass != "loss" || r->tensor != "value") {
      *bad = "loss (only the loss value's record has one)";
      return false;
    }
    r->loss = v;
  }
  return true;
}

Status read_header(const Trace& t, const nlohmann::json& j, Trace* out) {
  std::string schema, kind;
  if (!field(j, "kind", &kind) || kind != "header" || !field(j, "schema", &schema) || schema != kTraceSchema)
    return Status::invalid(t.path + ":1: not a detaudit diverge trace (the first line is not a " + kTraceSchema +
                           " header)");
  auto d = j.find("design");
  std::string bad;
  if (d == j.end() || !d->is_object() || !parse_design(*d, &out->design, &bad) ||
      !field(j, "target", &out->side.target))
    return Status::invalid(t.path + ":1: the header's design field " + (bad.empty() ? std::string("target") : bad) +
                           " is missing or malformed");
  // Only the fields a header has, and a target this version parses (it is shown as the side's target).
  if (const std::string k = unknown_field(j, {"kind", "schema", "tool_version", "target", "backend", "design", "details"});
      !k.empty())
    return Status::invalid(t.path + ":1: \"" + k.substr(0, 40) + "\" is not a field of a trace's header");
  if (const std::string k = unknown_field(*d, {"model", "batch_size", "init_seed", "data_seed", "optimizer", "lr",
                                               "data_fingerprint", "layers", "steps"});
      !k.empty())
    return Status::invalid(t.path + ":1: design." + k.substr(0, 40) + " is not a field of a trace's design");
  // The version that wrote it: a version string as detaudit writes one (digits, dots, a suffix), no other value.
  {
    const auto v = j.find("tool_version");
    const std::string version = v != j.end() && v->is_string() ? v->get<std::string>() : "";
    if (!is_version_text(version))
      return Status::invalid(t.path + ":1: the header's tool_version is missing or not a version (digits, letters, . - +)");
    out->tool_version = version;
  }
  for (const char* k : {"backend"})
    if (auto b = j.find(k); b != j.end() && !b->is_string())
      return Status::invalid(fmt::format("{}:1: the header's {} must be a string", t.path, k));
  if (auto det = j.find("details"); det != j.end()) {
    if (!det->is_object()) return Status::invalid(t.path + ":1: the header's details must be an object of strings");
    for (auto& item : det->items())
      if (!item.value().is_string())
        return Status::invalid(t.path + ":1: the header's details must be an object of strings");
  }
  // Its strings are shown on a terminal and in the reports: no control character.
  std::vector<std::string> shown = {out->side.target};
  if (auto b = j.find("backend"); b != j.end() && b->is_string()) shown.push_back(b->get<std::string>());
  if (auto det = j.find("details"); det != j.end() && det->is_object())
    for (auto& item : det->items()) {
      shown.push_back(item.key());
      if (item.value().is_string()) shown.push_back(item.value().get<std::string>());
    }
  for (auto& text : shown)
    if (const int c = first_control_byte(text); c >= 0)
      return Status::invalid(fmt::format("{}:1: the header holds a control character (byte 0x{:02x})", t.path, c));
  field(j, "backend", &out->side.backend);
  if (auto det = j.find("details"); det != j.end() && det->is_object())
    for (auto& [k, v] : det->items())
      if (v.is_string()) out->side.details.emplace_back(k, v.get<std::string>());
  // The header describes one run: the model diverge traces, and a backend and details that are its target's (the
  // backend's name first; each detail that is a parameter of the target says what the target asked for, or
  // what "auto" resolved to).
  if (out->design.model != "autoencoder")
    return Status::invalid(fmt::format("{}:1: the header's design.model is \"{}\", but diverge traces the autoencoder",
                                       t.path, shown_safely(out->design.model.substr(0, 40))));
  // ... which trains with the optimizer and learning rate of its design, and diverge changes neither.
  if (const TrainConfig plain; out->design.optimizer != "adam" || out->design.lr != double(plain.lr))
    return Status::invalid(fmt::format("{}:1: the header's design trains with {} at lr {}, but diverge trains the "
                                       "autoencoder with adam at lr {}",
                                       t.path, out->design.optimizer, out->design.lr, double(plain.lr)));
  // The target is a spec, or a spec and one label in parentheses (how the run was forced: "cpu?order=atomic&threads=2
  // (forced order 1)").
  const std::string& written = out->side.target;
  const std::string spec = written.substr(0, written.find(' '));
  Spec target;
  if (Status st = parse_target(spec, &target); !st)
    return Status::invalid(fmt::format("{}:1: the header's target: {}", t.path, st.message()));
  if (written != spec && !(written.size() > spec.size() + 3 && written.compare(spec.size(), 2, " (") == 0 &&
                           written.back() == ')' && written.find_first_of("()", spec.size() + 2) == written.size() - 1))
    return Status::invalid(fmt::format("{}:1: the header's target \"{}\" is not a target spec (with at most one label "
                                       "in parentheses after it)",
                                       t.path, shown_safely(written.substr(0, 80))));
  // Only a backend that runs the autoencoder's training ops traces it (openblas has no bias add: its run stops
  // before the first record).
  if (!target_trains(target))
    return Status::invalid(fmt::format("{}:1: the header's target {} does not train (its backend lacks the "
                                       "autoencoder's training ops), so no run traced it",
                                       t.path, shown_safely(target.str().substr(0, 80))));
  // The backend's description and settings are what the target runs (probes/registry.hpp: for the host's own
  // backends, as the one made here describes itself, but for what "auto" resolves to on another CPU).
  const std::map<std::string, std::string> details(out->side.details.begin(), out->side.details.end());
  if (const std::string why = backend_claims_contradiction(target, out->side.backend, details, false, "backend");
      !why.empty())
    return Status::invalid(fmt::format("{}:1: the header's {}", t.path, why));
  return Status::ok();
}

// The autoencoder's tensor sizes, made by the model itself: each (layer, pass, tensor) a trace records holds
// per_example * batch + fixed elements, both linear in the image's pixels P (every layer keeps or quarters the
// spatial size; its linear layers map 2P values to the code and back). Measured once by a forward and backward pass
// on cpu-ref at P = 16 and P = 32 (4 x 4 and 4 x 8 images of one example): {layer, pass, tensor} -> (count at 16,
// count at 32) and whether it grows with the batch. Empty where the oracle backend cannot be made.
struct TensorSizes {
  std::vector<std::string> layers;
  std::map<std::tuple<int, std::string, std::string>, std::pair<std::pair<uint64_t, uint64_t>, bool>> sizes;
};
const TensorSizes& autoencoder_tensor_sizes() {
  static const TensorSizes known = [] {
    TensorSizes out;
    Spec ref;
    if (!parse_target(oracle_backend().name, &ref)) return out;
    BackendOr made = make_target_backend(ref);
    if (!made) return out;
    std::unique_ptr<Backend> be = std::move(made).value();
    for (int cols : {4, 8}) {
      Autoencoder model(be.get(), 4, cols);
      Tensor x;
      if (!model.init(1) || !Tensor::create(be.get(), Shape{1, 1, 4, cols}, &x) || !x.zero()) return TensorSizes{};
      std::map<std::tuple<int, std::string, std::string>, uint64_t> seen;
      const int layers = int(model.net().layers().size());
      model.net().set_observer([&](size_t layer, const Layer&, LayerPass pass, const char* tensor, const Tensor& t) {
        const bool loss = pass == LayerPass::kBackward && std::strcmp(tensor, "dy") == 0;
        seen[{loss ? layers : int(layer), loss ? "loss" : to_string(pass), tensor}] = t.size();
        return Status::ok();
      });
      float loss = 0;
      if (!model.forward_backward(x, &loss)) return TensorSizes{};
      for (size_t i = 0; i < model.net().layers().size(); ++i) {
        const std::vector<Tensor*> ps = model.net().layers()[i]->params();
        for (size_t k = 0; k < ps.size() && k < 2; ++k) seen[{int(i), "update", k == 0 ? "w" : "b"}] = ps[k]->size();
      }
      if (out.layers.empty())
        for (auto& l : model.net().layers()) out.layers.push_back(l->name());
      for (auto& [key, n] : seen) {
        auto& [counts, per_example] = out.sizes[key];
        (cols == 4 ? counts.first : counts.second) = n;
        per_example = std::get<1>(key) != "update" && std::get<2>(key) != "dw" && std::get<2>(key) != "db";
      }
    }
    return out;
  }();
  return known;
}

// "" when every record's size is the autoencoder's for the trace's batch size and one image size; else why not.
std::string autoencoder_size_problem(const Trace& t, const std::string& path) {
  const TensorSizes& known = autoencoder_tensor_sizes();
  if (t.design.model != "autoencoder" || known.sizes.empty() || t.design.layers != known.layers || t.records.empty() ||
      t.design.batch_size < 1)
    return "";
  const uint64_t batch = uint64_t(t.design.batch_size);
  // The image's pixels, from the first record's tensor: count(P) = a + b P (times the batch where it grows with it).
  auto line = [](const std::pair<uint64_t, uint64_t>& c) {
    const int64_t b = (int64_t(c.second) - int64_t(c.first)) / 16;
    return std::pair<int64_t, int64_t>{int64_t(c.first) - 16 * b, b};
  };
  const DivergeRecord& first = t.records.front();
  const auto f = known.sizes.find({first.layer, first.pass, first.tensor});
  if (f == known.sizes.end()) return "";
  const auto [fa, fb] = line(f->second.first);
  const uint64_t one = f->second.second ? first.count / batch : first.count;
  if (fb <= 0) return "";  // (a first record whose size no image changes says nothing of the image)
  if ((f->second.second && first.count % batch) || int64_t(one) < fa || (int64_t(one) - fa) % fb)
    return fmt::format("{}:{}: record field n is {}, which no image size gives the autoencoder's {} {} of layer {} in a "
                       "batch of {}",
                       path, t.lines[0], first.count, first.pass, first.tensor, first.layer, batch);
  const int64_t pixels = (int64_t(one) - fa) / fb;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const DivergeRecord& r = t.records[i];
    const auto k = known.sizes.find({r.layer, r.pass, r.tensor});
    if (k == known.sizes.end()) continue;  // (a record the model makes with no tensor: the loss value)
    const auto [a, b] = line(k->second.first);
    const uint64_t want = uint64_t(a + b * pixels) * (k->second.second ? batch : 1);
    if (r.count != want)
      return fmt::format("{}:{}: record field n is {}, but the autoencoder's {} {} of layer {} ({}) holds {} for a "
                         "batch of {} images of {} pixels",
                         path, t.lines[i], r.count, r.pass, r.tensor, r.layer, r.name, want, batch, pixels);
  }
  return "";
}

// "" when the trace's network is the autoencoder's and every step holds each record one step of it makes, once
// (its tensors as autoencoder_tensor_sizes saw them, and the loss's value); else why not. A trace without one layer's
// records at every step (its end line edited to match) would pass that layer by unseen, and blame the next op.
std::string autoencoder_records_problem(const Trace& t, const std::string& path) {
  const TensorSizes& known = autoencoder_tensor_sizes();
  if (known.sizes.empty()) return "";
  if (t.design.layers != known.layers)
    return fmt::format("{}:1: the header's design.layers ({}) are not the autoencoder's ({})", path,
                       shown_safely(fmt::format("{}", fmt::join(t.design.layers, ",")).substr(0, 200)),
                       fmt::join(known.layers, ","));
  if (t.records.empty()) return "";  // (a trace without records is refused by its step count)
  using Key = std::tuple<int, std::string, std::string>;
  std::set<Key> made;
  for (auto& [key, sizes] : known.sizes) made.insert(key);
  made.insert({int(known.layers.size()), "loss", "value"});
  auto named = [&](const Key& k) {
    const size_t layer = size_t(std::get<0>(k));
    return fmt::format("{} {} record of layer {} ({})", std::get<1>(k), std::get<2>(k), layer,
                       layer < known.layers.size() ? known.layers[layer] : std::string("mse"));
  };
  std::set<Key> seen;
  for (size_t i = 0; i <= t.records.size(); ++i) {
    // At the end of each step: every record the step makes was there.
    if (i == t.records.size() || (i > 0 && t.records[i].step != t.records[i - 1].step)) {
      for (const Key& k : made)
        if (!seen.count(k))
          return fmt::format("{}: step {} holds no {}, which every step of the autoencoder makes: the trace was cut "
                             "short or edited",
                             path, t.records[i - 1].step, named(k));
      seen.clear();
    }
    if (i == t.records.size()) break;
    const DivergeRecord& r = t.records[i];
    const Key k{r.layer, r.pass, r.tensor};
    if (!made.count(k))
      return fmt::format("{}:{}: the autoencoder makes no {}", path, t.lines[i], named(k));
    if (!seen.insert(k).second)
      return fmt::format("{}:{}: step {} holds the {} twice", path, t.lines[i], r.step, named(k));
  }
  return "";
}

Status read_trace(const std::string& path, Trace* t) {
  t->path = path;
  t->side.trace = path;
  std::string text;
  DETAUDIT_RETURN_IF_ERROR(read_regular_file(path, "trace", &text));
  std::istringstream f(text);
  std::string line;
  size_t n = 0;
  bool ended = false;
  while (std::getline(f, line)) {
    ++n;
    // A trace of many steps is read for seconds: a signal stops it at once.
    if (n % 4096 == 0 && interrupted())
      return Status::interrupted("interrupted by " + signal_description(interrupted()));
    const std::string at = fmt::format("{}:{}: ", path, n);
    if (ended) return Status::invalid(at + "a line after the end line");
    nlohmann::json j;
    // Strictly, as every file: a key twice in one record would let the first say one thing and the last another.
    if (Status st = parse_json_text(line, fmt::format("{}:{}", path, n), &j); !st) return st;
    if (!j.is_object()) return Status::invalid(at + "not a JSON object (a truncated or corrupt line)");
    if (n == 1) {
      DETAUDIT_RETURN_IF_ERROR(read_header(*t, j, t));
      continue;
    }
    std::string kind, bad;
    field(j, "kind", &kind);
    // Only the fields a trace line has: an unknown one is a lie or another program's, never ignored.
    if (const std::string k = kind == "end" ? unknown_field(j, {"kind", "records", "steps"})
                                            : unknown_field(j, {"kind", "step", "pass", "layer", "name", "tensor", "n",
                                                                "fp", "loss"});
        !k.empty())
      return Status::invalid(at + "\"" + k.substr(0, 40) + "\" is not a field of a trace's " +
                             (kind == "end" ? "end" : "record") + " line");
    if (kind == "record") {
      DivergeRecord r;
      if (!parse_record(j, &r, &bad)) return Status::invalid(at + "record field " + bad + " is missing or malformed");
      t->records.push_back(std::move(r));
      t->lines.push_back(n);
    } else if (kind == "end") {
      uint64_t records = 0;
      int steps = 0;
      if (!field(j, "records", &records) || records != t->records.size() || !field(j, "steps", &steps) ||
          steps != t->design.steps)
        return Status::invalid(at +
                               fmt::format("the end line does not match the trace ({} records, {} steps in the header)",
                                           t->records.size(), t->design.steps));
      ended = true;
    } else {
      return Status::invalid(at + "not a record or end line (kind \"" + kind + "\")");
    }
  }
  if (n == 0) return Status::invalid(path + ": empty, not a trace");
  if (!ended)
    return Status::invalid(
        fmt::format("{}:{}: truncated: the trace ends without its end line (the run did not finish)", path, n));
  // Every step runs the same ops, so a whole trace records each of its steps, each as often: one whose
  // records miss a step, or hold fewer of one, was cut (its end line edited to match) and proves nothing.
  std::map<int, size_t> per_step;
  // A tensor has the same size at every step, at least one element and no more than a batch of examples of
  // 2^24 elements each (far beyond any traced model's).
  std::map<std::tuple<int, std::string, std::string, std::string>, uint64_t> sizes;
  const uint64_t most = uint64_t(std::max(t->design.batch_size, 1)) << 24;
  std::map<std::string, int> last_layer;  // pass -> the layer of its last record in this step
  for (size_t i = 0; i < t->records.size(); ++i) {
    const DivergeRecord& r = t->records[i];
    // A record of the design's network: a layer it has (the loss is the one after the last), named as the header
    // names it, a pass and tensor a trace writes, in step order.
    static const std::set<std::string> kPasses = {"forward", "backward", "loss", "update"},
                                       kTensors = {"y", "dy", "dw", "db", "dx", "value", "w", "b"};
    const size_t layers = t->design.layers.size();
    std::string wrong;
    if (size_t(r.layer) > layers)
      wrong = fmt::format("layer is {}, but the design has {} layers (and the loss after them)", r.layer, layers);
    else if (size_t(r.layer) < layers && r.name != t->design.layers[size_t(r.layer)])
      wrong = fmt::format("name is \"{}\", but layer {} of the design is {}", shown_safely(r.name.substr(0, 40)),
                          r.layer, t->design.layers[size_t(r.layer)]);
    else if (!kPasses.count(r.pass))
      wrong = fmt::format("pass is \"{}\" (forward, backward, loss or update)", shown_safely(r.pass.substr(0, 40)));
    else if (!kTensors.count(r.tensor))
      wrong = fmt::format("tensor is \"{}\" (y, dy, dw, db, dx, value, w or b)", shown_safely(r.tensor.substr(0, 40)));
    else if (i > 0 && r.step < t->records[i - 1].step)
      wrong = fmt::format("step is {}, after a record of step {} (records are in step order)", r.step,
                          t->records[i - 1].step);
    // Within a step: the forward pass, then the loss and the backward pass, then the update.
    else if (auto phase = [](const std::string& p) { return p == "forward" ? 0 : p == "update" ? 2 : 1; };
             i > 0 && r.step == t->records[i - 1].step && phase(r.pass) < phase(t->records[i - 1].pass))
      wrong = fmt::format("pass is {}, after a record of pass {} in step {} (a step runs forward, then loss and "
                          "backward, then update)",
                          r.pass, t->records[i - 1].pass, r.step);
    // Each pass records its own tensors: the forward pass a layer's output, the loss its value and gradient (after
    // the last layer), the backward pass a layer's gradients, the update a layer's weights and bias; only a layer
    // with weights (conv2d, linear) has weight and bias gradients and an update.
    else if (const bool weighted = r.name == "conv2d" || r.name == "linear";
             (r.pass == "forward" && r.tensor != "y") ||
             (r.pass == "loss" && ((r.tensor != "value" && r.tensor != "dy") || size_t(r.layer) != layers || r.name != "mse")) ||
             (r.pass != "loss" && size_t(r.layer) == layers) ||
             (r.pass == "backward" && r.tensor != "dx" && !((r.tensor == "dw" || r.tensor == "db") && weighted)) ||
             (r.pass == "update" && !((r.tensor == "w" || r.tensor == "b") && weighted)))
      wrong = fmt::format("tensor is {} in the {} pass of layer {} ({}), which records no such tensor", r.tensor, r.pass,
                          r.layer, shown_safely(r.name.substr(0, 40)));
    // Within a pass of a step, the layers in the order the network runs them: the forward pass up the layers, the
    // backward pass down them, the update up them (a layer's tensors side by side).
    if (wrong.empty() && (i == 0 || r.step != t->records[i - 1].step)) last_layer.clear();
    if (auto last = last_layer.find(r.pass); wrong.empty() && last != last_layer.end() &&
                                              (r.pass == "forward"    ? r.layer <= last->second
                                               : r.pass == "backward" ? r.layer > last->second
                                               : r.pass == "update"   ? r.layer < last->second
                                                                      : false))
      wrong = fmt::format("layer is {}, after layer {} in the {} pass of step {} (the forward pass and the update go "
                          "up the layers, the backward pass down)",
                          r.layer, last->second, r.pass, r.step);
    last_layer[r.pass] = r.layer;
    if (!wrong.empty()) return Status::invalid(fmt::format("{}:{}: record field {}", path, t->lines[i], wrong));
    // The autoencoder's code is kAutoencoderCode values per example: its first linear layer's output holds
    // batch_size times that many (a header claiming another batch size than its records ran is refused).
    if (t->design.model == "autoencoder" && r.pass == "forward" && r.tensor == "y" && r.name == "linear" &&
        std::find(t->design.layers.begin(), t->design.layers.end(), "linear") - t->design.layers.begin() == r.layer &&
        r.count != uint64_t(std::max(t->design.batch_size, 0)) * kAutoencoderCode)
      return Status::invalid(fmt::format("{}:{}: record field n is {}, but the autoencoder's code of a batch of {} "
                                         "(the header's batch_size) holds {} x {} values",
                                         path, t->lines[i], r.count, t->design.batch_size, t->design.batch_size,
                                         kAutoencoderCode));
    const auto [it, first] = sizes.emplace(std::make_tuple(r.layer, r.name, r.pass, r.tensor), r.count);
    if (r.count < 1 || r.count > most || it->second != r.count)
      return Status::invalid(fmt::format("{}:{}: record field n is {}: {}", path, t->lines[i], r.count,
                                         r.count < 1 || r.count > most
                                             ? fmt::format("a tensor holds 1 to {} elements", most)
                                             : fmt::format("the same tensor held {} elements at an earlier step",
                                                           it->second)));
    (void)first;
  }
  if (const std::string why = autoencoder_size_problem(*t, path); !why.empty()) return Status::invalid(why);
  if (const std::string why = autoencoder_records_problem(*t, path); !why.empty()) return Status::invalid(why);
  for (auto& r : t->records) ++per_step[r.step];
  for (int step = 0; step < t->design.steps; ++step) {
    const size_t have = per_step.count(step) ? per_step[step] : 0;
    if (have == 0 || have != per_step[0])
      return Status::invalid(fmt::format("{}: step {} has {} records where step 0 has {} (of {} steps): the trace "
                                         "was cut short or edited",
                                         path, step, have, per_step[0], t->design.steps));
  }
  return Status::ok();
}

// The first design field in which two traces differ, with both values ("" : none).
std::string design_difference(const DivergeDesign& a, const DivergeDesign& b) {
  if (a.model != b.model) return fmt::format("model {} vs {}", a.model, b.model);
  if (a.batch_size != b.batch_size) return fmt::format("batch_size {} vs {}", a.batch_size, b.batch_size);
  if (a.init_seed != b.init_seed) return fmt::format("init_seed {} vs {}", a.init_seed, b.init_seed);
  if (a.data_seed != b.data_seed) return fmt::format("data_seed {} vs {}", a.data_seed, b.data_seed);
  if (a.optimizer != b.optimizer) return fmt::format("optimizer {} vs {}", a.optimizer, b.optimizer);
  if (a.lr != b.lr) return fmt::format("lr {} vs {}", a.lr, b.lr);
  if (a.data_fingerprint != b.data_fingerprint)
    return fmt::format("data_fingerprint {} vs {}", a.data_fingerprint, b.data_fingerprint);
  if (a.layers != b.layers)
    return fmt::format("layers {} vs {}", fmt::join(a.layers, ","), fmt::join(b.layers, ","));
  return "";
}

}  // namespace

Status compare_traces(const std::string& path_a, const std::string& path_b, DivergeResult* out) {
  Trace a, b;
  DETAUDIT_RETURN_IF_ERROR(read_trace(path_a, &a));
  DETAUDIT_RETURN_IF_ERROR(read_trace(path_b, &b));
  if (std::string d = design_difference(a.design, b.design); !d.empty())
    return Status::invalid(fmt::format("{}:1 and {}:1: traces of different designs: {}", path_a, path_b, d));
  // The autoencoder and its ops are detaudit's own code: two versions may compute a layer differently, and the op
  // named first would then be blamed for the tool's change. Traces are compared only within one version.
  if (a.tool_version != b.tool_version)
    return Status::invalid(fmt::format("{}:1 and {}:1: traces written by different detaudit versions ({} and {}): "
                                       "the model's ops may differ between versions, so a divergence could not be laid "
                                       "on the op; trace both runs with one version",
                                       path_a, path_b, shown_safely(a.tool_version), shown_safely(b.tool_version)));
  DivergeResult r;
  r.offline = true;
  r.design = a.design;
  r.a = a.side, r.b = b.side;
  r.steps = std::min(a.design.steps, b.design.steps);  // a longer run is compared over the shorter's steps
  r.design.steps = r.steps;
  r.loss_a.assign(size_t(r.steps), 0.0);
  r.loss_b = r.loss_gap = r.loss_a;
  size_t equal = 0;
  for (size_t i = 0; i < a.records.size() && i < b.records.size(); ++i) {
    const DivergeRecord &x = a.records[i], &y = b.records[i];
    if (x.step >= r.steps && y.step >= r.steps) break;
    if (!x.same_place(y))
      return Status::invalid(fmt::format("{}:{} and {}:{}: the traces are out of step ({} vs {})", path_a, a.lines[i],
                                         path_b, b.lines[i], x.where(), y.where()));
    ++r.records;
    if (x.loss && y.loss) {
      r.loss_a[size_t(x.step)] = *x.loss;
      r.loss_b[size_t(x.step)] = *y.loss;
      r.loss_gap[size_t(x.step)] = std::fabs(*x.loss - *y.loss);
    }
    if (x.fp == y.fp) {
      if (!r.first) ++equal;
    } else if (!r.first) {
      FirstDivergence f;
      f.a = x, f.b = y;
      f.equal_before = equal;
      f.op = record_op(x);
      f.kernels_note = "offline: no kernel lists in traces";
      r.first = std::move(f);
    }
  }
  *out = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
