// Layers with explicit forward and backward on any Backend. Each layer owns its output and input-
// gradient tensors (allocated on the first call and whenever the shape changes, then reused: no
// allocation in the steady state) and keeps a view of its input for the backward pass, so an input
// must stay unchanged between a layer's forward and backward (true for a chain of layers, each of
// which owns its output).
// Initialisation: Glorot-uniform kernels (limit sqrt(6/(fan_in + fan_out))) from the counter-based
// generator of kernels/generator.hpp, biases zero: identical initial weights on every target.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/tensor.hpp"

namespace detaudit {

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string name() const = 0;
  // *y = f(x); *y points into the layer and stays valid until the next forward.
  virtual Status forward(const Tensor& x, const Tensor** y) = 0;
  // Given dy = dL/dy for the last forward: fills grads() (overwritten, not accumulated) and sets
  // *dx = dL/dx, or nullptr when need_input_grad is off.
  virtual Status backward(const Tensor& dy, const Tensor** dx) = 0;
  virtual std::vector<Tensor*> params() { return {}; }
  virtual std::vector<Tensor*> grads() { return {}; }
  // Glorot-uniform kernels from (seed, stream + i) for the i-th parameter; biases zero.
  virtual Status init(uint64_t seed, uint64_t stream) { return Status::ok(); }
  // The first layer of a model needs no input gradient; turning it off saves a conv backward-data.
  void set_need_input_grad(bool on) { need_dx_ = on; }

 protected:
  bool need_dx_ = true;
};

// w = limit * u, u uniform in [-1, 1) on a 2^-23 grid from counter_bits(seed, stream, i), computed in
// double and rounded to float; limit = sqrt(6 / (fan_in + fan_out)).
Status glorot_uniform(const Tensor& w, int fan_in, int fan_out, uint64_t seed, uint64_t stream);

// y[N x out] = x[N x in] W^T + b; W is out x in (PyTorch layout). Any x whose size is N*in with
// N = x.shape()[0] is accepted (flattened). Reductions: over in (forward), out (dx), N (dW, db).
class Linear final : public Layer {
 public:
  Linear(Backend* b, int in, int out);
  std::string name() const override { return "linear"; }
  Status forward(const Tensor& x, const Tensor** y) override;
  Status backward(const Tensor& dy, const Tensor** dx) override;
  std::vector<Tensor*> params() override { return {&w_, &b_}; }
  std::vector<Tensor*> grads() override { return {&dw_, &db_}; }
  Status init(uint64_t seed, uint64_t stream) override;

 private:
  Backend* be_;
  int in_, out_;
  Tensor w_, b_, dw_, db_, x_, y_, dx_;
  Shape x_shape_;
};

// 2-D convolution (cross-correlation) with bias: x [N,C,H,W] -> y [N,K,P,Q], filter [K,C,R,S].
class Conv2d final : public Layer {
 public:
  Conv2d(Backend* b, int c, int k, int r = 3, int stride = 1, int pad = 1);
  std::string name() const override { return "conv2d"; }
  Status forward(const Tensor& x, const Tensor** y) override;
  Status backward(const Tensor& dy, const Tensor** dx) override;
  std::vector<Tensor*> params() override { return {&w_, &b_}; }
  std::vector<Tensor*> grads() override { return {&dw_, &db_}; }
  Status init(uint64_t seed, uint64_t stream) override;  // fan_in C*R*S, fan_out K*R*S

 private:
  Backend* be_;
  ConvShape cs_;
  Tensor w_, b_, dw_, db_, x_, y_, dx_;
};

// Elementwise activation: kRelu, kSigmoid, kTanh or kHardSigmoid (Keras: clip(0.2x + 0.5, 0, 1)).
class Activation final : public Layer {
 public:
  Activation(Backend* b, UnaryOp op);
  std::string name() const override { return to_string(op_); }
  Status forward(const Tensor& x, const Tensor** y) override;
  Status backward(const Tensor& dy, const Tensor** dx) override;

