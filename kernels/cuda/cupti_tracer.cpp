#include "kernels/cuda/cupti_tracer.hpp"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace detaudit::gpu {

namespace {

// The kernel record layout of the CUPTI we compile against.
#if defined(CUPTI_API_VERSION) && CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
#else
using KernelActivity = CUpti_ActivityKernel9;  // CUDA 12.x
#endif

constexpr size_t kBufferBytes = 8u << 20;

struct RawKernel {
  KernelRecord rec;
  uint32_t correlation = 0;
  uint64_t start = 0;
};

// Filled by CUPTI's buffer-completion callback (possibly on CUPTI's own thread). Never destroyed: CUPTI
// may deliver buffers while the process exits.
struct Collected {
  std::mutex mu;
  std::vector<RawKernel> kernels;
  std::unordered_map<uint32_t, uint64_t> external;  // correlation id -> CUSTOM0 external id
};
Collected& collected() {
  static Collected* c = new Collected;
  return *c;
}

std::string cupti_message(CUptiResult r, const char* api) {
  const char* name = nullptr;
  if (cuptiGetResultString(r, &name) != CUPTI_SUCCESS || !name) name = "CUPTI_ERROR";
  const char* msg = nullptr;
  if (cuptiGetErrorMessage(r, &msg) != CUPTI_SUCCESS || !msg || std::string(msg) == name)
    return fmt::format("{}: {} ({})", api, name, int(r));
  return fmt::format("{}: {} ({}): {}", api, name, int(r), msg);
}

Status unavailable(CUptiResult r, const char* api) {
  return Status::unavailable("tracing unavailable: " + cupti_message(r, api));
}

std::string demangle(const char* name) {
  if (!name) return "";
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && d) ? d : name;
  std::free(d);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));  // CUPTI needs 8-byte alignment
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mu);
  CUpti_Activity* record = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      const auto* k = reinterpret_cast<const KernelActivity*>(record);
      RawKernel raw;
      raw.rec.name = demangle(k->name);  // CUPTI owns k->name: copy it now
      raw.rec.grid[0] = uint32_t(k->gridX), raw.rec.grid[1] = uint32_t(k->gridY), raw.rec.grid[2] = uint32_t(k->gridZ);
      raw.rec.block[0] = uint32_t(k->blockX), raw.rec.block[1] = uint32_t(k->blockY);
      raw.rec.block[2] = uint32_t(k->blockZ);
      raw.rec.registers = k->registersPerThread;
      raw.rec.static_smem = uint32_t(k->staticSharedMemory);
      raw.rec.dynamic_smem = uint32_t(k->dynamicSharedMemory);
      raw.rec.duration_ns = k->end > k->start ? k->end - k->start : 0;
      raw.correlation = k->correlationId;
      raw.start = k->start;
      c.kernels.push_back(std::move(raw));
    } else if (record->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) c.external[e->correlationId] = e->externalId;
    }
  }
  std::free(buffer);
}

}  // namespace

CuptiTracer& CuptiTracer::instance() {
  static CuptiTracer* t = new CuptiTracer;  // process-wide, like CUPTI's own subscriber slot
  return *t;
}

Status CuptiTracer::start() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return Status::unavailable(fmt::format("tracing unavailable: no CUDA device ({})", cudaGetErrorName(e)));
  }
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return unavailable(r, "cuptiActivityRegisterCallbacks");
  // CONCURRENT_KERNEL, not KERNEL: KERNEL serialises kernels.
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  for (size_t i = 0; i < std::size(kinds); ++i) {
    r = cuptiActivityEnable(kinds[i]);
    if (r != CUPTI_SUCCESS) {
      for (size_t j = 0; j < i; ++j) cuptiActivityDisable(kinds[j]);
      return unavailable(r, "cuptiActivityEnable");
    }
  }
  // RUNTIME and DRIVER make sure CUPTI emits external-correlation records for the calls that launch
  // kernels (runtime launches, and libraries' driver launches); their own records are ignored. Optional:
  // without them end() still has the begin..end window.
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
  return Status::ok();
}

Status CuptiTracer::available() {
  std::call_once(started_, [this] { start_status_ = start(); });
  return start_status_;
}

Status CuptiTracer::begin(uint64_t repeat_id) {
  DETAUDIT_RETURN_IF_ERROR(available());
  // Drain what earlier work left in CUPTI's buffers, so this repeat starts from an empty list.
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    return Status::error(fmt::format("cudaDeviceSynchronize: {} ({}): {}", cudaGetErrorName(e), int(e),
                                     cudaGetErrorString(e)));
  CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) return unavailable(r, "cuptiActivityFlushAll");
  {
    Collected& c = collected();
    std::lock_guard<std::mutex> lock(c.mu);
    c.kernels.clear();
    c.external.clear();
  }
  r = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, repeat_id);
  if (r != CUPTI_SUCCESS) return unavailable(r, "cuptiActivityPushExternalCorrelationId");
  return Status::ok();
}

Status CuptiTracer::end(uint64_t repeat_id, std::vector<KernelRecord>* kernels) {
  kernels->clear();
  DETAUDIT_RETURN_IF_ERROR(available());
  uint64_t popped = 0;
  CUptiResult r = cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped);
  if (r != CUPTI_SUCCESS) return unavailable(r, "cuptiActivityPopExternalCorrelationId");
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess)
    return Status::error(fmt::format("cudaDeviceSynchronize: {} ({}): {}", cudaGetErrorName(e), int(e),
                                     cudaGetErrorString(e)));
  r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) return unavailable(r, "cuptiActivityFlushAll");
  size_t dropped = 0;
  r = cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);

  std::vector<RawKernel> raw;
  {
    Collected& c = collected();
    std::lock_guard<std::mutex> lock(c.mu);
    // begin() drained everything older, so every kernel here was launched between begin and end. Drop
    // those whose launching call carried another id (another thread's repeat); keep this repeat's and
    // those CUPTI left without an external-correlation record.
    for (auto& k : c.kernels) {
      auto it = c.external.find(k.correlation);
      if (it == c.external.end() || it->second == repeat_id) raw.push_back(std::move(k));
    }
    c.kernels.clear();
    c.external.clear();
  }
  std::stable_sort(raw.begin(), raw.end(), [](const RawKernel& a, const RawKernel& b) { return a.start < b.start; });
  for (auto& k : raw) kernels->push_back(std::move(k.rec));
  if (popped != repeat_id)
    return Status::error(fmt::format("CUPTI external correlation ids out of order: pushed {}, popped {}",
                                     repeat_id, popped));
  if (r != CUPTI_SUCCESS) return unavailable(r, "cuptiActivityGetNumDroppedRecords");
  if (dropped > 0)
    return Status::unavailable(fmt::format("tracing incomplete: CUPTI dropped {} records", dropped));
  return Status::ok();
}

std::string cupti_version_string() {
  uint32_t v = 0;
  if (cuptiGetVersion(&v) != CUPTI_SUCCESS) return "";
  return std::to_string(v);
}

}  // namespace detaudit::gpu
