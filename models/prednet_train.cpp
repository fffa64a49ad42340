#include "models/prednet_train.hpp"

#include <chrono>
#include <memory>

#include <fmt/format.h>

#include "models/autoencoder.hpp"
#include "models/optim.hpp"

namespace detaudit {

namespace {

Status check_set(const VideoSet& v, const PredNetConfig& c, const char* what) {
  if (v.frames < c.nt || v.rows != c.height || v.cols != c.width || v.channels != c.channels())
    return Status::invalid(fmt::format("{} sequences are {} frames of {}x{}x{}; the PredNet configuration needs at least "
                                       "{} frames of {}x{}x{}",
                                       what, v.frames, v.channels, v.rows, v.cols, c.nt, c.channels(), c.height, c.width));
  if (v.count < c.batch)
    return Status::invalid(fmt::format("{} set holds {} sequences, fewer than one batch of {}", what, v.count, c.batch));
  return Status::ok();
}

// Sequences idx of v, their first nt frames, pixels / 255, step-major into host (nt*batch x C x H x W).
// VideoSet pixels are N x T x H x W x C (C last, as in an .npy video); the tensor is channel-major.
void gather(const VideoSet& v, const PredNetConfig& c, const std::vector<uint32_t>& idx, std::vector<float>* host) {
  const size_t hw = size_t(c.height) * c.width, ch = size_t(c.channels()), frame = hw * ch;
  host->resize(size_t(c.nt) * idx.size() * frame);
  for (int t = 0; t < c.nt; ++t)
    for (size_t n = 0; n < idx.size(); ++n) {
      const uint8_t* src = v.pixels.data() + size_t(idx[n]) * v.pixels_per_sequence() + size_t(t) * v.pixels_per_frame();
      float* dst = host->data() + (size_t(t) * idx.size() + n) * frame;
      for (size_t p = 0; p < hw; ++p)
        for (size_t k = 0; k < ch; ++k) dst[k * hw + p] = float(src[p * ch + k]) / 255.0f;
    }
}

Status fingerprint_params(PredNet& m, Fingerprint* out) {
  std::vector<float> all, part;
  for (Tensor* t : m.params()) {
    DETAUDIT_RETURN_IF_ERROR(t->download(&part));
    all.insert(all.end(), part.begin(), part.end());
  }
  *out = fingerprint_bytes(all.data(), all.size() * sizeof(float));
  return Status::ok();
}

}  // namespace

Status check_predictions(PredNet& model, const VideoSet& held_out, PredictionCheck* out, std::vector<float>* example_truth,
                         std::vector<float>* example_prediction, const std::function<void(int done, int of)>& on_batch) {
  const PredNetConfig& c = model.config();
  DETAUDIT_RETURN_IF_ERROR(check_set(held_out, c, "held-out"));
  Backend* be = nullptr;
  for (Tensor* t : model.params()) be = t->backend();
  if (!be) return Status::invalid("PredNet: no parameters");
  Tensor frames;
  DETAUDIT_RETURN_IF_ERROR(Tensor::create(be, {c.nt * c.batch, c.channels(), c.height, c.width}, &frames));
  const size_t frame = size_t(c.channels()) * c.height * c.width;
  double se = 0, se_copy = 0;
  uint64_t n_px = 0;
  std::vector<uint32_t> idx;
  std::vector<float> host, pred;
  PredictionCheck r;
  for (int first = 0; first + c.batch <= held_out.count; first += c.batch) {
    idx.clear();
    for (int n = 0; n < c.batch; ++n) idx.push_back(uint32_t(first + n));
    gather(held_out, c, idx, &host);
    DETAUDIT_RETURN_IF_ERROR(frames.upload(host));
    DETAUDIT_RETURN_IF_ERROR(model.forward(frames, nullptr));
    DETAUDIT_RETURN_IF_ERROR(model.predictions().download(&pred));
    for (int t = 1; t < c.nt; ++t)
      for (int n = 0; n < c.batch; ++n) {
        const float* truth = host.data() + (size_t(t) * c.batch + n) * frame;
        const float* last = host.data() + (size_t(t - 1) * c.batch + n) * frame;
        const float* p = pred.data() + (size_t(t) * c.batch + n) * frame;
        for (size_t k = 0; k < frame; ++k) {
          const double d = double(p[k]) - double(truth[k]), dc = double(last[k]) - double(truth[k]);
          se += d * d;
          se_copy += dc * dc;
        }
        n_px += frame;
      }
    if (first == 0 && example_truth && example_prediction) {
      example_truth->clear();
      example_prediction->clear();
      for (int t = 0; t < c.nt; ++t) {
        const size_t at = size_t(t) * c.batch * frame;  // sample 0 of step t
        example_truth->insert(example_truth->end(), host.begin() + at, host.begin() + at + frame);
        example_prediction->insert(example_prediction->end(), pred.begin() + at, pred.begin() + at + frame);
      }
    }
    r.sequences += c.batch;
    if (on_batch) on_batch(r.sequences, held_out.count - held_out.count % c.batch);
  }
  r.mse = n_px ? se / double(n_px) : 0;
  r.copy_last_mse = n_px ? se_copy / double(n_px) : 0;
  *out = r;
  return Status::ok();
}

Status train_prednet(Backend& backend, const VideoSet& train, const VideoSet& held_out, const PredNetTrainConfig& cfg,
                     const PredNetCallbacks& cb, PredNetTrainResult* out) {
  const PredNetConfig& c = cfg.net;
  if (std::string e = c.validate(); !e.empty()) return Status::invalid("PredNet: " + e);
  if (cfg.batches < 0) return Status::invalid("PredNet: a negative number of batches");
  DETAUDIT_RETURN_IF_ERROR(check_set(train, c, "training"));
  DETAUDIT_RETURN_IF_ERROR(check_set(held_out, c, "held-out"));
  PredNet model(&backend, c);
  DETAUDIT_RETURN_IF_ERROR(model.init(cfg.init_seed));
  if (cb.after_init) DETAUDIT_RETURN_IF_ERROR(cb.after_init(model));
  PredNetTrainResult r;
  for (Tensor* t : model.params()) r.parameters += t->size();
  DETAUDIT_RETURN_IF_ERROR(fingerprint_params(model, &r.initial_weights));
  AdamParams ap;
  ap.lr = c.lr;
  Adam adam(&backend, ap);
  const int drop_at = cfg.lr_drop_at >= 0 ? cfg.lr_drop_at : cfg.batches / 2;
  const std::vector<Tensor*> params = model.params(), grads = model.grads();
  BatchOrder order(size_t(train.count), c.batch, cfg.data_seed);
  std::vector<uint32_t> idx;
  std::vector<float> host;
  Tensor frames;
  DETAUDIT_RETURN_IF_ERROR(Tensor::create(&backend, {c.nt * c.batch, c.channels(), c.height, c.width}, &frames));
  r.curve.reserve(size_t(cfg.batches));
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < cfg.batches; ++step) {
    if (step == drop_at) adam.set_lr(cfg.lr_late);
    order.batch(uint64_t(step), &idx);
    gather(train, c, idx, &host);
    DETAUDIT_RETURN_IF_ERROR(frames.upload(host));
    double loss = 0;
    DETAUDIT_RETURN_IF_ERROR(model.forward(frames, &loss));
    DETAUDIT_RETURN_IF_ERROR(model.backward());
    if (cb.after_backward) DETAUDIT_RETURN_IF_ERROR(cb.after_backward(step, model, frames));
    DETAUDIT_RETURN_IF_ERROR(adam.step(params, grads));
    r.curve.push_back(float(loss));
    if (cb.on_step && !cb.on_step(step, float(loss))) break;
  }
  DETAUDIT_RETURN_IF_ERROR(backend.synchronize());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DETAUDIT_RETURN_IF_ERROR(fingerprint_params(model, &r.final_weights));
  DETAUDIT_RETURN_IF_ERROR(check_predictions(model, held_out, &r.held_out, &r.example_truth, &r.example_prediction, cb.on_check));
  *out = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
