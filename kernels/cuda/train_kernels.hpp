// The training ops of every GPU backend (GpuBackend in common.hpp), implemented in train_ops.cu with
// kernels/cpu/train_ops.cpp as their host reference: the same float formulas, operation for operation
// (nvcc runs with --fmad=false, so nothing is fused that the CPU does not fuse).
// All run on the legacy default stream and return after launching; launch errors come back as a Status,
// faults at the next sync. `atomic` selects the nondeterministic variant of a reduction; otherwise every
// reduction is a fixed-shape tree whose shape depends only on the sizes, never on timing or the GPU model.
#pragma once
#include "kernels/backend.hpp"

namespace detaudit::gpu {

// Floats of device scratch that gpu_loss needs: per-block partials plus one atomic accumulator.
constexpr int kTrainPartials = 1024;
constexpr size_t kTrainScratchFloats = kTrainPartials + 1;

Status gpu_bias_add(float* y, const float* bias, size_t n, size_t c, size_t hw);
Status gpu_bias_grad(bool atomic, const float* dy, float* db, size_t n, size_t c, size_t hw);
Status gpu_unary_bwd(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t n);
Status gpu_upsample2_fwd(const float* x, float* y, size_t planes, int h, int w);
Status gpu_upsample2_bwd(const float* dy, float* dx, size_t planes, int h, int w);
Status gpu_copy_2d(size_t rows, size_t cols, const float* src, size_t src_ld, float* dst, size_t dst_ld);
Status gpu_scale(float* y, float alpha, size_t n);
// scratch: kTrainScratchFloats floats of device memory.
Status gpu_loss(LossOp op, bool atomic, const float* y, const float* t, size_t n, float* value, float* dy,
                float* scratch);
Status gpu_adam_step(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t n);
Status gpu_sgd_step(const SgdParams& p, float* w, const float* g, float* velocity, size_t n);

}  // namespace detaudit::gpu
