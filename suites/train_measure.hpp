// What a training run measures besides its loss: condition (e)'s one-ULP nudge of an initial weight,
// and the gradient noise of `train --noise-scale` (contract/training_run.hpp WeightNudge, NoiseTrace).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <memory>

#include "models/autoencoder.hpp"
#include "models/prednet.hpp"
#include "contract/training_run.hpp"

namespace detaudit {

// Nudge k moves kernel weight pick(k) by one ULP (std::nextafter toward +infinity); biases, zero at init,
// are never picked. Picks are drawn from counter_bits(kInitSeedBase, kNudgeStream, draw); a weight an
// earlier nudge took is drawn past, so nudges 0, 1, ... of a design move different weights, and nudge k
// the same weight on every target and backend. *out says which and its two values.
inline constexpr uint64_t kNudgeStream = 0xE;
// Kernels are the parameters of rank > 1; name_of(i) says where parameter i is ("layer 3 (conv2d) weight").
Status nudge_weight(const std::vector<Tensor*>& params, const std::function<std::string(size_t)>& name_of, uint64_t k,
                    WeightNudge* out);
Status nudge_weight(Autoencoder& model, uint64_t k, WeightNudge* out);
// PredNet's parameters are named by their place in params() ("parameter 12").
Status nudge_weight(PredNet& model, uint64_t k, WeightNudge* out);
// Nudge k of a run of `model` (PredNet: in configuration `prednet_config` with batches of `batch_size`) from initial
// weights `seed`, as its worker makes it: made again on the reference backend, since the initial weights and the
// nudge are the same on every backend. Status::invalid for a model or configuration this version does not train.
Status expected_nudge(const std::string& model, const std::string& prednet_config, int batch_size, uint64_t seed,
                      uint64_t k, WeightNudge* out);

// The gradient noise at every `every`-th batch (0-based step % every == 0), as an after-backward callback:
//  - the squared norm of the batch's gradient (B = batch_size samples);
//  - the mean squared norm of the gradients of its microbatches (batch_size / 4 samples each where the
//    batch is a multiple of 4 of at least 8, else batch_size / 2; the first B / b of the batch's samples);
//  - at up to kNoiseHardwarePoints of those points, evenly spread (noise_hardware_point, contract/training_run.hpp),
//    |g1 - g2|^2 between the batch's gradient and
//    the same gradient computed again at the same weights on the same batch (exactly 0 on a
//    deterministic target).
// Every norm is accumulated in double. The batch's own gradient is uploaded back into grads() before
// returning, so the update, and every bit of the run, are those of an unmeasured run.
class NoiseMeter {
 public:
  // examples: the training set's size (recorded: the largest batch size there can be).
  NoiseMeter(int every, int batch_size, int batches, uint64_t examples);
  // The autoencoder: batch is its batch_size images.
  Status after_backward(int step, Autoencoder& model, const Tensor& batch);
  // PredNet: frames is its batch (nt*batch x C x H x W, step-major). Microbatch gradients come from a
  // second PredNet of the microbatch's size, given the model's weights at each point.
  Status after_backward(int step, PredNet& model, const Tensor& frames);
  const NoiseTrace& trace() const { return trace_; }

  // What a measurement needs of a model at one point, each computed at the current weights: the
  // model's gradient tensors, the batch's gradient again (into grads), and the gradient of microbatch
  // m of b samples (into the tensors it names).
  struct Probe {
    std::vector<Tensor*> grads;
    std::function<Status()> again;
    std::function<Status(int m, int b, std::vector<Tensor*>* grads)> micro;
  };
  Status measure(int step, const Probe& probe);

 private:
  NoiseTrace trace_;
  int hw_stride_ = 1;
  std::vector<std::vector<float>> saved_;
  std::vector<float> tmp_, host_;
  Tensor micro_;
  std::unique_ptr<PredNet> micro_net_;
};

}  // namespace detaudit
