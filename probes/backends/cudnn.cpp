// cudnn: cuDNN convolutions with pinned algorithms, and pooling (kernels/cuda/cudnn_backend.cpp).
#include "probes/backends/common.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "kernels/cuda/cuda.hpp"

namespace detaudit {

#if defined(DETAUDIT_HAVE_CUDA)
extern const GpuKernels kCudnnKernels;  // kernels/cuda/cudnn_backend.cpp
#endif

namespace {

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

Status variants_cudnn(Spec* d, Spec* n) {
  // Legacy algorithm 1 is deterministic for every pass; backward algorithm 0 accumulates with atomics.
  for (const char* k : {"fwd_algo", "bwd_data_algo", "bwd_filter_algo"}) d->set(k, "1");
  n->set("fwd_algo", "1");
  n->set("bwd_data_algo", "0");
  n->set("bwd_filter_algo", "0");
  return Status::ok();
}

std::vector<SuiteTarget> suite_targets_cudnn(const std::string&) {
  return {{"cudnn:0"},           {"cudnn:0?fwd_algo=all"}, {"cudnn:0?bwd_data_algo=all"}, {"cudnn:0?bwd_filter_algo=all"},
          {"cudnn:0?math=tf32"}, {"cudnn:0?pool=nondeterministic"}};
}

}  // namespace

BackendEntry cudnn_backend() {
  BackendEntry e;
  e.name = "cudnn";
  // One key per pass: an index of cuDNN's legacy algorithms (cudnn_conv_algorithms), auto or all.
  for (const char* pass : {"fwd", "bwd_data", "bwd_filter"}) {
    const int n = int(cudnn_conv_algorithms(ConvShape{}, pass).size());
    e.keys.push_back(key_int_in(std::string(pass) + "_algo", "auto", 0, n - 1, {"auto", "all"}));
    e.all_counts[std::string(pass) + "_algo"] = n;
  }
  e.keys.push_back(key_one_of("math", "fma", {"fma", "tf32"}));
  e.keys.push_back(key_one_of("pool", "deterministic", {"deterministic", "nondeterministic"}));
#if defined(DETAUDIT_HAVE_CUDA)
  e.make = [](const Spec& t) { return make_gpu_target(t, &kCudnnKernels); };
#else
  e.make = [](const Spec& t) { return make_gpu_target(t, nullptr); };
#endif
  e.device = DeviceKind::kCuda;
  // fwd_algo=auto (and the other passes'): cuDNN's Find times the algorithms and picks one.
  e.picks_algorithms = true;
  e.summary = "cuDNN convolutions with pinned algorithms; pooling";
  e.libraries = {"cudnn", "cuda_runtime", "cuda_driver"};
  e.applicable = applicable_cudnn;
  e.promise = promise_cudnn;
  e.variants = variants_cudnn;
  e.trains = true;
  e.suite_targets = suite_targets_cudnn;
  e.describe_machine = [](nlohmann::json* libs) {
    if (!cuda_stack().cudnn_version.empty()) (*libs)["cudnn"] = cuda_stack().cudnn_version;
  };
  return e;
}

}  // namespace detaudit
