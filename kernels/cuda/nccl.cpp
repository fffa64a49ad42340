// NCCL through dlopen (kernels/cuda/nccl.hpp). The few declarations used are NCCL 2's stable C ABI,
// written here so that the build needs no nccl.h: ncclResult_t is an int enum (ncclSuccess 0),
// ncclComm_t an opaque pointer, ncclUniqueId 128 bytes, ncclFloat 7 and ncclSum 0.
#include "kernels/cuda/nccl.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/cuda/common.hpp"

namespace detaudit {
namespace {

struct NcclId {
  char internal[kNcclIdBytes];
};
using NcclComm = void*;
constexpr int kNcclFloat = 7, kNcclSum = 0;

struct NcclApi {
  void* handle = nullptr;
  std::string error;  // why it did not load
  int (*get_version)(int*) = nullptr;
  int (*get_unique_id)(NcclId*) = nullptr;
  int (*comm_init_rank)(NcclComm*, int, NcclId, int) = nullptr;
  int (*all_reduce)(const void*, void*, size_t, int, int, NcclComm, cudaStream_t) = nullptr;
  int (*comm_destroy)(NcclComm) = nullptr;
  const char* (*error_string)(int) = nullptr;
};

// Loaded once and kept for the process (NCCL's own threads may outlive a communicator).
const NcclApi& nccl_api() {
  static NcclApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* lib : {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"}) {
      api.handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
      if (api.handle) break;
    }
    if (!api.handle) {
      api.error = "libnccl.so.2 does not load (NCCL is not installed)";
      return;
    }
    auto sym = [&](const char* name, auto* fn) {
      *fn = reinterpret_cast<std::remove_reference_t<decltype(*fn)>>(dlsym(api.handle, name));
      if (!*fn && api.error.empty()) api.error = fmt::format("libnccl has no {}", name);
    };
    sym("ncclGetVersion", &api.get_version);
    sym("ncclGetUniqueId", &api.get_unique_id);
    sym("ncclCommInitRank", &api.comm_init_rank);
    sym("ncclAllReduce", &api.all_reduce);
    sym("ncclCommDestroy", &api.comm_destroy);
    sym("ncclGetErrorString", &api.error_string);
  });
  return api;
}

Status from_nccl(int rc, const char* what) {
  if (rc == 0) return Status::ok();
  const auto& api = nccl_api();
  return Status::error(fmt::format("{}: NCCL error {}: {}", what, rc, api.error_string ? api.error_string(rc) : "?"));
}

}  // namespace

std::string nccl_library_version() {
  const auto& api = nccl_api();
  int v = 0;
  if (!api.error.empty() || api.get_version(&v) != 0 || v <= 0) return "";
  return v >= 10000 ? fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)
                    : fmt::format("{}.{}.{}", v / 1000, v / 100 % 10, v % 100);
}

std::string nccl_unavailable_reason() {
  StatusOr<int> n = gpu::device_count();
  if (!n) return "no CUDA device: " + n.message();
  const auto& api = nccl_api();
  return api.error;
}

Status nccl_make_id(std::string* id) {
  const auto& api = nccl_api();
  if (!api.error.empty()) return Status::unavailable(api.error);
  NcclId u{};
  DETAUDIT_RETURN_IF_ERROR(from_nccl(api.get_unique_id(&u), "ncclGetUniqueId"));
  id->assign(u.internal, sizeof u.internal);
  return Status::ok();
}

Status nccl_allreduce(const std::string& id, int rank, int ranks, int local_rank, const std::string& algo,
                      const std::vector<float>& values, int repeats, std::vector<std::vector<float>>* results,
                      std::vector<double>* seconds) {
  const auto& api = nccl_api();
  if (!api.error.empty()) return Status::unavailable(api.error);
  if (id.size() != kNcclIdBytes) return Status::invalid("an NCCL unique id is 128 bytes");
  NcclId u{};
  std::memcpy(u.internal, id.data(), kNcclIdBytes);
  StatusOr<int> devices = gpu::device_count();
  if (!devices) return devices.status();
  DETAUDIT_CUDA(cudaSetDevice(local_rank % *devices));
  const size_t bytes = values.size() * sizeof(float);
  float *x = nullptr, *y = nullptr;
  cudaStream_t stream = nullptr;
  NcclComm comm = nullptr;
  // Everything made here is released on every path.
  struct Cleanup {
    float **x, **y;
    cudaStream_t* s;
    NcclComm* c;
    int (*destroy)(NcclComm);
    ~Cleanup() {
      if (*c) destroy(*c);
      if (*s) cudaStreamDestroy(*s);
      if (*x) cudaFree(*x);
      if (*y) cudaFree(*y);
    }
  } cleanup{&x, &y, &stream, &comm, api.comm_destroy};
  DETAUDIT_CUDA(cudaMalloc(&x, bytes));
  DETAUDIT_CUDA(cudaMalloc(&y, bytes));
  DETAUDIT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DETAUDIT_CUDA(cudaMemcpy(x, values.data(), bytes, cudaMemcpyHostToDevice));
  {
    // NCCL reads NCCL_ALGO while the communicator is made; the user's own value comes back after.
    const char* before = std::getenv("NCCL_ALGO");
    const std::string saved = before ? before : "";
    setenv("NCCL_ALGO", algo.c_str(), 1);
    const int rc = api.comm_init_rank(&comm, ranks, u, rank);
    if (before) setenv("NCCL_ALGO", saved.c_str(), 1);
    else unsetenv("NCCL_ALGO");
    if (rc != 0) comm = nullptr;
    DETAUDIT_RETURN_IF_ERROR(from_nccl(rc, "ncclCommInitRank"));
  }
  results->clear();
  seconds->clear();
  for (int r = 0; r < repeats; ++r) {
    DETAUDIT_CUDA(cudaMemsetAsync(y, 0xff, bytes, stream));  // no result of the last repeat can survive
    DETAUDIT_CUDA(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    DETAUDIT_RETURN_IF_ERROR(from_nccl(api.all_reduce(x, y, values.size(), kNcclFloat, kNcclSum, comm, stream),
                                       "ncclAllReduce"));
    DETAUDIT_CUDA(cudaStreamSynchronize(stream));
    seconds->push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::vector<float> out(values.size());
    DETAUDIT_CUDA(cudaMemcpy(out.data(), y, bytes, cudaMemcpyDeviceToHost));
    results->push_back(std::move(out));
  }
  return Status::ok();
}

}  // namespace detaudit
