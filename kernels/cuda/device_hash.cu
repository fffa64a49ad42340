// Device-side pre-hash for fingerprints: the kernels behind GpuBackend::fingerprint. What the hash is and
// why it has a keyed pair of lanes: kernels/cuda/device_hash.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"
#include "kernels/cuda/device_hash.hpp"

namespace detaudit::gpu {

namespace {

__device__ inline void add_block_sums(uint64_t s[4], unsigned long long* out) {
  for (int o = 16; o > 0; o >>= 1)
    for (int l = 0; l < 4; ++l) s[l] += __shfl_down_sync(0xffffffffu, s[l], o);
  __shared__ uint64_t w[4][32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
    for (int l = 0; l < 4; ++l) w[l][warp] = s[l];
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + 31) >> 5;
    for (int l = 0; l < 4; ++l) s[l] = lane < warps ? w[l][lane] : 0;
    for (int o = 16; o > 0; o >>= 1)
      for (int l = 0; l < 4; ++l) s[l] += __shfl_down_sync(0xffffffffu, s[l], o);
    if (lane == 0)
      for (int l = 0; l < 4; ++l) atomicAdd(out + l, (unsigned long long)s[l]);
  }
}

// 16-byte-aligned buffer: full words with one 16-byte load each, two in flight per thread.
__global__ void hash_aligned(const uint4* __restrict__ p, size_t bytes, DeviceHashKey key, unsigned long long* out) {
  const size_t full = bytes / 16;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t s[4] = {0, 0, 0, 0};
  for (; i + stride < full; i += 2 * stride) {
    uint4 w0 = __ldg(p + i), w1 = __ldg(p + i + stride);
    add_word(key, i, w0.x | uint64_t(w0.y) << 32, w0.z | uint64_t(w0.w) << 32, s);
    add_word(key, i + stride, w1.x | uint64_t(w1.y) << 32, w1.z | uint64_t(w1.w) << 32, s);
  }
  if (i < full) {
    uint4 w0 = __ldg(p + i);
    add_word(key, i, w0.x | uint64_t(w0.y) << 32, w0.z | uint64_t(w0.w) << 32, s);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 16 != 0) {
    uint64_t a, b;
    load_tail(reinterpret_cast<const unsigned char*>(p), bytes, full, a, b);
    add_word(key, full, a, b, s);
  }
  add_block_sums(s, out);
}

// Any alignment: byte loads (slow; only for pointers into the middle of a buffer).
__global__ void hash_bytes(const unsigned char* __restrict__ p, size_t bytes, DeviceHashKey key, unsigned long long* out) {
  const size_t words = (bytes + 15) / 16;
  uint64_t s[4] = {0, 0, 0, 0}, a, b;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    load_tail(p, bytes, i, a, b);
    add_word(key, i, a, b, s);
  }
  add_block_sums(s, out);
}

}  // namespace

Status launch_device_hash(const void* p, size_t bytes, const DeviceHashKey& key, unsigned long long* out_dev,
                          cudaStream_t stream) {
  DETAUDIT_CUDA(cudaMemsetAsync(out_dev, 0, kDeviceHashLanes * sizeof(unsigned long long), stream));
  if (bytes == 0) return Status::ok();
  constexpr int kThreads = 256;
  const bool aligned = reinterpret_cast<uintptr_t>(p) % 16 == 0;
  // One full wave of resident blocks, no more (a partial second wave would idle most SMs), and no more
  // than the words need. The sum does not depend on the grid.
  static std::atomic<int> resident[2][64];  // [aligned][device]: blocks per SM x SMs, computed once
  int device = 0;
  DETAUDIT_CUDA(cudaGetDevice(&device));
  int wave = resident[aligned][device & 63].load();
  if (wave == 0) {
    int sms = 0, per_sm = 0;
    DETAUDIT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (aligned) DETAUDIT_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hash_aligned, kThreads, 0));
    else DETAUDIT_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hash_bytes, kThreads, 0));
    wave = std::max(1, sms * per_sm);
    resident[aligned][device & 63].store(wave);
  }
  const size_t words = (bytes + 15) / 16;
  const size_t want = (words + 2 * kThreads - 1) / (2 * kThreads);
  const unsigned blocks = unsigned(std::max<size_t>(1, std::min<size_t>(want, size_t(wave))));
  if (aligned)
    hash_aligned<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(p), bytes, key, out_dev);
  else
    hash_bytes<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(p), bytes, key, out_dev);
  DETAUDIT_CUDA_LAUNCHED("device hash kernel");
  return Status::ok();
}

}  // namespace detaudit::gpu

namespace detaudit {

Status device_hash(const void* device_ptr, size_t bytes, const gpu::DeviceHashKey& key, uint64_t out[4]) {
  unsigned long long* d = nullptr;
  const size_t n = gpu::kDeviceHashLanes * sizeof(unsigned long long);
  DETAUDIT_RETURN_IF_ERROR(gpu::from_cuda(cudaMalloc(&d, n), "cudaMalloc"));
  const Status launched = gpu::launch_device_hash(device_ptr, bytes, key, d, nullptr);
  unsigned long long h[gpu::kDeviceHashLanes] = {0, 0, 0, 0};
  // One initialisation, no assignment: nvcc takes a Status& returned by operator= for a dropped Status.
  const Status st = launched ? gpu::from_cuda(cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost), "cudaMemcpy") : launched;
  cudaFree(d);
  for (int l = 0; l < gpu::kDeviceHashLanes; ++l) out[l] = h[l];
  return st;
}

}  // namespace detaudit