 private:
  Backend* be_;
  UnaryOp op_;
  Tensor x_, y_, dx_;
};
inline std::unique_ptr<Layer> relu(Backend* b) { return std::make_unique<Activation>(b, UnaryOp::kRelu); }
inline std::unique_ptr<Layer> sigmoid(Backend* b) { return std::make_unique<Activation>(b, UnaryOp::kSigmoid); }
inline std::unique_ptr<Layer> tanh_layer(Backend* b) { return std::make_unique<Activation>(b, UnaryOp::kTanh); }
inline std::unique_ptr<Layer> hard_sigmoid(Backend* b) {
  return std::make_unique<Activation>(b, UnaryOp::kHardSigmoid);
}

// 2x2 max pooling, stride 2: [N,C,H,W] -> [N,C,H/2,W/2]. Ties go to the first maximum.
class MaxPool2 final : public Layer {
 public:
  explicit MaxPool2(Backend* b) : be_(b) {}
  std::string name() const override { return "maxpool2"; }
  Status forward(const Tensor& x, const Tensor** y) override;
  Status backward(const Tensor& dy, const Tensor** dx) override;

 private:
  Backend* be_;
  PoolShape ps_;
  Tensor x_, y_, dx_;
};

// Nearest-neighbour upsampling by 2: [N,C,H,W] -> [N,C,2H,2W].
class Upsample2 final : public Layer {
 public:
  explicit Upsample2(Backend* b) : be_(b) {}
  std::string name() const override { return "upsample2"; }
  Status forward(const Tensor& x, const Tensor** y) override;
  Status backward(const Tensor& dy, const Tensor** dx) override;

 private:
  Backend* be_;
  Shape xs_;
  Tensor y_, dx_;
};

// A view with another per-sample shape (batch dim kept): e.g. [N,1568] -> [N,32,7,7]. No copy.
class Reshape final : public Layer {
 public:
  explicit Reshape(Shape per_sample) : per_sample_(per_sample) {}
  std::string name() const override { return "reshape"; }
  Status forward(const Tensor& x, const Tensor** y) override;
  Status backward(const Tensor& dy, const Tensor** dx) override;

 private:
  Shape per_sample_, xs_;
  Tensor y_, dx_;
};

// Concatenation of two NCHW tensors along channels, and its backward (a split).
Status concat_channels(const Tensor& a, const Tensor& b, Tensor* out);
Status concat_channels_bwd(const Tensor& dout, const Shape& a_shape, const Shape& b_shape, Tensor* da, Tensor* db);

// Mean-reduced losses against a target of the same size. forward computes the value (one float in
// backend memory, also downloaded to *value when given) and the gradient dL/dy in one op.
class Loss {
 public:
  Loss(Backend* b, LossOp op) : be_(b), op_(op) {}
  Status forward(const Tensor& y, const Tensor& target, float* value);
  const Tensor& grad() const { return dy_; }       // dL/dy of the last forward
  const Tensor& value() const { return value_; }   // the last value, in backend memory

 private:
  Backend* be_;
  LossOp op_;
  Tensor dy_, value_;
};
inline Loss mse_loss(Backend* b) { return Loss(b, LossOp::kMse); }
inline Loss l1_loss(Backend* b) { return Loss(b, LossOp::kL1); }

// Where a Sequential's observer is called from.
enum class LayerPass : uint8_t { kForward, kBackward };
const char* to_string(LayerPass p);  // "forward", "backward"

// Called by Sequential after layer `layer`'s forward with its output ("y"); before the first backward
// with the gradient arriving at the last layer ("dy", the loss gradient); after each layer's backward
// with its parameter gradients ("dw", "db": grads() in order, weight then bias) and its input gradient
// ("dx", when computed). The tensor may be changed in place before the next layer reads it (a test
// plants a change so). An error status stops the pass and is returned.
using LayerObserver =
    std::function<Status(size_t layer, const Layer& l, LayerPass pass, const char* tensor, const Tensor& t)>;

// A chain of layers.
class Sequential {
 public:
  void add(std::unique_ptr<Layer> l) { layers_.push_back(std::move(l)); }
  // Unset (the default): no call and no cost. The hook changes no numerics; only an observer that
  // writes a tensor does.
  void set_observer(LayerObserver o) { observer_ = std::move(o); }
  Status forward(const Tensor& x, const Tensor** y);
  Status backward(const Tensor& dy, const Tensor** dx);
  std::vector<Tensor*> params();
  std::vector<Tensor*> grads();
  // Layer i's parameters from streams 16*i, 16*i + 1, ...
  Status init(uint64_t seed);
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  LayerObserver observer_;
};

}  // namespace detaudit
