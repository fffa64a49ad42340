// Optimisers: elementwise updates through Backend::adam_step / sgd_step, state in backend memory.
#pragma once
#include <vector>

#include "models/tensor.hpp"

namespace detaudit {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every params[i] with grads[i]; the state is allocated (zeroed) on the first call.
  virtual Status step(const std::vector<Tensor*>& params, const std::vector<Tensor*>& grads) = 0;
  virtual void set_lr(float lr) = 0;
};

// Adam, PyTorch's defaults except lr: beta1 0.9, beta2 0.999, eps 1e-8 (PyTorch's; Keras uses 1e-7).
// Bias corrections 1 - beta^t are computed here in double and passed rounded to float, so every
// backend sees the same constants (formula at AdamParams in kernels/backend.hpp).
class Adam final : public Optimizer {
 public:
  explicit Adam(Backend* b, AdamParams p = {}) : be_(b), p_(p) {}
  Status step(const std::vector<Tensor*>& params, const std::vector<Tensor*>& grads) override;
  void set_lr(float lr) override { p_.lr = lr; }
  long steps() const { return t_; }

 private:
  Backend* be_;
  AdamParams p_;
  long t_ = 0;
  double beta1_t_ = 1.0, beta2_t_ = 1.0;
  std::vector<Tensor> m_, v_;
};

// SGD with momentum (PyTorch's form: v = momentum*v + g; w -= lr*v).
class Sgd final : public Optimizer {
 public:
  explicit Sgd(Backend* b, SgdParams p = {}) : be_(b), p_(p) {}
  Status step(const std::vector<Tensor*>& params, const std::vector<Tensor*>& grads) override;
  void set_lr(float lr) override { p_.lr = lr; }

 private:
  Backend* be_;
  SgdParams p_;
  std::vector<Tensor> vel_;
};

}  // namespace detaudit
