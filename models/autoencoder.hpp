// The convolutional autoencoder of detaudit's training regression (the Sony CSL 2021 protocol: MNIST-
// style images, MSE reconstruction, Adam; "final loss" = mean of the last 50 batches).
//
// Architecture (input 1 x H x W, H and W divisible by 4; Fashion-MNIST: 28 x 28, 64 images a batch):
//   encoder  conv3x3(1 -> 16, pad 1) + bias, ReLU            16 x 28 x 28
//            maxpool 2x2                                      16 x 14 x 14
//            conv3x3(16 -> 32, pad 1) + bias, ReLU            32 x 14 x 14
//            maxpool 2x2                                      32 x  7 x  7
//            flatten, linear(1568 -> 32) + bias               32            (bottleneck, no activation)
//   decoder  linear(32 -> 1568) + bias, ReLU                  1568
//            reshape                                          32 x  7 x  7
//            upsample 2x (nearest)                            32 x 14 x 14
//            conv3x3(32 -> 16, pad 1) + bias, ReLU            16 x 14 x 14
//            upsample 2x (nearest)                            16 x 28 x 28
//            conv3x3(16 -> 1, pad 1) + bias, sigmoid           1 x 28 x 28
//   loss     MSE against the input (mean over all pixels of the batch)
//   training Adam (beta1 0.9, beta2 0.999, eps 1e-8), lr 1e-3, batch 64.
// Weights: Glorot-uniform from init_seed (layer i's kernel from stream 16*i), biases zero.
// Data: pixels / 255; batch b takes positions [b*B, (b+1)*B) of epoch b / (count / B)'s permutation
// (Fisher-Yates driven by counter_bits(data_seed, epoch, i)); the last partial batch of an epoch is
// dropped. Everything is a function of the seeds only, so every target sees the same data order.
// 111,521 parameters; about 136 M multiply-adds per batch of 64 forward, twice that backward.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/fingerprint.hpp"
#include "models/idx.hpp"
#include "models/layers.hpp"
#include "models/optim.hpp"

namespace detaudit {

// The autoencoder's code: its first linear layer maps each example to this many values, whatever the image size.
inline constexpr int kAutoencoderCode = 32;

class Autoencoder {
 public:
  Autoencoder(Backend* b, int rows = 28, int cols = 28);
  Backend* backend() const { return be_; }
  Status init(uint64_t seed) { return net_.init(seed); }
  // Forward, MSE loss against x itself, backward: afterwards grads() hold dL/dtheta for this batch.
  // x is N x 1 x rows x cols. *loss gets the batch loss (downloaded).
  Status forward_backward(const Tensor& x, float* loss);
  // Reconstruction only.
  Status forward(const Tensor& x, const Tensor** y) { return net_.forward(x, y); }
  std::vector<Tensor*> params() { return net_.params(); }
  std::vector<Tensor*> grads() { return net_.grads(); }
  size_t parameter_count();
  // Every parameter downloaded in params() order, as one byte string, hashed.
  Status weights_fingerprint(Fingerprint* out);
  Sequential& net() { return net_; }

 private:
  Backend* be_;
  int rows_, cols_;
  Sequential net_;
  Loss loss_;
};

// The batch order: a function of (data_seed, count, batch_size) only.
class BatchOrder {
 public:
  BatchOrder(size_t count, int batch_size, uint64_t data_seed);
  size_t batches_per_epoch() const { return per_epoch_; }
  // Dataset indices of batch b (b = 0, 1, ... across epochs).
  void batch(uint64_t b, std::vector<uint32_t>* idx);

 private:
  size_t count_, per_epoch_;
  int batch_size_;
  uint64_t seed_;
  uint64_t epoch_ = UINT64_MAX;
  std::vector<uint32_t> perm_;
};

// The batches of a training run on a backend: batch b takes BatchOrder(data.count, batch_size,
// data_seed)'s indices, pixels / 255, uploaded into one batch_size x 1 x rows x cols tensor allocated once.
// train_autoencoder and diverge's lockstep runs both feed from it, so they see the same batches.
class BatchFeed {
 public:
  BatchFeed(const Dataset& data, int batch_size, uint64_t data_seed)
      : data_(data), order_(size_t(data.count), batch_size, data_seed), batch_size_(batch_size) {}
  Status init(Backend* b);
  // Uploads batch b into tensor() and returns it.
  Status load(uint64_t b, const Tensor** out);
  const Tensor& tensor() const { return batch_; }

 private:
  const Dataset& data_;
  BatchOrder order_;
  int batch_size_;
  std::vector<uint32_t> idx_;
  std::vector<float> host_;
  Tensor batch_;
};

struct TrainConfig {
  uint64_t init_seed = 1;  // "fixed initial weights": the same init_seed in every run
  uint64_t data_seed = 1;  // batch order
  int batches = 5000;
  int batch_size = 64;
  enum class Optim { kAdam, kSgd } optimizer = Optim::kAdam;
  float lr = 1e-3f;
  float momentum = 0.9f;  // kSgd only
};

struct TrainCallbacks {
  // After the initial weights are set, before they are fingerprinted: condition (e)'s one-ULP nudge.
  std::function<Status(Autoencoder& model)> after_init;
  // After each step's update: step index and that batch's loss. Return false to stop early.
  std::function<bool(int step, float loss)> on_step;
  // After each step's backward, before the update (grads() hold this batch's gradient): for the
  // gradient noise scale. The batch tensor is N x 1 x rows x cols on the backend. Whatever it computes,
  // grads() must hold this batch's gradient again when it returns (the update uses them).
  std::function<Status(int step, Autoencoder& model, const Tensor& batch)> after_backward;
};

struct TrainResult {
  std::vector<float> curve;  // loss of every batch, in order
  Fingerprint initial_weights, final_weights;
  double seconds = 0.0;      // wall time of the training loop (no data loading, no init)
  size_t parameters = 0;
  // Mean of the last min(50, steps) losses (the paper's "final loss"), accumulated in double.
  double final_loss() const;
};

// The optimizer cfg asks for (Adam with cfg.lr, or SGD with momentum), on backend b.
std::unique_ptr<Optimizer> make_optimizer(Backend* b, const TrainConfig& cfg);

Status train_autoencoder(Backend& backend, const Dataset& data, const TrainConfig& cfg, const TrainCallbacks& cb,
                         TrainResult* out);

}  // namespace detaudit
