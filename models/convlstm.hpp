// A convolutional LSTM cell (Shi et al. 2015 without peepholes; PredNet's form, coxlab prednet.py),
// forward and backward through time on any Backend.
//
// Per step t, with x_t the concatenation of the inputs given to forward_step and h(-1) = c(-1) = 0:
//   z_t = conv([x_t, h_{t-1}]) + b           one 'same' convolution with 4K output channels
//   i, f, o = hard_sigmoid(z_i, z_f, z_o)     Keras: clip(0.2z + 0.5, 0, 1)
//   g = tanh(z_g)
//   c_t = f*c_{t-1} + i*g,  h_t = o*tanh(c_t)
// The four biased convolutions of the paper are one convolution whose output channels are the gates
// in the order i, f, o, g (K each): one cuDNN/GEMM call instead of four, the same function. The gate
// blocks are then copied into gate-major buffers ([4][N*K*H*W]) so every elementwise op runs on one
// contiguous range. Weight [4K, C + K, F, F] (input channels: the inputs in order, then h), bias [4K].
// Initialisation: each gate's K x (C + K) x F x F block Glorot-uniform as its own convolution (fan_in
// (C + K)*F*F, fan_out K*F*F, as Keras' four Conv2D layers) from stream + gate; biases zero.
//
// Every state of every step is kept for the backward. The weight gradient is one conv2d_bwd_filter
// over all steps at once (batch steps*N) and the bias gradient one bias_grad.
// determinism: the sum over time and batch of the weight and bias gradients is one backend reduction,
// so its order is the backend's; nothing here adds atomics or depends on the thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "models/tensor.hpp"

namespace detaudit {

class ConvLstm {
 public:
  // in_channels: the total channels of the inputs given to forward_step; hidden: K.
  ConvLstm(Backend* b, int in_channels, int hidden, int filter = 3);

  Status init(uint64_t seed, uint64_t stream);
  // Prepares `steps` steps of N x H x W (storage kept while the shape stays the same).
  Status begin(int n, int h, int w, int steps);

  // One input of a step: `channels` channels of an N x channels x H x W tensor (backend memory).
  struct Part {
    const float* data = nullptr;
    int channels = 0;
  };
  // Step t (0, 1, ... in order): h_t from the inputs (channels summing to in_channels) and h_{t-1}.
  Status forward_step(int t, const std::vector<Part>& inputs);
  const float* h(int t) const { return h_.data() + size_t(t) * m_; }
  // h of every step, steps*N x K x H x W, step-major.
  const Tensor& h_all() const { return h_; }

  // Where the input gradient of a step goes: one per input of forward_step (data null: not wanted).
  struct GradPart {
    float* data = nullptr;
    int channels = 0;
  };
  // Steps t = steps-1, ..., 0 in order. dh: dL/dh_t from outside the cell (null: none); the gradient
  // through h_t and c_t into step t+1 is added here. Fills dx for this step's inputs; at t = 0 also
  // grads() (overwritten).
  Status backward_step(int t, const float* dh, const std::vector<GradPart>& dx);

  std::vector<Tensor*> params() { return {&w_, &b_}; }
  std::vector<Tensor*> grads() { return {&dw_, &db_}; }
  int in_channels() const { return cin_; }
  int hidden() const { return k_; }

 private:
  Status tanh_fwd(const float* x, float* y, size_t n);
  Status gates_backward(int t, const float* dh_ext);
  Status conv_backward(int t, const std::vector<GradPart>& dx);
  const float* c_prev(int t) const { return t == 0 ? zero_.data() : c_.data() + size_t(t - 1) * m_; }

  Backend* be_;
  int cin_, k_, filter_;
  ConvShape cs_;  // one step: n = N
  int steps_ = 0;
  size_t hw_ = 0, m_ = 0;  // m_ = N*K*H*W, one gate of one step
  bool tanh_composite_ = false;
  bool unfused_ = false;  // the backend has no lstm_cell_fwd/bwd: the separate ops
  Tensor w_, b_, dw_, db_;
  // Forward, per step (step-major): conv input [x, h_prev], gate pre-activations and activations
  // (gate-major), c, tanh(c), h.
  Tensor xh_, zg_, a_, c_, tc_, h_;
  Tensor zs_, zero_, ones_, tmp_;  // one step: conv output (sample-major), zeros, ones, scratch
  // Backward: running dh and dc into the previous step, scratch, all steps' conv output gradient
  // (sample-major, the bwd_filter input).
  Tensor dh_rec_, dc_rec_, dh_, dc_, da_, dzg_, dxh_, dz_;
};

}  // namespace detaudit
