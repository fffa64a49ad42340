// cpu: detaudit's own kernels (kernels/cpu/native*.cpp, winograd, pool, portable), and the host device kind.
#include "probes/backends/common.hpp"

#include <fmt/format.h>

#include "contract/json_fields.hpp"
#include "kernels/cpu/native.hpp"
#include "kernels/cpu/native_kernels.hpp"
#include "kernels/cpu/winograd.hpp"
#include "probes/workload.hpp"

namespace detaudit {

namespace {

// Its kernels run every workload but matmul in f64, which only order=portable's (its own f64 products) runs; the
// others leave it to the library backends (kernels/cpu: the native backend has no gemm_f64).
bool provides_cpu(const Spec& t, const Spec& w) {
  return !(w.name == "matmul" && w.get("dtype", "f32") == "f64" && !order_portable(t));
}

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


Promise promise_cpu_direct(const Spec& t, const Spec& w, const std::map<std::string, std::string>&);

// Whether cpu?conv=winograd computes this workload through Winograd F(4x4,3x3) (kernels/cpu/winograd.hpp):
// a conv2d whose shape winograd_applies() takes (3x3, stride 1, pad <= 2, min(C, K) >= 64); every other workload runs the
// direct code and keeps its bits.
bool runs_winograd(const Spec& t, const Spec& w) {
  if (t.get("conv", "direct") != "winograd" || w.name != "conv2d") return false;
  return native::winograd_applies(conv_shape_of(w), CpuNativeOptions{}.winograd_min_channels);
}

// cpu?order=portable has no Winograd path (its bits are fixed on every CPU and GPU): refused as a bad spec
// rather than silently run direct.
Status check_cpu(const Spec& t) {
  if (t.get("order", "blocked") == "portable" && t.get("conv", "direct") != "direct")
    return Status::invalid("conv=" + t.get("conv") +
                           " is not available with order=portable (its bits are the same on every CPU and GPU, "
                           "through the direct convolution only)");
  return Status::ok();
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

Status variants_cpu(Spec* d, Spec* n) {
  // determinism: order=atomic races between threads: with one there is one completion order, and the
  // "nondeterminism on" conditions would hold none.
  if (d->get_int("threads", 1) < 2)
    return Status::invalid(fmt::format(
        "{} has no nondeterministic variant: order=atomic with one thread has one completion order (use threads=2 "
        "or more)",
        d->str()));
  // A portable base keeps order=portable as its deterministic variant (the one that is the same on
  // every CPU and GPU); the others take order=blocked.
  if (d->get("order", "blocked") != "portable") d->set("order", "blocked");
  n->set("order", "atomic");
  return Status::ok();
}

BackendOr make_cpu_backend(const Spec& t) {
  CpuNativeOptions o;
  o.threads = threads_of(t);
  parse_reduce_order(t.get("order", "blocked"), &o.order);
  parse_cpu_isa(t.get("isa", "auto"), &o.isa);
  parse_conv_algo(t.get("conv", "direct"), &o.conv);
  std::unique_ptr<Backend> be = make_cpu_native(o);
  if (!be) return check_cpu(t).prefixed(t.str() + ": ");  // parse_target refused it through check_cpu before this
  return be;
}

std::vector<SuiteTarget> suite_targets_cpu(const std::string& suite) {
  std::vector<SuiteTarget> v;
  for (const char* order : {"sequential", "pairwise", "blocked", "atomic"})
    for (int t : {1, 2}) v.push_back({fmt::format("cpu?order={}&threads={}", order, t)});
  // The full suite's four-thread targets run after the vendor libraries' targets.
  if (suite == "full")
    for (const char* order : {"blocked", "atomic"}) v.push_back({fmt::format("cpu?order={}&threads=4", order), true});
  return v;
}

std::vector<std::string> training_targets_cpu(const std::string& use) {
  // Every one can race under order=atomic (two threads or more): a one-thread target's "nondeterministic"
  // variant has one completion order and would vary in nothing.
  if (use == "sony2021") return {"cpu?threads=2", "cpu?threads=4"};
  // PredNet's wide 3x3 convolutions go through Winograd F(4x4,3x3) (kernels/cpu/winograd.hpp), about 1.5x
  // the direct code's steps per second; blocked and atomic keep their promises there.
  if (use == "prednet") return {"cpu?threads=2&conv=winograd"};
  // qualify's level 2: one target with two threads, so the nondeterministic variant can vary.
  if (use == "qualify") return {"cpu?threads=2"};
  return {};
}

// A baseline entry of a host target is keyed by the CPU.
void baseline_key_host(const nlohmann::json& machine, int, nlohmann::json* k) {
  (*k)["kind"] = "cpu";
  (*k)["cpu_model"] = json_fields::str(machine, "cpu_model", "(unknown)");
  (*k)["cpu_features"] = json_fields::array(machine, "cpu_features");
}

}  // namespace

BackendEntry cpu_backend() {
  BackendEntry e;
  e.name = "cpu";
  // conv is optional (no default filled in), so that the canonical names of today's targets stay as they are;
  // absent means direct.
  KeyRule conv = key_one_of("conv", "", {"direct", "winograd"});
  conv.unset = "direct";
  e.keys = {key_one_of("order", "blocked", {"sequential", "pairwise", "blocked", "atomic", "portable"}),
            key_int_in("threads", "1", 1, 256), key_one_of("isa", "auto", {"auto", "avx512", "avx2", "scalar"}),
            std::move(conv)};
  e.check = check_cpu;
  e.make = make_cpu_backend;
  e.made_here = true;
  e.forced_details = {"forced_atomic_order_seed"};  // (kernels/cpu/native.cpp: a test's fixed order of atomic adds)
  e.summary = "detaudit's own multithreaded kernels with a selectable reduction order (portable: the bits of every CPU and "
              "GPU); conv=winograd: 3x3 convolutions as Winograd F(4x4,3x3)";
  e.applicable = always;
  e.promise = promise_cpu;
  e.variants = variants_cpu;
  e.trains = true;
  e.provides = provides_cpu;
  e.portable = order_portable;
  e.suite_targets = suite_targets_cpu;
  e.training_targets = training_targets_cpu;
  // What selects its code besides the spec: the compiler and C library it was built with (libm's exp in
  // softmax), and the instruction set isa=auto resolves to on this CPU.
  e.build = {"compiler", "glibc", "cpu_isa_auto"};
  e.describe_machine = [](nlohmann::json* libs) {
    (*libs)["cpu_isa_auto"] = to_string(resolved_cpu_isa(CpuIsa::kAuto));
  };
  return e;
}

DeviceKindEntry host_device_kind() {
  DeviceKindEntry k;
  k.kind = DeviceKind::kHost;
  k.name = "host";
  k.availability = [](const nlohmann::json&) { return Status::ok(); };
  k.baseline_key = baseline_key_host;
  return k;
}

}  // namespace detaudit
