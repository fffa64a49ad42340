// gpu_speed: what determinism costs on this GPU, as one JSON object on stdout.
//  - device fingerprint pre-hash vs a device-to-device cudaMemcpy, 1 GiB (goal: ratio >= 0.5)
//  - sum of 2^28 floats: detaudit's tree, atomic and portable reductions vs CUB's DeviceReduce::Sum
//  - cuDNN backward-filter: fastest deterministic vs fastest algorithm (cudnnFind...Ex times)
// Every output is checked once before anything is timed. Without a device: {"skipped": "<reason>"}, exit 0.
#include <cub/device/device_reduce.cuh>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"
#include "tests/gpu_kernels.hpp"

using namespace detaudit;

namespace {

// printf-style formatting: fmt's header-only build does not survive nvcc's host pass.
std::string format(const char* f, ...) {
  va_list a, b;
  va_start(a, f);
  va_copy(b, a);
  std::string s(size_t(std::vsnprintf(nullptr, 0, f, a)), '\0');
  std::vsnprintf(s.data(), s.size() + 1, f, b);
  va_end(a);
  va_end(b);
  return s;
}

std::string quoted(const std::string& s) {
  std::string o = "\"";
  for (char c : s) o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return o + "\"";
}

struct Fail {
  std::string what;
};
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Fail{format("%s: %s (%d)", what, cudaGetErrorName(e), int(e))};
}
void check(const Status& st, const char* what) {
  if (!st) throw Fail{std::string(what) + ": " + st.message()};
}
// The backend a factory made, or a Fail naming what could not be made and why.
std::unique_ptr<Backend> made(BackendOr b, const char* what) {
  check(b.status(), what);
  return std::move(b).value();
}
void check(cudnnStatus_t e, const char* what) {
  if (e != CUDNN_STATUS_SUCCESS) throw Fail{format("%s: %s (%d)", what, cudnnGetErrorString(e), int(e))};
}

__global__ void fill_uniform(float* p, size_t n, uint64_t seed) {  // [0, 1), counter-based
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = float((z ^ (z >> 31)) >> 40) * 0x1p-24f;
  }
}

