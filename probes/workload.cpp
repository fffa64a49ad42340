#include "probes/workload.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/cpu/ref.hpp"
#include "kernels/generator.hpp"

namespace detaudit {

namespace {
// Input streams: each tensor of a workload draws from its own counter stream.
constexpr uint64_t kStreamA = 1, kStreamB = 2, kStreamC = 3;

Dist dist_of(const Spec& s) { return s.get("dist") == "int" ? Dist::kInt : Dist::kUniform; }
uint64_t seed_of(const Spec& s) { return uint64_t(s.get_int("seed", 1)); }
}  // namespace

void* Workload::upload_floats(Backend& b, const std::vector<float>& v, Status* st) {
  void* p = b.alloc(v.size() * sizeof(float));
  if (!p) {
    *st = Status::error("allocation of " + std::to_string(v.size() * 4) + " bytes failed on " + b.name());
    return nullptr;
  }
  buffers_.push_back(p);
  input_hashes_ += fingerprint_bytes(v.data(), v.size() * sizeof(float)).hex();
  *st = b.upload(p, v.data(), v.size() * sizeof(float));
  return p;
}
void* Workload::upload_doubles(Backend& b, const std::vector<double>& v, Status* st) {
  void* p = b.alloc(v.size() * sizeof(double));
  if (!p) {
    *st = Status::error("allocation of " + std::to_string(v.size() * 8) + " bytes failed on " + b.name());
    return nullptr;
  }
  buffers_.push_back(p);
  input_hashes_ += fingerprint_bytes(v.data(), v.size() * sizeof(double)).hex();
  *st = b.upload(p, v.data(), v.size() * sizeof(double));
  return p;
}
void* Workload::alloc_zero(Backend& b, size_t bytes, Status* st) {
  void* p = b.alloc(bytes);
  if (!p) {
    *st = Status::error("allocation of " + std::to_string(bytes) + " bytes failed on " + b.name());
    return nullptr;
  }
  buffers_.push_back(p);
  *st = b.zero(p, bytes);
  return p;
}
void Workload::teardown(Backend& b) {
  for (void* p : buffers_) b.free(p);
  buffers_.clear();
  input_hashes_.clear();
  out_ = nullptr;
}

namespace {

class MatmulWorkload : public Workload {
 public:
  explicit MatmulWorkload(const Spec& s) : Workload(s) {
    m_ = int(s.get_int("m", 1));
    n_ = int(s.get_int("n", 1));
    k_ = int(s.get_int("k", 1));
    ta_ = s.get("ta", "n") == "t" ? Trans::kT : Trans::kN;
    tb_ = s.get("tb", "n") == "t" ? Trans::kT : Trans::kN;
    f64_ = s.get("dtype", "f32") == "f64";
    out_elems_ = size_t(m_) * n_;
  }
  Status setup(Backend& b) override {
    Status st;
    size_t na = size_t(m_) * k_, nb = size_t(k_) * n_;
    if (f64_) {
      a_ = upload_doubles(b, make_input<double>(na, seed_of(spec_), kStreamA, dist_of(spec_)), &st);
      DETAUDIT_RETURN_IF_ERROR(st);
      b_ = upload_doubles(b, make_input<double>(nb, seed_of(spec_), kStreamB, dist_of(spec_)), &st);
    } else {
      a_ = upload_floats(b, make_input<float>(na, seed_of(spec_), kStreamA, dist_of(spec_)), &st);
      DETAUDIT_RETURN_IF_ERROR(st);
      b_ = upload_floats(b, make_input<float>(nb, seed_of(spec_), kStreamB, dist_of(spec_)), &st);
    }
    DETAUDIT_RETURN_IF_ERROR(st);
    out_ = alloc_zero(b, output_bytes(), &st);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    int lda = ta_ == Trans::kN ? k_ : m_, ldb = tb_ == Trans::kN ? n_ : k_;
    if (f64_)
      DETAUDIT_RETURN_IF_ERROR(b.gemm_f64(ta_, tb_, m_, n_, k_, 1.0, static_cast<const double*>(a_), lda,
                                          static_cast<const double*>(b_), ldb, 0.0, static_cast<double*>(out_), n_));
    else
      DETAUDIT_RETURN_IF_ERROR(b.gemm(ta_, tb_, m_, n_, k_, 1.0f, static_cast<const float*>(a_), lda,
                                      static_cast<const float*>(b_), ldb, 0.0f, static_cast<float*>(out_), n_));
    return b.synchronize();
  }

