// Device helpers shared by the native CUDA kernels and the training kernels.
#pragma once
#include <cuda_runtime.h>

namespace detaudit::gpu {

// determinism: a fixed binary tree over the block's threads in shared memory (blockDim.x a power of
// two, sh holding blockDim.x floats), so the sum depends only on the block size, never on timing.
// Every thread of the block must call it.
__device__ inline float block_tree_sum(float v, float* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  float total = sh[0];
  __syncthreads();
  return total;
}

// Where a block's total goes: added into *acc with atomicAdd (order=atomic), or stored as the block's
// partial for a fixed-order second pass. Thread 0 writes; every thread may call it.
__device__ inline void block_sum_out(float total, float* acc, float* partials) {
  if (threadIdx.x != 0) return;
  if (acc)
    atomicAdd(acc, total);  // determinism: blocks arrive in a timing-dependent order; float addition is not associative
  else
    partials[blockIdx.x] = total;
}

}  // namespace detaudit::gpu