// Milliseconds per call of `f`, over `reps` calls after `warm` warm-up calls, by CUDA events.
template <typename F>
float time_ms(F&& f, int reps = 20, int warm = 3) {
  for (int i = 0; i < warm; ++i) f();
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  check(cudaEventRecord(a), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) f();
  check(cudaEventRecord(b), "cudaEventRecord");
  check(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / reps;
}

std::string fingerprint_section() {
  const size_t bytes = size_t(1) << 30, check_bytes = size_t(64) << 20;
  auto be = made(make_gpu_backend("cuda", &kCudaNativeKernels, 0, {}), "make_gpu_backend(cuda)");
  void *src = nullptr, *dst = nullptr;
  unsigned long long* h = nullptr;
  check(cudaMalloc(&src, bytes), "cudaMalloc");
  check(cudaMalloc(&dst, bytes), "cudaMalloc");
  check(cudaMalloc(&h, gpu::kDeviceHashLanes * sizeof(unsigned long long)), "cudaMalloc");
  fill_uniform<<<4096, 256>>>(static_cast<float*>(src), bytes / 4, 1);
  check(cudaDeviceSynchronize(), "fill");
  // Check once: device pre-hash == its CPU reference, backend fingerprint == host XXH3 (on 64 MiB).
  std::vector<unsigned char> host(check_bytes);
  check(cudaMemcpy(host.data(), src, check_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const gpu::DeviceHashKey key = gpu::DeviceHashKey::random();
  uint64_t dev_h[4], cpu_h[4];
  check(device_hash(src, check_bytes, key, dev_h), "device_hash");
  gpu::device_hash_host(host.data(), check_bytes, key, cpu_h);
  if (!std::equal(dev_h, dev_h + 4, cpu_h)) throw Fail{"device hash differs from its CPU reference"};
  Fingerprint fp;
  check(be->fingerprint(src, check_bytes, &fp), "fingerprint");
  if (fp != fingerprint_bytes(host.data(), check_bytes)) throw Fail{"device fingerprint differs from the host's"};

  float hash_ms = time_ms([&] { check(gpu::launch_device_hash(src, bytes, key, h, nullptr), "launch_device_hash"); });
  float copy_ms = time_ms([&] { check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); });
  const double gb = double(bytes) / 1e9;
  std::string out = format(
      "{\"bytes\": %zu, \"device_hash_ms\": %.4f, \"device_hash_gbps\": %.1f, \"memcpy_d2d_ms\": %.4f, "
      "\"memcpy_d2d_gbps\": %.1f, \"memcpy_d2d_read_plus_write_gbps\": %.1f, \"ratio\": %.3f, \"goal\": 0.5, "
      "\"meets_goal\": %s}",
      bytes, hash_ms, gb / (hash_ms * 1e-3), copy_ms, gb / (copy_ms * 1e-3), 2 * gb / (copy_ms * 1e-3),
      copy_ms / hash_ms, copy_ms / hash_ms >= 0.5 ? "true" : "false");
  cudaFree(src);
  cudaFree(dst);
  cudaFree(h);
  return out;
}

std::string sum_section() {
  const size_t n = size_t(1) << 28;
  float *x = nullptr, *out = nullptr;
  check(cudaMalloc(&x, n * 4), "cudaMalloc");
  check(cudaMalloc(&out, 4 * 4), "cudaMalloc");
  fill_uniform<<<4096, 256>>>(x, n, 2);
  check(cudaDeviceSynchronize(), "fill");
  std::vector<float> host(n);
  check(cudaMemcpy(host.data(), x, n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  double want = 0;
  for (float v : host) want += v;

  auto tree = made(make_gpu_backend("cuda", &kCudaNativeKernels, 0, {{"order", "tree"}}), "make_gpu_backend(cuda tree)");
  auto atomic = made(make_gpu_backend("cuda", &kCudaNativeKernels, 0, {{"order", "atomic"}}), "make_gpu_backend(cuda atomic)");
  auto portable = made(make_gpu_backend("cuda", &kCudaNativeKernels, 0, {{"order", "portable"}}), "make_gpu_backend(cuda portable)");
  size_t temp_bytes = 0;
  check(cub::DeviceReduce::Sum(nullptr, temp_bytes, x, out + 2, int64_t(n)), "cub::DeviceReduce::Sum (size)");
  void* temp = nullptr;
  check(cudaMalloc(&temp, std::max<size_t>(temp_bytes, 1)), "cudaMalloc");
  auto run_tree = [&] { check(tree->reduce(ReduceOp::kSum, x, nullptr, n, out), "tree sum"); };
  auto run_atomic = [&] { check(atomic->reduce(ReduceOp::kSum, x, nullptr, n, out + 1), "atomic sum"); };
  // determinism: CUB's default DeviceReduce is run-to-run deterministic (not across GPUs).
  auto run_cub = [&] { check(cub::DeviceReduce::Sum(temp, temp_bytes, x, out + 2, int64_t(n)), "cub sum"); };
  // order=portable: kernels/portable.hpp's leaves and tree, the bits of cpu?order=portable.
  auto run_portable = [&] { check(portable->reduce(ReduceOp::kSum, x, nullptr, n, out + 3), "portable sum"); };
  run_tree(), run_atomic(), run_cub(), run_portable();
  float got[4];
  check(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (float g : got)
    if (std::fabs(g - want) > 1e-3 * want) throw Fail{format("sum check failed: %g vs %g", double(g), want)};
  const double gb = n * 4.0 / 1e9;
  float t = time_ms(run_tree), a = time_ms(run_atomic), c = time_ms(run_cub), p = time_ms(run_portable);
  cudaFree(temp);
  cudaFree(x);
  cudaFree(out);
  return format(
      "{\"n\": %zu, \"exact\": %.1f, \"tree\": {\"ms\": %.4f, \"gbps\": %.1f, \"value\": %.1f}, "
      "\"atomic\": {\"ms\": %.4f, \"gbps\": %.1f, \"value\": %.1f}, "
      "\"cub\": {\"ms\": %.4f, \"gbps\": %.1f, \"value\": %.1f}, "
      "\"portable\": {\"ms\": %.4f, \"gbps\": %.1f, \"value\": %.1f, \"of_cub\": %.2f}}",
      n, want, double(t), gb / (t * 1e-3), double(got[0]), double(a), gb / (a * 1e-3), double(got[1]), double(c),
      gb / (c * 1e-3), double(got[2]), double(p), gb / (p * 1e-3), double(got[3]), double(c / p));
}

std::string cudnn_section() {
  const int n = 64, c = 64, h = 56, w = 56, k = 64, r = 3, s = 3, pad = 1;
  cudnnHandle_t dnn;
  check(cudnnCreate(&dnn), "cudnnCreate");
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  check(cudnnCreateTensorDescriptor(&xd), "cudnnCreateTensorDescriptor");
  check(cudnnCreateTensorDescriptor(&yd), "cudnnCreateTensorDescriptor");
  check(cudnnCreateFilterDescriptor(&wd), "cudnnCreateFilterDescriptor");
  check(cudnnCreateConvolutionDescriptor(&cd), "cudnnCreateConvolutionDescriptor");
  check(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w), "cudnnSetTensor4dDescriptor");
  check(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, k, h, w), "cudnnSetTensor4dDescriptor");
  check(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s), "cudnnSetFilter4dDescriptor");
  check(cudnnSetConvolution2dDescriptor(cd, pad, pad, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor");
  check(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");
  float *x, *dy, *dw, *dw2;
  const size_t xs = size_t(n) * c * h * w, ys = size_t(n) * k * h * w, ws = size_t(k) * c * r * s;
  check(cudaMalloc(&x, xs * 4), "cudaMalloc");
  check(cudaMalloc(&dy, ys * 4), "cudaMalloc");
  check(cudaMalloc(&dw, ws * 4), "cudaMalloc");
  check(cudaMalloc(&dw2, ws * 4), "cudaMalloc");
  fill_uniform<<<4096, 256>>>(x, xs, 3);
  fill_uniform<<<4096, 256>>>(dy, ys, 4);
  size_t work_bytes = size_t(1) << 30;
  void* work;
  check(cudaMalloc(&work, work_bytes), "cudaMalloc");
  cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  int returned = 0;
  check(cudnnFindConvolutionBackwardFilterAlgorithmEx(dnn, xd, x, yd, dy, cd, wd, dw,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf, work,
                                                      work_bytes),
        "cudnnFindConvolutionBackwardFilterAlgorithmEx");
  std::string rows;
  int fastest = -1, fastest_det = -1;
  for (int i = 0; i < returned; ++i) {
    const auto& p = perf[i];
    rows += format("%s{\"algo\": %d, \"status\": %s, \"ms\": %.4f, \"memory\": %zu, \"deterministic\": %s}",
                   rows.empty() ? "" : ", ", int(p.algo), quoted(cudnnGetErrorString(p.status)).c_str(),
                   double(p.time), p.memory, p.determinism == CUDNN_DETERMINISTIC ? "true" : "false");
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (fastest < 0) fastest = i;
    if (fastest_det < 0 && p.determinism == CUDNN_DETERMINISTIC) fastest_det = i;
  }
  std::string summary = "\"fastest\": null, \"fastest_deterministic\": null";
  if (fastest >= 0 && fastest_det >= 0) {
    // Check once: both algorithms agree to float accuracy.
    const float one = 1.f, zero = 0.f;
    check(cudnnConvolutionBackwardFilter(dnn, &one, xd, x, yd, dy, cd, perf[fastest].algo, work, work_bytes, &zero,
                                         wd, dw),
          "cudnnConvolutionBackwardFilter");
    check(cudnnConvolutionBackwardFilter(dnn, &one, xd, x, yd, dy, cd, perf[fastest_det].algo, work, work_bytes,
                                         &zero, wd, dw2),
          "cudnnConvolutionBackwardFilter");
    std::vector<float> a(ws), b(ws);
    check(cudaMemcpy(a.data(), dw, ws * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(b.data(), dw2, ws * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    double scale = 0, diff = 0;
    for (size_t i = 0; i < ws; ++i) scale = std::max(scale, double(std::fabs(a[i]))), diff = std::max(diff, double(std::fabs(a[i] - b[i])));
    if (diff > 1e-3 * scale) throw Fail{format("cudnn algorithms disagree: %g of %g", diff, scale)};
    summary = format("\"fastest\": {\"algo\": %d, \"ms\": %.4f}, \"fastest_deterministic\": {\"algo\": %d, "
                     "\"ms\": %.4f}, \"cost_of_determinism\": %.3f, \"max_abs_diff\": %.3g",
                     int(perf[fastest].algo), double(perf[fastest].time), int(perf[fastest_det].algo),
                     double(perf[fastest_det].time), double(perf[fastest_det].time / perf[fastest].time), diff);
  }
  for (void* p : {(void*)x, (void*)dy, (void*)dw, (void*)dw2, work}) cudaFree(p);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  cudnnDestroy(dnn);
  return format("{\"shape\": \"n=64,c=64,h=w=56,k=64,3x3,pad=1\", \"math\": \"CUDNN_FMA_MATH\", %s, "
                "\"algorithms\": [%s]}",
                summary.c_str(), rows.c_str());
}

}  // namespace

int main() {
  CudaEnvironment env = query_cuda_environment();
  if (!env.available) {
    std::printf("{\"skipped\": %s}\n", quoted("no CUDA device: " + env.reason).c_str());
    return 0;
  }
  std::string out = "{\"gpu\": " + quoted(env.gpus[0].name) + ", \"cudnn\": " + quoted(env.cudnn_version);
  // Each section stands alone: a failure is reported in its place and the others still run.
  const std::pair<const char*, std::string (*)()> sections[] = {
      {"fingerprint", fingerprint_section}, {"sum_2_28", sum_section}, {"cudnn_bwd_filter", cudnn_section}};
  int failed = 0;
  for (const auto& [name, fn] : sections) {
    std::string body;
    try {
      body = fn();
    } catch (const Fail& f) {
      body = "{\"error\": " + quoted(f.what) + "}";
      ++failed;
    }
    out += format(", \"%s\": %s", name, body.c_str());
  }
  std::printf("%s}\n", out.c_str());
  return failed ? 1 : 0;
}
