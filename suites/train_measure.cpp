// Condition (e)'s nudge and the noise measurements of `train --noise-scale` (suites/train_measure.hpp).
#include "suites/train_measure.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "kernels/cpu/ref.hpp"
#include "kernels/generator.hpp"
#include "suites/train_data.hpp"
#include "suites/train_design.hpp"

namespace detaudit {

// ------------------------------------------------------------------------------------------------
// Condition (e): one weight moved by one ULP
// ------------------------------------------------------------------------------------------------

Status nudge_weight(const std::vector<Tensor*>& params, const std::function<std::string(size_t)>& name_of, uint64_t k,
                    WeightNudge* out) {
  struct Kernel {
    Tensor* t;
    size_t param, offset;  // position in params, first flat index over all parameters
  };
  std::vector<Kernel> kernels;
  size_t flat = 0, kernel_count = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i]->shape().rank > 1) {
      kernels.push_back({params[i], i, flat});
      kernel_count += params[i]->size();
    }
    flat += params[i]->size();
  }
  if (kernel_count == 0) return Status::invalid("condition e: the model has no kernel weights to nudge");
  if (k >= kernel_count) return Status::invalid(fmt::format("condition e: nudge {} of {} kernel weights", k, kernel_count));
  std::set<uint64_t> taken;
  uint64_t draw = 0, pick = 0;
  for (uint64_t n = 0; n <= k; ++n) {
    do pick = uint64_t((unsigned __int128)counter_bits(kInitSeedBase, kNudgeStream, draw++) * kernel_count >> 64);
    while (taken.count(pick));
    taken.insert(pick);
  }
  for (auto& kr : kernels) {
    if (pick >= kr.t->size()) {
      pick -= kr.t->size();
      continue;
    }
    std::vector<float> w;
    DETAUDIT_RETURN_IF_ERROR(kr.t->download(&w));
    const float from = w[pick], to = std::nextafter(from, INFINITY);
    w[pick] = to;
    DETAUDIT_RETURN_IF_ERROR(kr.t->upload(w));
    out->index = k;
    out->parameter = kr.offset + pick;
    out->tensor = fmt::format("{} [{}]", name_of(kr.param), pick);
    out->from = from;
    out->to = to;
    return Status::ok();
  }
  return Status::error("condition e: nudge index out of range");
}

Status nudge_weight(Autoencoder& model, uint64_t k, WeightNudge* out) {
  // Parameter i's layer: Sequential's layers in order, counting their parameters.
  auto name_of = [&](size_t param) {
    size_t seen = 0;
    const auto& layers = model.net().layers();
    for (size_t l = 0; l < layers.size(); ++l) {
      const size_t np = layers[l]->params().size();
      if (param < seen + np) return fmt::format("layer {} ({}) {}", l, layers[l]->name(), param == seen ? "weight" : "bias");
      seen += np;
    }
    return "parameter " + std::to_string(param);
  };
  return nudge_weight(model.params(), name_of, k, out);
}

Status nudge_weight(PredNet& model, uint64_t k, WeightNudge* out) {
  return nudge_weight(model.params(), [](size_t i) { return "parameter " + std::to_string(i); }, k, out);
}

Status expected_nudge(const std::string& model, const std::string& config, int batch_size, uint64_t seed,
                      uint64_t k, WeightNudge* out) {
  std::unique_ptr<Backend> be = make_cpu_ref();
  if (model == "autoencoder") {
    Autoencoder m(be.get());
    DETAUDIT_RETURN_IF_ERROR(m.init(seed));
    return nudge_weight(m, k, out);
  }
  PredNetConfig c;
  if (model != "prednet" || !prednet_config(config, batch_size, &c))
    return Status::invalid(fmt::format("no nudge of model '{}' ({})", model, config));
  PredNet m(be.get(), c);
  DETAUDIT_RETURN_IF_ERROR(m.init(seed));
  return nudge_weight(m, k, out);
}

// ------------------------------------------------------------------------------------------------
// Gradient noise: B_simple from microbatches, hardware noise from the same gradient twice
// ------------------------------------------------------------------------------------------------

NoiseMeter::NoiseMeter(int every, int batch_size, int batches, uint64_t examples) {
  trace_.every = every;
  trace_.examples = examples;
  trace_.b_big = batch_size;
  trace_.b_small = noise_microbatch(batch_size);
  hw_stride_ = noise_hardware_stride(batches, every);
}