 protected:
  int m_, n_, k_;
  Trans ta_, tb_;
  void *a_ = nullptr, *b_ = nullptr;
};

// Row i of A·B computed alone (a 1 x n product) against row i inside the full product.
class BatchInvWorkload : public MatmulWorkload {
 public:
  explicit BatchInvWorkload(const Spec& s) : MatmulWorkload(s) { rows_ = int(s.get_int("rows", 1)); }
  Status batch_check(Backend& b, BatchInvariance* out) override {
    std::vector<float> full(out_elems_), row(n_);
    DETAUDIT_RETURN_IF_ERROR(b.download(full.data(), out_, output_bytes()));
    Status st;
    void* row_out = alloc_zero(b, size_t(n_) * 4, &st);
    DETAUDIT_RETURN_IF_ERROR(st);
    *out = BatchInvariance{};
    for (int r = 0; r < rows_; ++r) {
      // Evenly spaced rows, first and last included when rows > 1.
      int i = rows_ == 1 ? 0 : int((int64_t(r) * (m_ - 1)) / (rows_ - 1));
      const float* arow = static_cast<const float*>(a_) + size_t(i) * k_;
      DETAUDIT_RETURN_IF_ERROR(b.zero(row_out, size_t(n_) * 4));
      DETAUDIT_RETURN_IF_ERROR(b.gemm(Trans::kN, Trans::kN, 1, n_, k_, 1.0f, arow, k_,
                                      static_cast<const float*>(b_), n_, 0.0f, static_cast<float*>(row_out), n_));
      DETAUDIT_RETURN_IF_ERROR(b.synchronize());
      DETAUDIT_RETURN_IF_ERROR(b.download(row.data(), row_out, size_t(n_) * 4));
      ++out->rows_checked;
      if (std::memcmp(row.data(), full.data() + size_t(i) * n_, size_t(n_) * 4) != 0) ++out->rows_differing;
    }
    return Status::ok();
  }

 private:
  int rows_;
};

class ConvWorkload : public Workload {
 public:
  explicit ConvWorkload(const Spec& s) : Workload(s) {
    cs_.n = int(s.get_int("n", 1));
    cs_.c = int(s.get_int("c", 1));
    cs_.h = int(s.get_int("h", 1));
    cs_.w = int(s.get_int("w", 1));
    cs_.k = int(s.get_int("k", 1));
    cs_.r = int(s.get_int("r", 1));
    cs_.s = int(s.get_int("s", 1));
    cs_.stride = int(s.get_int("stride", 1));
    cs_.pad = int(s.get_int("pad", 0));
    pass_ = s.get("pass", "fwd");
    out_elems_ = pass_ == "fwd" ? cs_.y_size() : pass_ == "bwd_data" ? cs_.x_size() : cs_.w_size();
  }
  Status setup(Backend& b) override {
    Status st;
    // Inputs by pass: fwd (x, w), bwd_data (dy, w), bwd_filter (x, dy).
    size_t n0 = pass_ == "bwd_data" ? cs_.y_size() : cs_.x_size();
    size_t n1 = pass_ == "bwd_filter" ? cs_.y_size() : cs_.w_size();
    in0_ = upload_floats(b, make_input<float>(n0, seed_of(spec_), kStreamA, dist_of(spec_)), &st);
    DETAUDIT_RETURN_IF_ERROR(st);
    in1_ = upload_floats(b, make_input<float>(n1, seed_of(spec_), kStreamB, dist_of(spec_)), &st);
    DETAUDIT_RETURN_IF_ERROR(st);
    out_ = alloc_zero(b, output_bytes(), &st);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    auto* a = static_cast<const float*>(in0_);
    auto* c = static_cast<const float*>(in1_);
    auto* y = static_cast<float*>(out_);
    if (pass_ == "fwd")
      DETAUDIT_RETURN_IF_ERROR(b.conv2d_fwd(cs_, a, c, y));
    else if (pass_ == "bwd_data")
      DETAUDIT_RETURN_IF_ERROR(b.conv2d_bwd_data(cs_, a, c, y));
    else
      DETAUDIT_RETURN_IF_ERROR(b.conv2d_bwd_filter(cs_, a, c, y));
    return b.synchronize();
  }

