#include "models/autoencoder.hpp"

#include <chrono>

#include "kernels/generator.hpp"

namespace detaudit {

Autoencoder::Autoencoder(Backend* b, int rows, int cols) : be_(b), rows_(rows), cols_(cols), loss_(b, LossOp::kMse) {
  const int h4 = rows / 4, w4 = cols / 4, flat = 32 * h4 * w4;
  auto conv1 = std::make_unique<Conv2d>(b, 1, 16);
  conv1->set_need_input_grad(false);  // the input needs no gradient
  net_.add(std::move(conv1));
  net_.add(relu(b));
  net_.add(std::make_unique<MaxPool2>(b));
  net_.add(std::make_unique<Conv2d>(b, 16, 32));
  net_.add(relu(b));
  net_.add(std::make_unique<MaxPool2>(b));
  net_.add(std::make_unique<Linear>(b, flat, kAutoencoderCode));
  net_.add(std::make_unique<Linear>(b, kAutoencoderCode, flat));
  net_.add(relu(b));
  net_.add(std::make_unique<Reshape>(Shape{32, h4, w4}));
  net_.add(std::make_unique<Upsample2>(b));
  net_.add(std::make_unique<Conv2d>(b, 32, 16));
  net_.add(relu(b));
  net_.add(std::make_unique<Upsample2>(b));
  net_.add(std::make_unique<Conv2d>(b, 16, 1));
  net_.add(sigmoid(b));
}

Status Autoencoder::forward_backward(const Tensor& x, float* loss) {
  const Shape& s = x.shape();
  if (s.rank != 4 || s[1] != 1 || s[2] != rows_ || s[3] != cols_ || rows_ % 4 || cols_ % 4)
    return Status::invalid("autoencoder: input " + s.str() + " is not N x 1 x " + std::to_string(rows_) + " x " +
                           std::to_string(cols_) + " (rows and cols divisible by 4)");
  const Tensor* y = nullptr;
  DETAUDIT_RETURN_IF_ERROR(net_.forward(x, &y));
  DETAUDIT_RETURN_IF_ERROR(loss_.forward(*y, x, loss));
  const Tensor* dx = nullptr;
  return net_.backward(loss_.grad(), &dx);
}

size_t Autoencoder::parameter_count() {
  size_t n = 0;
  for (Tensor* t : params()) n += t->size();
  return n;
}

Status Autoencoder::weights_fingerprint(Fingerprint* out) {
  std::vector<float> all, part;
  for (Tensor* t : params()) {
    DETAUDIT_RETURN_IF_ERROR(t->download(&part));
    all.insert(all.end(), part.begin(), part.end());
  }
  *out = fingerprint_bytes(all.data(), all.size() * sizeof(float));
  return Status::ok();
}

BatchOrder::BatchOrder(size_t count, int batch_size, uint64_t data_seed)
    : count_(count), per_epoch_(batch_size > 0 ? count / size_t(batch_size) : 0), batch_size_(batch_size), seed_(data_seed) {}

void BatchOrder::batch(uint64_t b, std::vector<uint32_t>* idx) {
  idx->clear();
  if (per_epoch_ == 0) return;
  const uint64_t epoch = b / per_epoch_;
  if (epoch != epoch_) {
    // Fisher-Yates; j uniform in [0, i] by multiply-high of 64 counter bits (no modulo bias to speak of).
    perm_.resize(count_);
    for (size_t i = 0; i < count_; ++i) perm_[i] = uint32_t(i);
    for (size_t i = count_; i-- > 1;) {
      const uint64_t r = counter_bits(seed_, epoch, i);
      const size_t j = size_t((unsigned __int128)r * (i + 1) >> 64);
      std::swap(perm_[i], perm_[j]);
    }
    epoch_ = epoch;
  }
  const size_t at = size_t(b % per_epoch_) * batch_size_;
  idx->assign(perm_.begin() + at, perm_.begin() + at + batch_size_);
}

Status BatchFeed::init(Backend* b) {
  host_.resize(size_t(batch_size_) * data_.pixels_per_image());
  return Tensor::create(b, {batch_size_, 1, data_.rows, data_.cols}, &batch_);
}

Status BatchFeed::load(uint64_t b, const Tensor** out) {
  order_.batch(b, &idx_);
  const size_t per_image = data_.pixels_per_image();
  for (size_t i = 0; i < idx_.size(); ++i) data_.image(idx_[i], host_.data() + i * per_image);
  DETAUDIT_RETURN_IF_ERROR(batch_.upload(host_));
  *out = &batch_;
  return Status::ok();
}

double TrainResult::final_loss() const {
  if (curve.empty()) return 0.0;
  const size_t k = std::min<size_t>(50, curve.size());
  double s = 0.0;
  for (size_t i = curve.size() - k; i < curve.size(); ++i) s += curve[i];
  return s / double(k);
}

std::unique_ptr<Optimizer> make_optimizer(Backend* b, const TrainConfig& cfg) {
  if (cfg.optimizer == TrainConfig::Optim::kAdam) {
    AdamParams p;
    p.lr = cfg.lr;
    return std::make_unique<Adam>(b, p);
  }
  return std::make_unique<Sgd>(b, SgdParams{cfg.lr, cfg.momentum});
}

Status train_autoencoder(Backend& backend, const Dataset& data, const TrainConfig& cfg, const TrainCallbacks& cb,
                         TrainResult* out) {
  if (cfg.batch_size < 1 || cfg.batches < 0) return Status::invalid("train: batch size must be positive");
  if (data.count < cfg.batch_size)
    return Status::invalid("train: " + std::to_string(data.count) + " images, fewer than one batch of " +
                           std::to_string(cfg.batch_size));
  if (data.rows % 4 || data.cols % 4)
    return Status::invalid("train: images of " + std::to_string(data.rows) + " x " + std::to_string(data.cols) +
                           " (the autoencoder needs sides divisible by 4)");
  Backend* be = &backend;
  Autoencoder model(be, data.rows, data.cols);
  DETAUDIT_RETURN_IF_ERROR(model.init(cfg.init_seed));
  if (cb.after_init) DETAUDIT_RETURN_IF_ERROR(cb.after_init(model));
  TrainResult r;
  r.parameters = model.parameter_count();
  DETAUDIT_RETURN_IF_ERROR(model.weights_fingerprint(&r.initial_weights));

  std::unique_ptr<Optimizer> opt = make_optimizer(be, cfg);
  const std::vector<Tensor*> params = model.params(), grads = model.grads();

  BatchFeed feed(data, cfg.batch_size, cfg.data_seed);
  DETAUDIT_RETURN_IF_ERROR(feed.init(be));
  r.curve.reserve(size_t(cfg.batches));

  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < cfg.batches; ++step) {
    const Tensor* batch = nullptr;
    DETAUDIT_RETURN_IF_ERROR(feed.load(uint64_t(step), &batch));
    float loss = 0.0f;
    DETAUDIT_RETURN_IF_ERROR(model.forward_backward(*batch, &loss));
    if (cb.after_backward) DETAUDIT_RETURN_IF_ERROR(cb.after_backward(step, model, *batch));
    DETAUDIT_RETURN_IF_ERROR(opt->step(params, grads));
    r.curve.push_back(loss);
    if (cb.on_step && !cb.on_step(step, loss)) break;
  }
  DETAUDIT_RETURN_IF_ERROR(backend.synchronize());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DETAUDIT_RETURN_IF_ERROR(model.weights_fingerprint(&r.final_weights));
  *out = std::move(r);
  return Status::ok();
}

}  // namespace detaudit