Status NoiseMeter::measure(int step, const Probe& probe) {
  if (step % trace_.every) return Status::ok();
  const std::vector<Tensor*>& grads = probe.grads;
  saved_.resize(grads.size());
  NoisePoint p;
  p.step = uint64_t(step) + 1;
  for (size_t i = 0; i < grads.size(); ++i) {
    DETAUDIT_RETURN_IF_ERROR(grads[i]->download(&saved_[i]));
    for (float g : saved_[i]) p.big_sq += double(g) * double(g);
  }
  if ((step / trace_.every) % hw_stride_ == 0) {
    // The same gradient again, at the same parameters on the same batch.
    DETAUDIT_RETURN_IF_ERROR(probe.again());
    double d2 = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
      DETAUDIT_RETURN_IF_ERROR(grads[i]->download(&tmp_));
      for (size_t j = 0; j < tmp_.size(); ++j) {
        const double d = double(tmp_[j]) - double(saved_[i][j]);
        d2 += d * d;
      }
    }
    p.hw_sq = d2;
  }
  const int count = trace_.b_big / trace_.b_small;
  std::vector<Tensor*> micro_grads;
  for (int m = 0; m < count; ++m) {
    DETAUDIT_RETURN_IF_ERROR(probe.micro(m, trace_.b_small, &micro_grads));
    for (Tensor* g : micro_grads) {
      DETAUDIT_RETURN_IF_ERROR(g->download(&tmp_));
      double sq = 0;
      for (float x : tmp_) sq += double(x) * double(x);
      p.small_sq += sq;
    }
  }
  p.small_sq /= double(count);
  for (size_t i = 0; i < grads.size(); ++i) DETAUDIT_RETURN_IF_ERROR(grads[i]->upload(saved_[i]));
  trace_.points.push_back(p);
  return Status::ok();
}

Status NoiseMeter::after_backward(int step, Autoencoder& model, const Tensor& batch) {
  Probe probe;
  probe.grads = model.grads();
  float loss = 0;
  probe.again = [&] { return model.forward_backward(batch, &loss); };
  probe.micro = [&](int m, int b, std::vector<Tensor*>* grads) {
    if (m == 0) DETAUDIT_RETURN_IF_ERROR(batch.download(&host_));
    const Shape& s = batch.shape();
    const size_t per = size_t(s[1]) * s[2] * s[3];
    DETAUDIT_RETURN_IF_ERROR(ensure(batch.backend(), {b, s[1], s[2], s[3]}, &micro_));
    DETAUDIT_RETURN_IF_ERROR(micro_.upload(host_.data() + size_t(m) * b * per, size_t(b) * per));
    DETAUDIT_RETURN_IF_ERROR(model.forward_backward(micro_, &loss));
    *grads = model.grads();
    return Status::ok();
  };
  return measure(step, probe);
}

Status NoiseMeter::after_backward(int step, PredNet& model, const Tensor& frames) {
  Probe probe;
  probe.grads = model.grads();
  probe.again = [&] {
    DETAUDIT_RETURN_IF_ERROR(model.forward(frames, nullptr));
    return model.backward();
  };
  probe.micro = [&](int m, int b, std::vector<Tensor*>* grads) {
    const PredNetConfig& c = model.config();
    Backend* be = frames.backend();
    if (!micro_net_) {
      PredNetConfig mc = c;
      mc.batch = b;
      micro_net_ = std::make_unique<PredNet>(be, mc);
      DETAUDIT_RETURN_IF_ERROR(micro_net_->init(0));  // allocates; the weights are the model's, copied below
      DETAUDIT_RETURN_IF_ERROR(Tensor::create(be, {c.nt * b, c.channels(), c.height, c.width}, &micro_));
    }
    if (m == 0) {
      const std::vector<Tensor*> from = model.params(), to = micro_net_->params();
      for (size_t i = 0; i < from.size(); ++i)
        DETAUDIT_RETURN_IF_ERROR(be->copy_2d(1, from[i]->size(), from[i]->data(), from[i]->size(), to[i]->data(),
                                             to[i]->size()));
    }
    // Samples m*b .. m*b+b-1 of every step: step-major rows t*batch + n become t*b + (n - m*b).
    const size_t frame = size_t(c.channels()) * c.height * c.width;
    DETAUDIT_RETURN_IF_ERROR(be->copy_2d(size_t(c.nt), size_t(b) * frame, frames.data() + size_t(m) * b * frame,
                                         size_t(c.batch) * frame, micro_.data(), size_t(b) * frame));
    DETAUDIT_RETURN_IF_ERROR(micro_net_->forward(micro_, nullptr));
    DETAUDIT_RETURN_IF_ERROR(micro_net_->backward());
    *grads = micro_net_->grads();
    return Status::ok();
  };
  return measure(step, probe);
}

}  // namespace detaudit
