// cpu?conv=winograd: 3x3 stride-1 convolutions as Winograd F(4x4, 3x3) (Lavin & Gray 2015). Each
// 4x4 output tile comes from a 6x6 input tile; in the transformed domain the convolution is 36
// independent gemms (one per transform point xi), 4x fewer multiplies than the direct im2col gemm.
//   forward:     M_xi[K x T] = U_xi[K x C] * V_xi[C x T],  U = G g G^T, V = B^T d B, y = A^T M A
//   bwd data:    the forward convolution of dy with the flipped, K/C-transposed filter, pad 2 - pad
//   bwd filter:  dU_xi[K x C] = M_xi[K x T] * V_xi[C x T]^T with M = A dy A^T, then dw = G^T dU G
// (T: the tiles of all images.) determinism: the transforms are fixed-order float arithmetic with
// no FMA, the same bits on every ISA and thread count; the 36 gemms go through the gemm driver as one
// batch (native::gemm_batch_packed_a forward, native::gemm_batch for the filter gradient) in the
// context's ReduceOrder, each with the bits native::gemm gives it alone, so the orders keep their
// promises. The bits
// are not those of the direct path: the sums run over C (or tiles), not C*R*S, and through the
// transforms.
// Transformed filters are kept between calls (a step runs each forward and backward data once per
// time step with the same weights) and reused only when the filter is bitwise equal to the copy they
// came from, packed once as the gemms' A operand. Layouts: U[xi][C][K] (cached: U_xi^T packed),
// V[xi][C][T]; M[xi][K][T] (forward) or [xi][T][K] (filter gradient).
#pragma once
#include <memory>

#include "kernels/backend.hpp"
#include "kernels/cpu/native_gemm.hpp"

namespace detaudit::native {

// Whether the Winograd path computes this convolution: r = s = 3, stride 1, pad <= 2 (backward data
// runs the forward path with pad 2 - pad). Other shapes go to the direct code.
// Below min_channels (CpuNativeOptions::winograd_min_channels) of min(C, K) it declines too.
bool winograd_applies(const ConvShape& s, int min_channels);

// Working memory kept between calls: transformed operands, cached filters and per-thread planes.
class WinogradWork {
 public:
  WinogradWork();
  ~WinogradWork();
  WinogradWork(const WinogradWork&) = delete;
  WinogradWork& operator=(const WinogradWork&) = delete;
  struct Impl;
  std::unique_ptr<Impl> impl;
};

// y = conv(x, w) (+ bias[k], one rounded add to each finished output, as Backend::bias_add).
// The caller checked winograd_applies(s).
Status winograd_fwd(GemmContext& ctx, WinogradWork& wk, const ConvShape& s, const float* x, const float* w, float* y,
                    const float* bias = nullptr);
// dx from dy: winograd_fwd of dy with w'[c][k][r][s] = w[k][c][2-r][2-s] and pad 2 - pad.
Status winograd_bwd_data(GemmContext& ctx, WinogradWork& wk, const ConvShape& s, const float* dy, const float* w,
                         float* dx);
// dw from x and dy (overwritten); output tiles reaching past P x Q see zeros there.
Status winograd_bwd_filter(GemmContext& ctx, WinogradWork& wk, const ConvShape& s, const float* x, const float* dy,
                           float* dw);

}  // namespace detaudit::native
