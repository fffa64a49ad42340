// The backend registry (probes/registry.hpp): one entry per backend. Every promise below says who
// makes it; where neither detaudit's code nor the vendor's documentation guarantees something, the
// promise is RunToRun::kNone.
#include "probes/registry.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "kernels/cpu/native.hpp"
#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/ref.hpp"
#include "kernels/cpu/vendor.hpp"
#include "kernels/cpu/winograd.hpp"
#include "kernels/cuda/cuda.hpp"

namespace detaudit {

namespace {

using RunToRun = Promise::RunToRun;

constexpr double kTf32UnitRoundoff = 0.00048828125;  // 2^-11: TF32 keeps 10 of FP32's 23 mantissa bits

Promise deterministic(std::string source, std::string equality_class = "") {
  Promise p;
  p.run_to_run = RunToRun::kDeterministic;
  p.run_to_run_source = std::move(source);
  p.equality_class = std::move(equality_class);
  return p;
}
Promise nondeterministic(std::string source) {
  Promise p;
  p.run_to_run = RunToRun::kNondeterministic;
  p.run_to_run_source = std::move(source);
  return p;
}
Promise nothing(std::string source) {
  Promise p;
  p.run_to_run_source = std::move(source);
  return p;
}

bool always(const Spec&, const Spec&) { return true; }
// cpu?order=portable and cuda:N?order=portable: one implementation on every CPU and GPU (kernels/portable.hpp).
bool order_portable(const Spec& t) { return t.get("order", "") == "portable"; }

// ---- cpu-ref ------------------------------------------------------------------------------------
Promise promise_cpu_ref(const Spec&, const Spec&, const std::map<std::string, std::string>&) {
  // One thread, a fixed order, double accumulation (kernels/cpu/ref.cpp); each output row of a gemm is
  // its own loop over k, so a row's value cannot depend on the rows around it.
  Promise p = deterministic("detaudit: cpu-ref runs one thread in a fixed order", "cpu-ref");
  p.batch_invariance_claimed = true;
  return p;
}

// ---- cpu (kernels/cpu/native*.cpp) ----------------------------------------------------------------
// Whether the cpu backend's work for this workload goes through the reduction order at all, and with
// order=atomic through the racing path.
bool atomic_can_race(const Spec& w) {
  // Max pooling has no reduction order: one host routine (kernels/cpu/pool.hpp) in a fixed window order.
  if (w.name == "maxpool") return false;
  // determinism: a gemm with K below kAtomicMinSplitK is one chain per element (run_atomic in
  // native_gemm.cpp falls back to order=sequential's code).
  if ((w.name == "matmul" || w.name == "batchinv") && w.get_int("k", 0) < native::kAtomicMinSplitK) return false;
  // A sum (or a softmax row) cut into at most two chunks of kLanes elements: two partials added to
  // zero commute exactly, so no order can show (native.cpp, atomic_chunks).
  if (w.name == "reduce") {
    const int64_t len = w.get("op") == "softmax" ? w.get_int("cols", 1000) : w.get_int("n", 0);
    if ((len + native::kLanes - 1) / native::kLanes <= 2) return false;
  }
  return true;
}

// cpu?order=portable and cuda:N?order=portable promise each other's bits.
const char* kPortableClass = "order=portable";

Promise promise_cpu_direct(const Spec& t, const Spec& w, const std::map<std::string, std::string>&);

// Whether cpu?conv=winograd computes this workload through Winograd F(4x4,3x3) (kernels/cpu/winograd.hpp):
// a conv2d whose shape winograd_applies() takes (3x3, stride 1, pad <= 2, min(C, K) >= 64); every other workload runs the
// direct code and keeps its bits.
bool runs_winograd(const Spec& t, const Spec& w) {
  if (t.get("conv", "direct") != "winograd" || w.name != "conv2d") return false;
  ConvShape s;
  s.n = int(w.get_int("n", 4)), s.c = int(w.get_int("c", 16)), s.h = int(w.get_int("h", 16)),
  s.w = int(w.get_int("w", 16)), s.k = int(w.get_int("k", 16)), s.r = int(w.get_int("r", 3)),
  s.s = int(w.get_int("s", 3)), s.stride = int(w.get_int("stride", 1)), s.pad = int(w.get_int("pad", 1));
  return native::winograd_applies(s, CpuNativeOptions{}.winograd_min_channels);
}

// cpu?order=portable has no Winograd path (its bits are fixed on every CPU and GPU): refused as a bad spec
// rather than silently run direct.
std::string check_cpu(const Spec& t) {
  if (t.get("order", "blocked") == "portable" && t.get("conv", "direct") != "direct")
    return "conv=" + t.get("conv") + " is not available with order=portable (its bits are the same on every CPU "
           "and GPU, through the direct convolution only)";
  return "";
}

Promise promise_cpu(const Spec& t, const Spec& w, const std::map<std::string, std::string>& details) {
  Promise p = promise_cpu_direct(t, w, details);
  if (!runs_winograd(t, w)) return p;
  // Winograd's bits are not the direct path's: the same order promises, in classes of their own.
  p.run_to_run_source += "; conv=winograd: Winograd F(4x4,3x3) transforms in a fixed order, its 36 gemms in this "
                         "order (kernels/cpu/winograd.hpp)";
  if (!p.equality_class.empty()) p.equality_class += "&conv=winograd";
  p.error_bound_exempt = "cpu?conv=winograd: Winograd F(4x4,3x3) transforms the inputs (no summation error bound "
                         "applies)";
  return p;
}

Promise promise_cpu_direct(const Spec& t, const Spec& w, const std::map<std::string, std::string>&) {
  const std::string order = t.get("order", "blocked"), isa = t.get("isa", "auto");
  const int64_t threads = t.get_int("threads", 1);
  Promise p;
  if (order == "portable") {
    // kernels/portable.hpp: one fixed tree per sum and spelled-out operations, shared with cuda's
    // order=portable: one class for every thread count, isa and device.
    p = deterministic("detaudit: order=portable fixes every operation and every sum's tree for any thread count, isa "
                      "and device (kernels/portable.hpp)",
                      kPortableClass);
    p.batch_invariance_claimed = true;  // each element's tree depends on k only
  } else if (order == "sequential" || order == "pairwise") {
    // native.hpp: "Same bits for every thread count"; every ISA gives the same bits (explicit FMAs,
    // fixed lane layouts), so one class per order across threads and isa.
    p = deterministic(fmt::format("detaudit: order={} fixes every sum's order for any thread count and isa", order),
                      "cpu?order=" + order);
    p.batch_invariance_claimed = true;  // each element's chain depends on k only (native_gemm.cpp)
  } else if (order == "blocked") {
    // One contiguous block per thread, partials in thread order: fixed for a thread count, across isa.
    p = deterministic(fmt::format("detaudit: order=blocked with {} threads adds per-thread partials in thread order",
                                  threads),
                      fmt::format("cpu?order=blocked&threads={}", threads));
    p.batch_invariance_claimed = true;  // block edges follow k and the thread count, never m
  } else if (threads >= 2 && atomic_can_race(w)) {
    p = nondeterministic(
        fmt::format("detaudit: order=atomic with {} threads adds partial sums in completion order", threads));
  } else if (threads >= 2) {
    // The workload does not reach the racing code: maxpool has no reduction order, a short-K gemm is
    // one chain per element (order=sequential's bits).
    if (w.name == "maxpool") {
      p = deterministic("detaudit: max pooling has one fixed order whatever the reduction order setting");
    } else if (w.name == "reduce") {
      p = deterministic("detaudit: order=atomic cuts this sum into at most two partials, which commute");
    } else {
      p = deterministic("detaudit: order=atomic computes a gemm with k < 64 as one chain per element",
                        "cpu?order=sequential");
      p.batch_invariance_claimed = true;
    }
  } else {
    // One thread: completion order is chunk order in practice, but the code does not promise it.
    p = nothing("detaudit promises nothing for order=atomic with one thread");
  }
  if (isa == "avx512") p.requirements = {"AVX-512F"};
  if (isa == "avx2") p.requirements = {"AVX2", "FMA"};
  return p;
}

// ---- openblas ------------------------------------------------------------------------------------
// The core types OpenBLAS 0.3.21 recognises, and the instruction sets the kernels of each use. It
// silently runs an unknown name (and "SapphireRapids") as Cooperlake, so only names it knows are
// accepted, and the core it really ran is recorded per observation. Running a core's kernels on a CPU
// without its instruction sets dies with SIGILL: EXPECTED, not a failure.
// Sources (OpenBLAS sources, read through the search index): Makefile.x86_64 compiles each core's
// kernels (DYNAMIC_ARCH: per TARGET_CORE) with the instruction sets that core has -- -msse3, -mssse3,
// -msse4.1, -mavx, -mavx2 from its HAVE_* flags; SKYLAKEX with -march=skylake-avx512 (AVX-512
// F/CD/BW/DQ/VL: listed as F, which every CPU but the Xeon Phi pairs with the rest), COOPERLAKE with
// -march=cooperlake (adds AVX512_BF16); the hand-written kernels of kernel/x86_64/KERNEL.<CORE> use
// FMA3 (Haswell, Zen: vfmadd231), FMA4 (Bulldozer to Excavator: the *_bulldozer / *_piledriver
// kernels) and SSE4A (Barcelona). driver/others/dynamic.c picks the same cores by these features when
// it detects the CPU itself (core=auto), so auto has no requirement.
struct OpenblasCore {
  const char* name;
  std::vector<std::string> requirements;
};
const std::vector<OpenblasCore>& openblas_cores() {
  static const std::vector<OpenblasCore> cores = {
      {"auto", {}},  // OpenBLAS picks a core this CPU runs
      {"Prescott", {"SSE3"}},
      {"Core2", {"SSSE3"}},
      {"Penryn", {"SSE4.1"}},
      {"Dunnington", {"SSE4.1"}},
      {"Nehalem", {"SSE4.1"}},
      {"Atom", {"SSSE3"}},
      {"Nano", {"SSSE3"}},
      {"Sandybridge", {"AVX"}},
      {"Haswell", {"AVX2", "FMA"}},
      {"Zen", {"AVX2", "FMA"}},
      {"SkylakeX", {"AVX-512F"}},
      {"CooperLake", {"AVX-512F", "AVX-512 BF16"}},
      {"Barcelona", {"SSE4A"}},
      {"Opteron", {}},  // SSE2 kernels: every x86-64 CPU has SSE2
      {"Bulldozer", {"AVX", "FMA4", "XOP"}},
      {"Piledriver", {"AVX", "FMA", "FMA4", "XOP"}},
      {"Steamroller", {"AVX", "FMA", "FMA4", "XOP"}},
      {"Excavator", {"AVX", "FMA", "FMA4", "XOP"}},
  };
  return cores;
}
std::vector<std::string> openblas_core_names() {
  std::vector<std::string> v;
  for (auto& c : openblas_cores()) v.push_back(c.name);
  return v;
}
std::vector<std::string> openblas_core_requirements(const std::string& core) {
  for (auto& c : openblas_cores())
    if (core == c.name) return c.requirements;
  return {};
}

Promise promise_openblas(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  const int64_t threads = t.get_int("threads", 1);
  Promise p;
  // OpenBLAS documents no reproducibility rule; this is detaudit's reading of its code. One thread: one
  // kernel (the core type's) in one summation order. Several threads: the partition is static --
  // driver/level3/level3_thread.c and gemm_thread_m.c split C into ranges of M and N
  // (blas_quickdivide over the thread count), each thread runs the whole K loop of its range in order,
  // and the threaded level-1 kernels (sdot) split n into fixed blocks whose partials add in thread
  // order. So the bits are fixed for a (core, threads) pair and may differ between pairs: no class.
  if (threads == 1)
    p = deterministic("OpenBLAS code: one thread runs one kernel in one summation order");
  else
    p = deterministic(fmt::format("OpenBLAS code: {} threads split the work statically (M/N ranges, never K)", threads));
  p.requirements = openblas_core_requirements(t.get("core", "auto"));
  return p;
}

// ---- onednn --------------------------------------------------------------------------------------
Promise promise_onednn(const Spec&, const Spec&, const std::map<std::string, std::string>&) {
  // oneDNN's guide ("Primitive Attributes: deterministic"): most primitives are run-to-run
  // deterministic in a fixed environment, but "some implementations rely on non-deterministic
  // constructs such as atomic operations"; bitwise run-to-run results are guaranteed only with the
  // deterministic attribute, which oneDNN 2.6 (the version detaudit builds against) does not have.
  // So nothing is promised, whatever the thread count. The isa key is a cap (ONEDNN_MAX_CPU_ISA): an
  // ISA the CPU lacks falls back to a lower one, so there is no requirement either.
  return nothing("oneDNN guarantees bitwise run-to-run results only with its deterministic attribute (not in 2.6)");
}

// ---- GPU backends ----------------------------------------------------------------------------------
const char* kCudaDevice = "a CUDA device";

Promise promise_cuda(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  const std::string order = t.get("order", "tree");
  Promise p = order == "atomic"
                  ? nondeterministic("detaudit: order=atomic adds partial sums with atomicAdd in completion order")
              : order == "portable"
                  ? deterministic("detaudit: order=portable computes kernels/portable.hpp's operations and trees, the "
                                  "bits of cpu?order=portable",
                                  kPortableClass)
                  : deterministic("detaudit: order=tree combines partial sums in a fixed tree");
  if (order == "portable") p.batch_invariance_claimed = true;
  p.requirements = {kCudaDevice};
  return p;
}

bool applicable_cublas(const Spec& t, const Spec& w) {
  bool gemm_like = w.name == "matmul" || w.name == "batchinv";
  return gemm_like || (w.name == "reduce" && w.get("op") != "softmax");
}
Promise promise_cublas(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  Promise p;
  const bool shared_workspace = t.get_int("streams", 1) > 1 && t.get("workspace", "per_stream") == "shared";
  if (t.get("atomics", "not_allowed") == "allowed")
    p = nothing("cuBLAS: with atomics allowed its results may differ run to run");
  else if (shared_workspace)
    p = nothing("cuBLAS: several streams sharing one workspace are not guaranteed reproducible");
  else
    p = deterministic("cuBLAS: bitwise identical for one version, architecture and SM count, one stream or a "
                      "workspace per stream");
  // TF32 rounds the inputs to 10 mantissa bits. BF16x9 splits each FP32 input into three BF16 parts
  // (8 + 8 + 8 significant bits), which hold all of FP32's 24: no extra input rounding.
  if (t.get("math", "default") == "tf32") p.input_unit_roundoff = kTf32UnitRoundoff;
  p.requirements = {kCudaDevice};
  return p;
}

bool applicable_cublaslt(const Spec&, const Spec& w) { return w.name == "matmul" || w.name == "batchinv"; }
Promise promise_cublaslt(const Spec&, const Spec&, const std::map<std::string, std::string>& details) {
  // cuBLAS's reproducibility rule covers cuBLASLt, and every split-K reduction scheme is ordered:
  // INPLACE uses "counters (in workspace) to guarantee the sequentiality", COMPUTE_TYPE/OUTPUT_TYPE
  // reduce in a separate step (cublasLt.h, cublasLtReductionScheme_t).
  std::string what = "cuBLAS: cublasLtMatmul with one algorithm is bitwise identical for one version, "
                     "architecture and SM count";
  auto it = details.find("splitk");
  if (it != details.end() && it->second != "1" && it->second != "0") what += " (split-K reduces in a fixed order)";
  Promise p = deterministic(what);
  p.requirements = {kCudaDevice};
  return p;
}

// What cudnn_ops.h says of the algorithm a cuDNN target pins (its name in *name; "" for auto or an unknown
// index, then kUnmarked), and CUDNN_POOLING_MAX backward as non-deterministic.
CudnnHeaderMark cudnn_static_mark(const Spec& t, const Spec& w, std::string* name) {
  if (w.name == "maxpool") {
    *name = t.get("pool", "deterministic") == "nondeterministic" ? "CUDNN_POOLING_MAX" : "CUDNN_POOLING_MAX_DETERMINISTIC";
    return w.get("pass", "bwd") == "bwd" && t.get("pool", "deterministic") == "nondeterministic"
               ? CudnnHeaderMark::kNondeterministic
               : CudnnHeaderMark::kUnmarked;
  }
  const std::string pass = w.get("pass", "fwd");
  const std::string algo = t.get(pass + "_algo", "auto");
  if (algo == "auto") {
    *name = "";
    return CudnnHeaderMark::kUnmarked;
  }
  int index = std::atoi(algo.c_str());
  for (auto& a : cudnn_conv_algorithms(ConvShape{}, pass))
    if (a.index == index) {
      *name = a.name;
      return a.header;
    }
  *name = "";
  return CudnnHeaderMark::kUnmarked;
}

bool applicable_cudnn(const Spec& t, const Spec& w) {
  std::string pass = w.name == "conv2d" ? w.get("pass") : "";
  bool pins_fwd = t.get("fwd_algo", "auto") != "auto", pins_bd = t.get("bwd_data_algo", "auto") != "auto",
       pins_bf = t.get("bwd_filter_algo", "auto") != "auto";
  bool pins_pool = t.get("pool", "deterministic") != "deterministic";
  bool pins_math = t.get("math", "fma") != "fma";
  if (w.name == "maxpool") return !pins_fwd && !pins_bd && !pins_bf && !pins_math;
  if (w.name != "conv2d" || pins_pool) return false;
  if (pins_fwd || pins_bd || pins_bf)
    return (pass == "fwd" && pins_fwd) || (pass == "bwd_data" && pins_bd) || (pass == "bwd_filter" && pins_bf);
  return true;
}

Promise promise_cudnn(const Spec& t, const Spec& w, const std::map<std::string, std::string>& details) {
  Promise p;
  auto claim = details.find("claimed_deterministic");
  auto name_it = details.find("algo_name");
  if (claim != details.end() && (claim->second == "yes" || claim->second == "no")) {
    // The algorithm cuDNN ran and its own claim for it (cudnnConvolution*AlgoPerf_t.determinism).
    std::string algo = name_it != details.end() ? name_it->second : "the chosen algorithm";
    p = claim->second == "yes"
            ? deterministic(fmt::format("cuDNN claims CUDNN_DETERMINISTIC for {}", algo))
            : nondeterministic(fmt::format("cuDNN claims CUDNN_NON_DETERMINISTIC for {}", algo));
    // The second claim: the header's marks for the same algorithm (the backend records both). An
    // algorithm the header marks /* not implemented */ that Find ran is a disagreement too.
    auto doc = details.find("documented_deterministic");
    const std::string find_says = claim->second == "yes" ? "CUDNN_DETERMINISTIC" : "CUDNN_NON_DETERMINISTIC";
    if (doc != details.end() && (doc->second == "yes" || doc->second == "no") && doc->second != claim->second)
      p.claims_disagree = fmt::format("cuDNN's Find reports {} for {}, but cudnn_ops.h {}", find_says, algo,
                                      doc->second == "yes" ? "does not mark it non-deterministic"
                                                           : "marks it /* non-deterministic */");
    else if (doc != details.end() && doc->second == "not implemented")
      p.claims_disagree = fmt::format("cuDNN's Find ran {} and reports {} for it, but cudnn_ops.h marks it "
                                      "/* not implemented */",
                                      algo, find_says);
  } else {
    // No details (the cell did not run): cudnn_ops.h's marks and the pooling mode. Only non-determinism
    // is marked, so an unmarked algorithm is read as deterministic; /* not implemented */ claims nothing.
    std::string name;
    const CudnnHeaderMark mark = cudnn_static_mark(t, w, &name);
    if (name.empty())
      p = nothing("cuDNN: the algorithm was not reported, so no claim applies");
    else if (mark == CudnnHeaderMark::kNondeterministic)
      p = nondeterministic(fmt::format("cuDNN marks {} non-deterministic", name));
    else if (mark == CudnnHeaderMark::kNotImplemented)
      p = nothing(fmt::format("cuDNN marks {} /* not implemented */, so no claim applies", name));
    else
      p = deterministic(fmt::format("cuDNN: {} is bitwise reproducible on one architecture", name));
  }
  if (t.get("math", "fma") == "tf32") p.input_unit_roundoff = kTf32UnitRoundoff;
  // FFT and Winograd algorithms compute the convolution through a transform: their rounding errors are
  // not those of a sum of products, so the summation bound (probes/workload.cpp) does not bound them.
  std::string ran = name_it != details.end() ? name_it->second : "";
  if (ran.empty()) cudnn_static_mark(t, w, &ran);
  if (ran.find("FFT") != std::string::npos || ran.find("WINOGRAD") != std::string::npos)
    p.error_bound_exempt = ran + " transforms the inputs (no summation error bound applies)";
  p.requirements = {kCudaDevice};
  return p;
}

// ---- training variants -----------------------------------------------------------------------------
std::string variants_cpu(Spec* d, Spec* n) {
  // determinism: order=atomic races between threads: with one there is one completion order, and the
  // "nondeterminism on" conditions would hold none.
  if (d->get_int("threads", 1) < 2)
    return fmt::format("{} has no nondeterministic variant: order=atomic with one thread has one completion order "
                       "(use threads=2 or more)",
                       d->str());
  // A portable base keeps order=portable as its deterministic variant (the one that is the same on
  // every CPU and GPU); the others take order=blocked.
  if (d->get("order", "blocked") != "portable") d->set("order", "blocked");
  n->set("order", "atomic");
  return "";
}
std::string variants_cuda(Spec* d, Spec* n) {
  if (d->get("order", "tree") != "portable") d->set("order", "tree");
  n->set("order", "atomic");
  return "";
}
std::string variants_cublas(Spec* d, Spec* n) {
  d->set("atomics", "not_allowed");
  n->set("atomics", "allowed");
  return "";
}
std::string variants_cudnn(Spec* d, Spec* n) {
  // Legacy algorithm 1 is deterministic for every pass; backward algorithm 0 accumulates with atomics.
  for (const char* k : {"fwd_algo", "bwd_data_algo", "bwd_filter_algo"}) d->set(k, "1");
  n->set("fwd_algo", "1");
  n->set("bwd_data_algo", "0");
  n->set("bwd_filter_algo", "0");
  return "";
}

// ---- external (imported) ---------------------------------------------------------------------------
Promise promise_external(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  return nothing(fmt::format("{}: a framework's outputs imported with `detaudit import`; detaudit knows nothing it "
                             "promises",
                             t.str()));
}

// ---- testing (hidden) ------------------------------------------------------------------------------
Promise promise_testing(const Spec&, const Spec&, const std::map<std::string, std::string>&) {
  return nothing("test-only backend: nothing is promised");
}

// ---- environments and factories ----------------------------------------------------------------------
void environment_openblas(const Spec& t, std::map<std::string, std::string>* env) {
  std::string core = t.get("core", "auto");
  (*env)["OPENBLAS_CORETYPE"] = core == "auto" ? "" : core;
}
void environment_onednn(const Spec& t, std::map<std::string, std::string>* env) {
  (*env)["ONEDNN_MAX_CPU_ISA"] = t.get("isa", "ALL");
  (*env)["DNNL_MAX_CPU_ISA"] = t.get("isa", "ALL");
}

int threads_of(const Spec& t) { return int(t.get_int("threads", 1)); }

std::unique_ptr<Backend> make_cpu_ref_backend(const Spec&, Status*) { return make_cpu_ref(); }
std::unique_ptr<Backend> make_cpu_backend(const Spec& t, Status* st) {
  CpuNativeOptions o;
  o.threads = threads_of(t);
  parse_reduce_order(t.get("order", "blocked"), &o.order);
  parse_cpu_isa(t.get("isa", "auto"), &o.isa);
  parse_conv_algo(t.get("conv", "direct"), &o.conv);
  std::unique_ptr<Backend> be = make_cpu_native(o);
  if (!be && st) *st = Status::invalid(t.str() + ": " + check_cpu(t));  // check_cpu refuses it before this
  return be;
}
std::unique_ptr<Backend> make_openblas_backend(const Spec& t, Status* st) {
  return make_openblas(OpenblasOptions{threads_of(t)}, st);
}
std::unique_ptr<Backend> make_onednn_backend(const Spec& t, Status* st) {
  return make_onednn(OnednnOptions{threads_of(t)},
                     t.get("layout", "plain") == "blocked" ? OnednnConvLayout::kBlocked : OnednnConvLayout::kPlain, st);
}
std::unique_ptr<Backend> make_gpu_target(const Spec& t, Status* st) {
  std::map<std::string, std::string> params(t.params.begin(), t.params.end());
  return make_gpu_backend(t.name, t.device, params, st);
}

// Test-only target: its ops fault on purpose, so the worker isolation can be tested on real signals.
// fault=sticky stands for a sticky GPU error: its gemm fails and loses the "context", after which every
// op of this process fails (as every CUDA call does after an illegal address) and context_lost says so.
class FaultBackend : public Backend {
 public:
  explicit FaultBackend(std::string fault) : fault_(std::move(fault)) {}
  std::string name() const override { return "testing?fault=" + fault_; }
  Status fault() {
    if (lost_) return Status::error("testing: an earlier sticky fault lost the context");
    if (fault_ == "segv") {
      volatile int* p = nullptr;
      *p = 1;  // a real invalid access
    } else if (fault_ == "ill") {
      __builtin_trap();  // ud2: SIGILL on x86-64
    } else if (fault_ == "abort") {
      std::abort();
    } else if (fault_ == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return Status::ok();
  }
  bool context_lost(std::string* why) override {
    if (lost_) *why = "testing: sticky fault";
    return lost_;
  }
  Status gemm(Trans, Trans, int m, int n, int, float, const float*, int, const float*, int, float, float* c,
              int) override {
    DETAUDIT_RETURN_IF_ERROR(fault());
    if (fault_ == "sticky") {
      lost_ = true;
      return Status::error("testing: sticky fault in gemm");
    }
    for (int i = 0; i < m * n; ++i) c[i] = 0;
    return Status::ok();
  }
  Status reduce(ReduceOp, const float*, const float*, size_t, float* out) override {
    DETAUDIT_RETURN_IF_ERROR(fault());
    *out = 0;
    return Status::ok();
  }

 private:
  std::string fault_;
  bool lost_ = false;
};
std::unique_ptr<Backend> make_testing_backend(const Spec& t, Status*) {
  return std::make_unique<FaultBackend>(t.get("fault", "none"));
}

std::vector<BackendEntry> make_registry() {
  std::vector<BackendEntry> r;
  auto add = [&](BackendEntry e) { r.push_back(std::move(e)); };
  BackendEntry e;

  e = {};
  e.name = "cpu-ref";
  e.make = make_cpu_ref_backend;
  e.summary = "the oracle: fixed order, double accumulation, one thread";
  e.applicable = always;
  e.promise = promise_cpu_ref;
  add(e);

  e = {};
  e.name = "cpu";
  e.keys = {key_one_of("order", "blocked", {"sequential", "pairwise", "blocked", "atomic", "portable"}),
            key_int_in("threads", "1", 1, 256), key_one_of("isa", "auto", {"auto", "avx512", "avx2", "scalar"}),
            // Optional (no default filled in), so that the canonical names of today's targets stay as they
            // are; absent means direct.
            key_one_of("conv", "", {"direct", "winograd"})};
  e.check = check_cpu;
  e.make = make_cpu_backend;
  e.summary = "detaudit's own multithreaded kernels with a selectable reduction order (portable: the bits of every CPU and "
              "GPU); conv=winograd: 3x3 convolutions as Winograd F(4x4,3x3)";
  e.applicable = always;
  e.promise = promise_cpu;
  e.variants = variants_cpu;
  e.portable = order_portable;
  add(e);

  e = {};
  e.name = "openblas";
  e.keys = {key_one_of("core", "auto", openblas_core_names()), key_int_in("threads", "1", 1, 256)};
  e.environment = environment_openblas;
  e.make = make_openblas_backend;
  e.summary = "OpenBLAS sgemm/dgemm, conv2d by im2col+gemm; core= sets OPENBLAS_CORETYPE";
  e.libraries = {"openblas", "openblas_core"};
  e.applicable = always;
  e.promise = promise_openblas;
  add(e);

  e = {};
  e.name = "onednn";
  // ONEDNN_MAX_CPU_ISA values detaudit accepts.
  e.keys = {key_one_of("isa", "ALL",
                       {"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI", "AVX512_CORE_BF16",
                        "AVX512_CORE_AMX", "ALL"}),
            key_int_in("threads", "1", 1, 256),
            key_one_of("layout", "plain", {"plain", "blocked"})};
  e.environment = environment_onednn;
  e.make = make_onednn_backend;
  e.summary = "oneDNN conv2d, matmul, reductions; isa= sets ONEDNN_MAX_CPU_ISA; layout=blocked lets conv pick its own";
  e.libraries = {"onednn"};
  e.applicable = always;
  e.promise = promise_onednn;
  add(e);

  e = {};
  e.name = "cuda";
  e.keys = {key_one_of("order", "tree", {"tree", "atomic", "portable"})};
  e.make = make_gpu_target;
  e.gpu = true;
  e.summary = "native CUDA kernels; tree (deterministic), atomic, or portable (the bits of cpu?order=portable)";
  e.libraries = {"cuda_runtime", "cuda_driver"};
  e.applicable = always;
  e.promise = promise_cuda;
  e.variants = variants_cuda;
  e.portable = order_portable;
  add(e);

  e = {};
  e.name = "cublas";
  e.keys = {key_one_of("math", "default", {"default", "pedantic", "tf32", "bf16x9"}),
            key_one_of("atomics", "not_allowed", {"allowed", "not_allowed"}), key_int_in("streams", "1", 1, 16),
            key_one_of("workspace", "per_stream", {"shared", "per_stream"})};
  e.make = make_gpu_target;
  e.gpu = true;
  e.summary = "cuBLAS gemm with every setting pinned";
  e.libraries = {"cublas", "cuda_runtime", "cuda_driver"};
  e.applicable = applicable_cublas;
  e.promise = promise_cublas;
  e.variants = variants_cublas;
  add(e);

  e = {};
  e.name = "cublaslt";
  e.keys = {key_int_in("algo", "0", 0, kCublasLtMaxAlgos - 1, {"all"}),
            key_one_of("reduction", "", {"none", "inplace", "compute", "output"})};
  e.make = make_gpu_target;
  e.gpu = true;
  e.summary = "cuBLASLt gemm through the heuristic's K-th algorithm";
  e.libraries = {"cublas", "cuda_runtime", "cuda_driver"};
  e.applicable = applicable_cublaslt;
  e.promise = promise_cublaslt;
  e.all_counts = {{"algo", 8}};
  add(e);

  e = {};
  e.name = "cudnn";
  // One key per pass: an index of cuDNN's legacy algorithms (cudnn_conv_algorithms), auto or all.
  for (const char* pass : {"fwd", "bwd_data", "bwd_filter"}) {
    const int n = int(cudnn_conv_algorithms(ConvShape{}, pass).size());
    e.keys.push_back(key_int_in(std::string(pass) + "_algo", "auto", 0, n - 1, {"auto", "all"}));
    e.all_counts[std::string(pass) + "_algo"] = n;
  }
  e.keys.push_back(key_one_of("math", "fma", {"fma", "tf32"}));
  e.keys.push_back(key_one_of("pool", "deterministic", {"deterministic", "nondeterministic"}));
  e.make = make_gpu_target;
  e.gpu = true;
  e.summary = "cuDNN convolutions with pinned algorithms; pooling";
  e.libraries = {"cudnn", "cuda_runtime", "cuda_driver"};
  e.applicable = applicable_cudnn;
  e.promise = promise_cudnn;
  e.variants = variants_cudnn;
  add(e);

  e = {};
  e.name = "external";
  // Any name the spec syntax allows (letters, digits, '_', '-', '.'); name it by framework, version and
  // device ("torch-1.13-cpu"): detaudit cannot see a framework's version, so baselines key it by name.
  e.keys = {{"name", "",
             [](const std::string& v) -> std::string { return v.size() <= 64 ? "" : "at most 64 characters"; },
             "framework name, e.g. torch-cpu", [](const std::string& v) { return v; }}};
  e.summary = "a framework's outputs imported with `detaudit import` (never run: see `detaudit export`)";
  e.imported = true;
  e.applicable = always;
  e.promise = promise_external;
  add(e);

  e = {};
  e.name = "testing";
  e.keys = {key_one_of("fault", "none", {"none", "segv", "ill", "abort", "hang", "sticky"})};
  e.make = make_testing_backend;
  e.summary = "test-only: a worker that faults on purpose";
  e.hidden = true;
  e.applicable = always;
  e.promise = promise_testing;
  add(e);
  return r;
}

// Requirement -> the name machine_fingerprint()["cpu_features"] lists when the CPU has it.
const std::map<std::string, std::string>& cpu_feature_names() {
  static const std::map<std::string, std::string> m = {
      {"SSE2", "sse2"},   {"SSE3", "sse3"},       {"SSSE3", "ssse3"},       {"SSE4.1", "sse4.1"},
      {"SSE4.2", "sse4.2"}, {"SSE4A", "sse4a"},   {"AVX", "avx"},           {"AVX2", "avx2"},
      {"FMA", "fma"},     {"FMA4", "fma4"},       {"XOP", "xop"},           {"AVX-512F", "avx512f"},
      {"AVX-512 BF16", "avx512bf16"}};
  return m;
}

bool requirement_met(const std::string& req, const nlohmann::json& machine) {
  if (req == kCudaDevice) {
    auto it = machine.find("gpus");
    return it != machine.end() && it->is_array() && !it->empty();
  }
  auto name = cpu_feature_names().find(req);
  if (name == cpu_feature_names().end()) return true;  // nothing to check it against
  auto it = machine.find("cpu_features");
  // A machine whose features are not described (older results, another architecture): the requirement
  // is unknown, and an unknown requirement excuses nothing.
  if (it == machine.end() || !it->is_array()) return true;
  for (auto& f : *it)
    if (f.is_string() && f.get<std::string>() == name->second) return true;
  return false;
}

}  // namespace

const std::vector<BackendEntry>& backend_registry() {
  static const std::vector<BackendEntry> r = make_registry();
  return r;
}

const BackendEntry* find_backend(const std::string& name) {
  for (auto& e : backend_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::map<std::string, std::string> target_environment(const Spec& t) {
  std::map<std::string, std::string> env;
  std::string threads = t.get("threads", "1");
  // determinism: every library's thread count is pinned, so no target inherits the caller's.
  env["OMP_NUM_THREADS"] = threads;
  env["OPENBLAS_NUM_THREADS"] = threads;
  const BackendEntry* e = find_backend(t.name);
  if (e && e->environment) e->environment(t, &env);
  return env;
}

std::unique_ptr<Backend> make_target_backend(const Spec& t, Status* st) {
  *st = Status::ok();
  const BackendEntry* e = find_backend(t.name);
  if (e && e->imported) {
    *st = Status::invalid(fmt::format("target '{}' cannot be run: its outputs are imported (detaudit import)", t.str()));
    return nullptr;
  }
  if (!e || !e->make) {
    *st = Status::invalid("unknown target " + t.name);
    return nullptr;
  }
  return e->make(t, st);
}

bool applicable(const Spec& target, const Spec& workload) {
  const BackendEntry* e = find_backend(target.name);
  return e && (!e->applicable || e->applicable(target, workload));
}

std::vector<Spec> expand_all(const Spec& t) {
  const BackendEntry* e = find_backend(t.name);
  if (!e) return {t};
  for (auto& [k, v] : t.params) {
    if (v != "all") continue;
    auto n = e->all_counts.find(k);
    if (n == e->all_counts.end()) continue;
    std::vector<Spec> out;
    for (int i = 0; i < n->second; ++i) {
      Spec s = t;
      s.set(k, std::to_string(i));
      for (auto& x : expand_all(s)) out.push_back(x);
    }
    return out;
  }
  return {t};
}

Promise promise_for(const Spec& target, const Spec& workload, const nlohmann::json& machine,
                    const std::map<std::string, std::string>& details) {
  const BackendEntry* e = find_backend(target.name);
  if (!e || !e->promise) return nothing("unknown backend '" + target.name + "': nothing is promised");
  Promise p = e->promise(target, workload, details);
  for (auto& r : p.requirements)
    if (!requirement_met(r, machine)) p.unmet.push_back(r);
  return p;
}

TargetFacts target_facts(const std::string& target) {
  TargetFacts f;
  Spec s;
  std::string err;
  const BackendEntry* e = parse_target(target, &s, &err) ? find_backend(s.name) : nullptr;
  if (!e) return f;
  f.known = true;
  f.canonical = s.str();
  f.device_kind = e->gpu ? "cuda" : "host";
  f.device = s.device;
  f.portable = e->portable && e->portable(s);
  Spec no_device = s;
  no_device.device = -1;
  f.implementation = no_device.str();
  if (!f.portable) f.libraries = e->libraries;
  return f;
}

bool training_variants(const Spec& base, Spec* deterministic, Spec* nondeterministic, std::string* err) {
  const BackendEntry* e = find_backend(base.name);
  if (!e || !e->variants) {
    std::vector<std::string> names;
    for (auto& b : backend_registry())
      if (b.variants) names.push_back(b.name);
    *err = fmt::format("target '{}' has no nondeterministic variant (training targets: {})", base.str(),
                       fmt::join(names, ", "));
    return false;
  }
  *deterministic = base;
  *nondeterministic = base;
  if (std::string why = e->variants(deterministic, nondeterministic); !why.empty()) {
    *err = why;
    return false;
  }
  return true;
}

}  // namespace detaudit