 private:
  ConvShape cs_;
  std::string pass_;
  void *in0_ = nullptr, *in1_ = nullptr;
};

class ReduceWorkload : public Workload {
 public:
  explicit ReduceWorkload(const Spec& s) : Workload(s) {
    op_ = s.get("op", "sum");
    n_ = size_t(s.get_int("n", 1));
    cols_ = size_t(s.get_int("cols", 1));
    out_elems_ = op_ == "softmax" ? n_ : 1;
  }
  Status setup(Backend& b) override {
    Status st;
    x_ = upload_floats(b, make_input<float>(n_, seed_of(spec_), kStreamA, dist_of(spec_)), &st);
    DETAUDIT_RETURN_IF_ERROR(st);
    if (op_ == "dot") {
      y_ = upload_floats(b, make_input<float>(n_, seed_of(spec_), kStreamB, dist_of(spec_)), &st);
      DETAUDIT_RETURN_IF_ERROR(st);
    }
    out_ = alloc_zero(b, output_bytes(), &st);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    auto* x = static_cast<const float*>(x_);
    auto* out = static_cast<float*>(out_);
    if (op_ == "softmax")
      DETAUDIT_RETURN_IF_ERROR(b.softmax(x, out, n_ / cols_, cols_));
    else {
      ReduceOp op = op_ == "sum" ? ReduceOp::kSum : op_ == "dot" ? ReduceOp::kDot : ReduceOp::kNorm2;
      DETAUDIT_RETURN_IF_ERROR(b.reduce(op, x, static_cast<const float*>(y_), n_, out));
    }
    return b.synchronize();
  }

 private:
  std::string op_;
  size_t n_, cols_;
  void *x_ = nullptr, *y_ = nullptr;
};

class PoolWorkload : public Workload {
 public:
  explicit PoolWorkload(const Spec& s) : Workload(s) {
    ps_.n = int(s.get_int("n", 1));
    ps_.c = int(s.get_int("c", 1));
    ps_.h = int(s.get_int("h", 1));
    ps_.w = int(s.get_int("w", 1));
    ps_.window = int(s.get_int("window", 2));
    ps_.stride = int(s.get_int("stride", 2));
    bwd_ = s.get("pass", "bwd") == "bwd";
    out_elems_ = bwd_ ? ps_.x_size() : ps_.y_size();
  }
  Status setup(Backend& b) override {
    Status st;
    std::vector<float> x = make_input<float>(ps_.x_size(), seed_of(spec_), kStreamA, dist_of(spec_));
    x_ = upload_floats(b, x, &st);
    DETAUDIT_RETURN_IF_ERROR(st);
    if (bwd_) {
      // The forward output is a max of inputs, exact on every target: computed here once, on the host.
      std::vector<float> y(ps_.y_size());
      int P = ps_.p(), Q = ps_.q();
      for (size_t nc = 0; nc < size_t(ps_.n) * ps_.c; ++nc)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q) {
            float m = -INFINITY;
            for (int i = 0; i < ps_.window; ++i)
              for (int j = 0; j < ps_.window; ++j)
                m = std::max(m, x[(nc * ps_.h + p * ps_.stride + i) * ps_.w + q * ps_.stride + j]);
            y[(nc * P + p) * Q + q] = m;
          }
      y_ = upload_floats(b, y, &st);
      DETAUDIT_RETURN_IF_ERROR(st);
      dy_ = upload_floats(b, make_input<float>(ps_.y_size(), seed_of(spec_), kStreamC, dist_of(spec_)), &st);
      DETAUDIT_RETURN_IF_ERROR(st);
    }
    out_ = alloc_zero(b, output_bytes(), &st);
    return st;
  }
  Status run(Backend& b) override {
    DETAUDIT_RETURN_IF_ERROR(b.zero(out_, output_bytes()));
    auto* x = static_cast<const float*>(x_);
    if (bwd_)
      DETAUDIT_RETURN_IF_ERROR(b.maxpool_bwd(ps_, x, static_cast<const float*>(y_), static_cast<const float*>(dy_),
                                             static_cast<float*>(out_)));
    else
      DETAUDIT_RETURN_IF_ERROR(b.maxpool_fwd(ps_, x, static_cast<float*>(out_)));
    return b.synchronize();
  }

 private:
  PoolShape ps_;
  bool bwd_;
  void *x_ = nullptr, *y_ = nullptr, *dy_ = nullptr;
};

}  // namespace

