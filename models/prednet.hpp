// PredNet (Lotter, Kreiman, Cox 2017; coxlab prednet.py and kitti_train.py), forward and backward
// through time on any Backend.
//
// Layers l = 0..L-1 at H/2^l x W/2^l with stacks[l] channels (A, Ahat and R alike: the paper's
// R_stack_sizes = stack_sizes). States start at zero: R_l(-1) = c_l(-1) = E_l(-1) = 0. Per step t:
//   top-down, l = L-1..0:  R_l(t) = ConvLSTM_l([E_l(t-1), upsample2(R_{l+1}(t))])   (no upsample at the top)
//   bottom-up, l = 0..L-1: Ahat_l = relu(conv(R_l(t))), and at l = 0 min(Ahat_0, pixel_max): the prediction
//                          E_l = [relu(Ahat_l - A_l), relu(A_l - Ahat_l)]           (2*stacks[l] channels)
//                          A_{l+1} = maxpool2(relu(conv(E_l))),  A_0(t) = frame t
// All filters F x F, 'same' padding, biased. Loss: L = sum_t time_w(t) sum_l layer_w(l) mean(E_l(t)),
// the mean over all elements of E_l(t) (batch included); time_w = 0 at t = 0 and 1/(nt-1) after;
// layer_w = (1, 0, ..., 0) (the paper's L_0). Since E >= 0 this is Keras' MAE against zeros.
// Initialisation: Glorot-uniform kernels, biases zero; layer l's streams
// from 16*l (ConvLSTM gates 16*l .. 16*l + 3, Ahat conv 16*l + 8, A conv 16*l + 9).
//
// Every tensor of every step is kept for the backward (step-major: row t*N + n is sample n at step
// t). The weight gradients of each convolution are one conv2d_bwd_filter over all nt*N samples.
// determinism: nothing here adds a source of variation; sums over time and batch are single
// backend reductions (conv2d_bwd_filter, bias_grad, reduce), so their order is the backend's.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/convlstm.hpp"
#include "models/tensor.hpp"

namespace detaudit {

struct PredNetConfig {
  int height = 64, width = 64;  // divisible by 2^(layers - 1)
  std::vector<int> stacks = {1, 16, 32, 64};  // stacks[0]: image channels
  int nt = 10, batch = 4;
  int filter = 3;
  float pixel_max = 1.0f;
  std::vector<float> layer_weights = {1, 0, 0, 0};  // one per layer
  float lr = 1e-3f;  // Adam (models/optim.hpp); the paper drops it to 1e-4 halfway
  int channels() const { return stacks.empty() ? 0 : stacks[0]; }
  int layers() const { return int(stacks.size()); }
  std::string validate() const;  // empty when usable, else what is wrong
};

// The frame strip a PredNet run keeps (the report's picture, a PNG): its nt frames side by side with a gap of 2,
// the true ones over the predicted ones; grey, or RGB where the frames have 3 channels.
struct StripSize {
  int cols, rows, channels;
};
inline StripSize frames_strip_size(const PredNetConfig& c) {
  return {c.nt * (c.width + 2) - 2, 2 * c.height + 2, c.channels() == 3 ? 3 : 1};
}

// The paper's KITTI configuration: 3 x 128 x 160, stacks (3, 48, 96, 192), nt 10, batch 4.
PredNetConfig prednet_paper();
// A CPU default: 1 x 64 x 64, stacks (1, 16, 32, 64), nt 10, batch 4.
PredNetConfig prednet_quick();

class PredNet {
 public:
  PredNet(Backend* b, PredNetConfig cfg);
  const PredNetConfig& config() const { return cfg_; }
  // Allocates everything (the model's memory is fixed from here on) and initialises the weights.
  Status init(uint64_t seed);
  // frames: nt*batch x C x H x W, step-major (frame t of sample n at row t*batch + n), pixels in [0, 1].
  // Runs every step and keeps what the backward needs; *loss (may be null) gets L, summed on the host
  // in double from the per-step means. frames must stay unchanged until backward().
  Status forward(const Tensor& frames, double* loss);
  // After forward: grads() = dL/dtheta (overwritten).
  Status backward();
  // Ahat_0 of every step (nt*batch x C x H x W, step-major): row t*batch + n predicts frame t of
  // sample n from its frames before t.
  const Tensor& predictions() const { return pred_; }
  // Per layer: ConvLSTM weight, bias; Ahat conv weight, bias; A conv weight, bias (not on the top layer).
  std::vector<Tensor*> params();
  std::vector<Tensor*> grads();

 private:
  struct Conv {  // a biased 'same' convolution of one step (cs.n = batch)
    ConvShape cs;
    Tensor w, b, dw, db;
  };
  struct Level {
    int s = 0, h = 0, w = 0;
    std::unique_ptr<ConvLstm> cell;
    Conv ahat, a;  // a: to layer l+1 (unused on the top layer)
    // forward, all steps: Ahat before ReLU, after ReLU, (layer 0) pixel_max - Ahat, Ahat - A, E,
    // and for l >= 1: A before ReLU, after ReLU (before the pool), A
    Tensor ahat_pre, ahat_relu, clamp_gap, d, e, a_pre, a_relu, a_out;
    // backward, all steps: gradients at the Ahat conv's and (l >= 1) the incoming A conv's outputs
    Tensor dahat_pre, da_pre;
    // one step: forward scratch; dE (accumulated), dE into step t-1 (from the cell), dE from A_{l+1};
    // the chain down to dR; the pool's and the upsample's gradients
    Tensor up, p, q, negd;
    Tensor de, de_next, dtmp_e, dp, dq, dd, dq2, dahat, dahat2, da1, dr, dup, dpool, dupr;
  };
  Status allocate();
  Status forward_step(int t);
  Status backward_step(int t);
  Status conv_fwd(Conv& c, const float* x, float* y);
  const float* a_of(int l, int t) const;  // A_l(t)
  PoolShape pool_shape(int l) const;      // the pool producing A_l, l >= 1
  size_t slot(int l) const { return size_t(cfg_.batch) * lv_[l].s * lv_[l].h * lv_[l].w; }  // one step of A_l

  Backend* be_;
  PredNetConfig cfg_;
  std::vector<Level> lv_;
  Tensor pred_, pmax_, zeros_, sums_;  // pmax_: pixel_max, one step of A_0
  const Tensor* frames_ = nullptr;
  bool ready_ = false, forwarded_ = false;
};

}  // namespace detaudit
