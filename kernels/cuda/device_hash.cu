// Device-side pre-hash for fingerprints. The canonical fingerprint is the host XXH3-128 of the bytes;
// this 128-bit hash only recognises, on the device, bytes seen before, so repeats need not be copied back.
//
// The buffer is cut into 16-byte words (the last one zero-padded). Word i with halves (a, b) maps to
// (h1, h2) = F_i(a, b), a 4-round Feistel network keyed by i, so F_i is a bijection: changing any one
// word always changes the hash, and the position key makes swapped words count. The hash is the
// lane-wise sum mod 2^64 of all F_i(a, b).
// determinism: integer addition mod 2^64 is associative and commutative, so the atomics that combine
// the per-block sums give the same bits in any order, on any grid.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cuda/common.hpp"
#include "kernels/cuda/cuda.hpp"

namespace detaudit::gpu {

namespace {

constexpr uint64_t kKey = 0x9E3779B97F4A7C15ull;

__host__ __device__ inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
__host__ __device__ inline uint64_t mx(uint64_t x, uint64_t m) { return (x ^ (x >> 29)) * m; }

// k = (i + 1) * kKey, the position key of word i.
__host__ __device__ inline void word_hash(uint64_t k, uint64_t a, uint64_t b, uint64_t& h1, uint64_t& h2) {
  uint64_t u = a ^ k;
  uint64_t v = b ^ rotl(k, 29) ^ 0xD6E8FEB86659FD93ull;
  u += mx(v, 0xBF58476D1CE4E5B9ull);
  v ^= mx(u, 0x94D049BB133111EBull);
  u += mx(v, 0xFF51AFD7ED558CCDull);
  v ^= mx(u, 0xC4CEB9FE1A85EC53ull);
  h1 = u;
  h2 = v;
}

// Bytes [16 i, 16 i + 16) of p, zero past `bytes`, as two little-endian 64-bit words.
__host__ __device__ inline void load_tail(const unsigned char* p, size_t bytes, size_t i, uint64_t& a, uint64_t& b) {
  a = b = 0;
  for (int j = 0; j < 16; ++j) {
    size_t at = i * 16 + j;
    uint64_t byte = at < bytes ? p[at] : 0;
    if (j < 8) a |= byte << (8 * j);
    else b |= byte << (8 * (j - 8));
  }
}

__device__ inline void add_block_sums(uint64_t s1, uint64_t s2, unsigned long long* out) {
  for (int o = 16; o > 0; o >>= 1) {
    s1 += __shfl_down_sync(0xffffffffu, s1, o);
    s2 += __shfl_down_sync(0xffffffffu, s2, o);
  }
  __shared__ uint64_t w1[32], w2[32];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) w1[warp] = s1, w2[warp] = s2;
  __syncthreads();
  if (warp == 0) {
    int warps = (blockDim.x + 31) >> 5;
    s1 = lane < warps ? w1[lane] : 0;
    s2 = lane < warps ? w2[lane] : 0;
    for (int o = 16; o > 0; o >>= 1) {
      s1 += __shfl_down_sync(0xffffffffu, s1, o);
      s2 += __shfl_down_sync(0xffffffffu, s2, o);
    }
    if (lane == 0) {
      atomicAdd(out, (unsigned long long)s1);
      atomicAdd(out + 1, (unsigned long long)s2);
    }
  }
}

// 16-byte-aligned buffer: full words with one 16-byte load each, two in flight per thread.
__global__ void hash_aligned(const uint4* __restrict__ p, size_t bytes, unsigned long long* out) {
  const size_t full = bytes / 16;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  uint64_t k = (i + 1) * kKey;
  const uint64_t dk = stride * kKey;
  uint64_t s1 = 0, s2 = 0, h1, h2;
  for (; i + stride < full; i += 2 * stride, k += 2 * dk) {
    uint4 w0 = __ldg(p + i), w1 = __ldg(p + i + stride);
    word_hash(k, w0.x | uint64_t(w0.y) << 32, w0.z | uint64_t(w0.w) << 32, h1, h2);
    s1 += h1, s2 += h2;
    word_hash(k + dk, w1.x | uint64_t(w1.y) << 32, w1.z | uint64_t(w1.w) << 32, h1, h2);
    s1 += h1, s2 += h2;
  }
  if (i < full) {
    uint4 w0 = __ldg(p + i);
    word_hash(k, w0.x | uint64_t(w0.y) << 32, w0.z | uint64_t(w0.w) << 32, h1, h2);
    s1 += h1, s2 += h2;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0 && bytes % 16 != 0) {
    uint64_t a, b;
    load_tail(reinterpret_cast<const unsigned char*>(p), bytes, full, a, b);
    word_hash((full + 1) * kKey, a, b, h1, h2);
    s1 += h1, s2 += h2;
  }
  add_block_sums(s1, s2, out);
}

// Any alignment: byte loads (slow; only for pointers into the middle of a buffer).
__global__ void hash_bytes(const unsigned char* __restrict__ p, size_t bytes, unsigned long long* out) {
  const size_t words = (bytes + 15) / 16;
  uint64_t s1 = 0, s2 = 0, h1, h2, a, b;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    load_tail(p, bytes, i, a, b);
    word_hash((i + 1) * kKey, a, b, h1, h2);
    s1 += h1, s2 += h2;
  }
  add_block_sums(s1, s2, out);
}

}  // namespace

Status launch_device_hash(const void* p, size_t bytes, unsigned long long* out_dev, cudaStream_t stream) {
  DETAUDIT_CUDA(cudaMemsetAsync(out_dev, 0, 2 * sizeof(unsigned long long), stream));
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
    hash_aligned<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(p), bytes, out_dev);
  else
    hash_bytes<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(p), bytes, out_dev);
  DETAUDIT_CUDA_LAUNCHED("device hash kernel");
  return Status::ok();
}

}  // namespace detaudit::gpu

namespace detaudit {

Status device_hash128(const void* device_ptr, size_t bytes, uint64_t out[2]) {
  unsigned long long* d = nullptr;
  DETAUDIT_RETURN_IF_ERROR(gpu::from_cuda(cudaMalloc(&d, 2 * sizeof(unsigned long long)), "cudaMalloc"));
  Status st = gpu::launch_device_hash(device_ptr, bytes, d, nullptr);
  unsigned long long h[2] = {0, 0};
  if (st) st = gpu::from_cuda(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), "cudaMemcpy");
  cudaFree(d);
  out[0] = h[0], out[1] = h[1];
  return st;
}

void device_hash128_host(const void* host_ptr, size_t bytes, uint64_t out[2]) {
  const auto* p = static_cast<const unsigned char*>(host_ptr);
  uint64_t s1 = 0, s2 = 0, h1, h2, a, b;
  for (size_t i = 0; i < (bytes + 15) / 16; ++i) {
    gpu::load_tail(p, bytes, i, a, b);
    gpu::word_hash((i + 1) * gpu::kKey, a, b, h1, h2);
    s1 += h1, s2 += h2;
  }
  out[0] = s1, out[1] = s2;
}

}  // namespace detaudit