std::unique_ptr<Workload> Workload::create(const Spec& spec) {
  if (spec.name == "matmul") return std::make_unique<MatmulWorkload>(spec);
  if (spec.name == "batchinv") return std::make_unique<BatchInvWorkload>(spec);
  if (spec.name == "conv2d") return std::make_unique<ConvWorkload>(spec);
  if (spec.name == "reduce") return std::make_unique<ReduceWorkload>(spec);
  if (spec.name == "maxpool") return std::make_unique<PoolWorkload>(spec);
  return nullptr;
}

Status compute_oracle(const Spec& workload, std::vector<uint8_t>* out, Fingerprint* inputs) {
  auto ref = make_cpu_ref();
  auto w = Workload::create(workload);
  if (!w) return Status::invalid("unknown workload " + workload.name);
  Status st = w->setup(*ref);
  if (st && inputs) *inputs = w->input_fingerprint();
  if (st) st = w->run(*ref);
  if (st) {
    out->resize(w->output_bytes());
    st = ref->download(out->data(), w->output(), w->output_bytes());
  }
  w->teardown(*ref);
  return st;
}

MemoryEstimate estimate_memory(const Spec& w) {
  // In doubles: the parser's limits allow products far beyond 2^64 bytes.
  auto d = [&](const char* k, double fallback) { return double(w.get_int(k, int64_t(fallback))); };
  MemoryEstimate e;
  double es = w.get("dtype", "f32") == "f64" ? 8 : 4;
  double in = 0, out = 0, work = 0;
  if (w.name == "matmul" || w.name == "batchinv") {
    double m = d("m", 1), n = d("n", 1), k = d("k", 1);
    in = (m * k + k * n) * es;
    out = m * n * es;
    work = in;  // packed copies of A and B panels
  } else if (w.name == "conv2d") {
    double n = d("n", 1), c = d("c", 1), h = d("h", 1), wd = d("w", 1), k = d("k", 1), r = d("r", 1), s = d("s", 1),
           st = d("stride", 1), pad = d("pad", 0);
    double p = std::floor((h + 2 * pad - r) / st) + 1, q = std::floor((wd + 2 * pad - s) / st) + 1;
    double x = n * c * h * wd * 4, y = n * k * p * q * 4, f = k * c * r * s * 4;
    std::string pass = w.get("pass", "fwd");
    out = pass == "fwd" ? y : pass == "bwd_data" ? x : f;
    in = x + y + f - out;
    work = n * p * q * c * r * s * 4;  // one im2col matrix
  } else if (w.name == "reduce") {
    double n = d("n", 1);
    in = n * 4 * (w.get("op") == "dot" ? 2 : 1);
    out = w.get("op") == "softmax" ? n * 4 : 4;
    work = w.get("op") == "softmax" ? n * 8 : 0;
  } else if (w.name == "maxpool") {
    double n = d("n", 1), c = d("c", 1), h = d("h", 1), wd = d("w", 1), win = d("window", 2), st = d("stride", 2);
    double y = n * c * (std::floor((h - win) / st) + 1) * (std::floor((wd - win) / st) + 1) * 4, x = n * c * h * wd * 4;
    bool bwd = w.get("pass", "bwd") == "bwd";
    out = bwd ? x : y;
    in = bwd ? x + 2 * y : x;
    work = bwd ? x : 0;
  }
  e.inputs = 2 * in;        // the host vectors and the backend's copies
  e.outputs = 3 * out;      // the backend's output, its host copy and the oracle's output
  e.oracle = out / es * 8;  // cpu-ref accumulates in double
  e.workspace = work;
  return e;
}

uint64_t available_memory_bytes(std::string* source) {
  uint64_t avail = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kb = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
        avail = uint64_t(kb) * 1024;
        if (source) *source = "MemAvailable in /proc/meminfo";
      }
    }
    std::fclose(f);
  }
  auto read_u64 = [](const char* path, uint64_t* v) {
    FILE* f = std::fopen(path, "r");
    if (!f) return false;
    unsigned long long x = 0;
    bool ok = std::fscanf(f, "%llu", &x) == 1;  // "max" (no limit) does not parse
    std::fclose(f);
    *v = x;
    return ok;
  };
  uint64_t max = 0, cur = 0;
  if (read_u64("/sys/fs/cgroup/memory.max", &max) && read_u64("/sys/fs/cgroup/memory.current", &cur)) {
    uint64_t left = max > cur ? max - cur : 0;
    if (avail == 0 || left < avail) {
      avail = left;
      if (source) *source = "the cgroup's memory.max less memory.current";
    }
  }
  return avail;
}

}  // namespace detaudit
