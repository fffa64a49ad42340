#include "models/layers.hpp"

#include <cmath>

#include "kernels/generator.hpp"

namespace detaudit {

namespace {
Status need(bool ok, const std::string& what) { return ok ? Status::ok() : Status::invalid(what); }
}  // namespace

Status glorot_uniform(const Tensor& w, int fan_in, int fan_out, uint64_t seed, uint64_t stream) {
  const double limit = std::sqrt(6.0 / double(fan_in + fan_out));
  std::vector<float> host(w.size());
  for (size_t i = 0; i < host.size(); ++i) host[i] = float(limit * counter_value(seed, stream, i, Dist::kUniform));
  return w.upload(host);
}

// ---- Linear -----------------------------------------------------------------------------------------

Linear::Linear(Backend* b, int in, int out) : be_(b), in_(in), out_(out) {
  Status st = Tensor::create(b, {out, in}, &w_);
  if (st) st = Tensor::create(b, {out}, &b_);
  if (st) st = Tensor::create(b, {out, in}, &dw_);
  if (st) st = Tensor::create(b, {out}, &db_);
  if (st) st = w_.zero();
  if (st) st = b_.zero();
}

Status Linear::init(uint64_t seed, uint64_t stream) {
  DETAUDIT_RETURN_IF_ERROR(need(!w_.empty() && !db_.empty(), "linear: parameters not allocated"));
  DETAUDIT_RETURN_IF_ERROR(glorot_uniform(w_, in_, out_, seed, stream));
  return b_.zero();
}

Status Linear::forward(const Tensor& x, const Tensor** y) {
  DETAUDIT_RETURN_IF_ERROR(need(!w_.empty(), "linear: parameters not allocated"));
  const int n = x.shape()[0];
  DETAUDIT_RETURN_IF_ERROR(need(x.size() == size_t(n) * in_, "linear: input " + x.shape().str() +
                                                                  " is not N x " + std::to_string(in_)));
  x_shape_ = x.shape();
  DETAUDIT_RETURN_IF_ERROR(x.reshape({n, in_}, &x_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {n, out_}, &y_));
  DETAUDIT_RETURN_IF_ERROR(
      be_->gemm(Trans::kN, Trans::kT, n, out_, in_, 1.0f, x_.data(), in_, w_.data(), in_, 0.0f, y_.data(), out_));
  DETAUDIT_RETURN_IF_ERROR(be_->bias_add(y_.data(), b_.data(), size_t(n), size_t(out_), 1));
  *y = &y_;
  return Status::ok();
}

Status Linear::backward(const Tensor& dy, const Tensor** dx) {
  const int n = x_.shape()[0];
  DETAUDIT_RETURN_IF_ERROR(need(dy.size() == size_t(n) * out_, "linear: gradient " + dy.shape().str() +
                                                                   " does not match the output"));
  // dW[out x in] = dy^T x (reduction over N), db = column sums of dy (over N).
  DETAUDIT_RETURN_IF_ERROR(
      be_->gemm(Trans::kT, Trans::kN, out_, in_, n, 1.0f, dy.data(), out_, x_.data(), in_, 0.0f, dw_.data(), in_));
  DETAUDIT_RETURN_IF_ERROR(be_->bias_grad(dy.data(), db_.data(), size_t(n), size_t(out_), 1));
  *dx = nullptr;
  if (!need_dx_) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, x_shape_, &dx_));
  // dx[N x in] = dy W (reduction over out).
  DETAUDIT_RETURN_IF_ERROR(
      be_->gemm(Trans::kN, Trans::kN, n, in_, out_, 1.0f, dy.data(), out_, w_.data(), in_, 0.0f, dx_.data(), in_));
  *dx = &dx_;
  return Status::ok();
}

// ---- Conv2d -----------------------------------------------------------------------------------------

Conv2d::Conv2d(Backend* b, int c, int k, int r, int stride, int pad) : be_(b) {
  cs_.c = c, cs_.k = k, cs_.r = r, cs_.s = r, cs_.stride = stride, cs_.pad = pad;
  Status st = Tensor::create(b, {k, c, r, r}, &w_);
  if (st) st = Tensor::create(b, {k}, &b_);
  if (st) st = Tensor::create(b, {k, c, r, r}, &dw_);
  if (st) st = Tensor::create(b, {k}, &db_);
  if (st) st = w_.zero();
  if (st) st = b_.zero();
}

Status Conv2d::init(uint64_t seed, uint64_t stream) {
  DETAUDIT_RETURN_IF_ERROR(need(!w_.empty() && !db_.empty(), "conv2d: parameters not allocated"));
  const int rs = cs_.r * cs_.s;
  DETAUDIT_RETURN_IF_ERROR(glorot_uniform(w_, cs_.c * rs, cs_.k * rs, seed, stream));
  return b_.zero();
}

Status Conv2d::forward(const Tensor& x, const Tensor** y) {
  DETAUDIT_RETURN_IF_ERROR(need(!w_.empty(), "conv2d: parameters not allocated"));
  const Shape& s = x.shape();
  DETAUDIT_RETURN_IF_ERROR(need(s.rank == 4 && s[1] == cs_.c, "conv2d: input " + s.str() + " is not N x " +
                                                                   std::to_string(cs_.c) + " x H x W"));
  cs_.n = s[0], cs_.h = s[2], cs_.w = s[3];
  x_ = x;
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {cs_.n, cs_.k, cs_.p(), cs_.q()}, &y_));
  DETAUDIT_RETURN_IF_ERROR(be_->conv2d_fwd_bias(cs_, x.data(), w_.data(), b_.data(), y_.data()));
  *y = &y_;
  return Status::ok();
}

Status Conv2d::backward(const Tensor& dy, const Tensor** dx) {
  DETAUDIT_RETURN_IF_ERROR(need(dy.size() == cs_.y_size(), "conv2d: gradient " + dy.shape().str() +
                                                               " does not match the output"));
  DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_filter(cs_, x_.data(), dy.data(), dw_.data()));
  DETAUDIT_RETURN_IF_ERROR(
      be_->bias_grad(dy.data(), db_.data(), size_t(cs_.n), size_t(cs_.k), size_t(cs_.p()) * cs_.q()));
  *dx = nullptr;
  if (!need_dx_) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, x_.shape(), &dx_));
  DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_data(cs_, dy.data(), w_.data(), dx_.data()));
  *dx = &dx_;
  return Status::ok();
}

// ---- Activation -------------------------------------------------------------------------------------

Activation::Activation(Backend* b, UnaryOp op) : be_(b), op_(op) {}

Status Activation::forward(const Tensor& x, const Tensor** y) {
  x_ = x;
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, x.shape(), &y_));
  DETAUDIT_RETURN_IF_ERROR(be_->unary(op_, x.data(), y_.data(), x.size()));
  *y = &y_;
  return Status::ok();
}

Status Activation::backward(const Tensor& dy, const Tensor** dx) {
  DETAUDIT_RETURN_IF_ERROR(need(dy.size() == x_.size(), std::string(name()) + ": gradient size mismatch"));
  *dx = nullptr;
  if (!need_dx_) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, x_.shape(), &dx_));
  DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(op_, x_.data(), y_.data(), dy.data(), dx_.data(), x_.size()));
  *dx = &dx_;
  return Status::ok();
}

// ---- MaxPool2 ---------------------------------------------------------------------------------------

Status MaxPool2::forward(const Tensor& x, const Tensor** y) {
  const Shape& s = x.shape();
  DETAUDIT_RETURN_IF_ERROR(need(s.rank == 4 && s[2] >= 2 && s[3] >= 2, "maxpool2: input " + s.str() +
                                                                           " is not N x C x H x W with H, W >= 2"));
  ps_.n = s[0], ps_.c = s[1], ps_.h = s[2], ps_.w = s[3], ps_.window = 2, ps_.stride = 2;
  x_ = x;
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {ps_.n, ps_.c, ps_.p(), ps_.q()}, &y_));
  DETAUDIT_RETURN_IF_ERROR(be_->maxpool_fwd(ps_, x.data(), y_.data()));
  *y = &y_;
  return Status::ok();
}

Status MaxPool2::backward(const Tensor& dy, const Tensor** dx) {
  DETAUDIT_RETURN_IF_ERROR(need(dy.size() == ps_.y_size(), "maxpool2: gradient size mismatch"));
  *dx = nullptr;
  if (!need_dx_) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, x_.shape(), &dx_));
  DETAUDIT_RETURN_IF_ERROR(be_->maxpool_bwd(ps_, x_.data(), y_.data(), dy.data(), dx_.data()));
  *dx = &dx_;
  return Status::ok();
}

// ---- Upsample2 --------------------------------------------------------------------------------------

Status Upsample2::forward(const Tensor& x, const Tensor** y) {
  const Shape& s = x.shape();
  DETAUDIT_RETURN_IF_ERROR(need(s.rank == 4, "upsample2: input " + s.str() + " is not N x C x H x W"));
  xs_ = s;
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {s[0], s[1], 2 * s[2], 2 * s[3]}, &y_));
  DETAUDIT_RETURN_IF_ERROR(be_->upsample2_fwd(x.data(), y_.data(), size_t(s[0]) * s[1], s[2], s[3]));
  *y = &y_;
  return Status::ok();
}

Status Upsample2::backward(const Tensor& dy, const Tensor** dx) {
  DETAUDIT_RETURN_IF_ERROR(need(dy.size() == 4 * xs_.size(), "upsample2: gradient size mismatch"));
  *dx = nullptr;
  if (!need_dx_) return Status::ok();
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, xs_, &dx_));
  DETAUDIT_RETURN_IF_ERROR(be_->upsample2_bwd(dy.data(), dx_.data(), size_t(xs_[0]) * xs_[1], xs_[2], xs_[3]));
  *dx = &dx_;
  return Status::ok();
}

// ---- Reshape ----------------------------------------------------------------------------------------

Status Reshape::forward(const Tensor& x, const Tensor** y) {
  xs_ = x.shape();
  Shape s;
  s.rank = per_sample_.rank + 1;
  s.d[0] = xs_[0];
  for (int i = 0; i < per_sample_.rank; ++i) s.d[i + 1] = per_sample_[i];
  DETAUDIT_RETURN_IF_ERROR(need(s.rank <= 4, "reshape: more than 4 dims"));
  DETAUDIT_RETURN_IF_ERROR(x.reshape(s, &y_));
  *y = &y_;
  return Status::ok();
}

Status Reshape::backward(const Tensor& dy, const Tensor** dx) {
  DETAUDIT_RETURN_IF_ERROR(dy.reshape(xs_, &dx_));
  *dx = need_dx_ ? &dx_ : nullptr;
  return Status::ok();
}

// ---- concat -----------------------------------------------------------------------------------------

Status concat_channels(const Tensor& a, const Tensor& b, Tensor* out) {
  const Shape &sa = a.shape(), &sb = b.shape();
  DETAUDIT_RETURN_IF_ERROR(need(sa.rank == 4 && sb.rank == 4 && sa[0] == sb[0] && sa[2] == sb[2] && sa[3] == sb[3] &&
                                    a.backend() == b.backend(),
                                "concat: " + sa.str() + " and " + sb.str() + " differ outside the channels"));
  Backend* be = a.backend();
  DETAUDIT_RETURN_IF_ERROR(ensure(be, {sa[0], sa[1] + sb[1], sa[2], sa[3]}, out));
  const size_t hw = size_t(sa[2]) * sa[3], ca = sa[1] * hw, cb = sb[1] * hw;
  DETAUDIT_RETURN_IF_ERROR(be->copy_2d(size_t(sa[0]), ca, a.data(), ca, out->data(), ca + cb));
  return be->copy_2d(size_t(sa[0]), cb, b.data(), cb, out->data() + ca, ca + cb);
}

Status concat_channels_bwd(const Tensor& dout, const Shape& sa, const Shape& sb, Tensor* da, Tensor* db) {
  DETAUDIT_RETURN_IF_ERROR(need(sa.rank == 4 && sb.rank == 4 && dout.size() == sa.size() + sb.size(),
                                "concat backward: " + dout.shape().str() + " is not " + sa.str() + " + " + sb.str()));
  Backend* be = dout.backend();
  DETAUDIT_RETURN_IF_ERROR(ensure(be, sa, da));
  DETAUDIT_RETURN_IF_ERROR(ensure(be, sb, db));
  const size_t hw = size_t(sa[2]) * sa[3], ca = sa[1] * hw, cb = sb[1] * hw;
  DETAUDIT_RETURN_IF_ERROR(be->copy_2d(size_t(sa[0]), ca, dout.data(), ca + cb, da->data(), ca));
  return be->copy_2d(size_t(sa[0]), cb, dout.data() + ca, ca + cb, db->data(), cb);
}

// ---- Loss -------------------------------------------------------------------------------------------

Status Loss::forward(const Tensor& y, const Tensor& target, float* value) {
  DETAUDIT_RETURN_IF_ERROR(need(y.size() == target.size(), std::string(to_string(op_)) + " loss: output " +
                                                               y.shape().str() + " vs target " +
                                                               target.shape().str()));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, y.shape(), &dy_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {1}, &value_));
  DETAUDIT_RETURN_IF_ERROR(be_->loss(op_, y.data(), target.data(), y.size(), value_.data(), dy_.data()));
  if (value) return be_->download(value, value_.data(), sizeof(float));
  return Status::ok();
}

// ---- Sequential -------------------------------------------------------------------------------------

const char* to_string(LayerPass p) { return p == LayerPass::kForward ? "forward" : "backward"; }

Status Sequential::forward(const Tensor& x, const Tensor** y) {
  const Tensor* cur = &x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    DETAUDIT_RETURN_IF_ERROR(layers_[i]->forward(*cur, &cur));
    if (observer_) DETAUDIT_RETURN_IF_ERROR(observer_(i, *layers_[i], LayerPass::kForward, "y", *cur));
  }
  *y = cur;
  return Status::ok();
}

Status Sequential::backward(const Tensor& dy, const Tensor** dx) {
  const Tensor* cur = &dy;
  if (observer_ && !layers_.empty())
    DETAUDIT_RETURN_IF_ERROR(observer_(layers_.size() - 1, *layers_.back(), LayerPass::kBackward, "dy", dy));
  for (size_t i = layers_.size(); i-- > 0;) {
    const Tensor* next = nullptr;
    DETAUDIT_RETURN_IF_ERROR(layers_[i]->backward(*cur, &next));
    if (observer_) {
      const Layer& l = *layers_[i];
      const std::vector<Tensor*> g = layers_[i]->grads();
      for (size_t k = 0; k < g.size(); ++k)
        DETAUDIT_RETURN_IF_ERROR(observer_(i, l, LayerPass::kBackward, k == 0 ? "dw" : k == 1 ? "db" : "grad", *g[k]));
      if (next) DETAUDIT_RETURN_IF_ERROR(observer_(i, l, LayerPass::kBackward, "dx", *next));
    }
    if (!next) {  // this layer computes no input gradient: nothing below it can learn
      *dx = nullptr;
      return Status::ok();
    }
    cur = next;
  }
  *dx = cur;
  return Status::ok();
}

std::vector<Tensor*> Sequential::params() {
  std::vector<Tensor*> v;
  for (auto& l : layers_)
    for (Tensor* t : l->params()) v.push_back(t);
  return v;
}
std::vector<Tensor*> Sequential::grads() {
  std::vector<Tensor*> v;
  for (auto& l : layers_)
    for (Tensor* t : l->grads()) v.push_back(t);
  return v;
}
Status Sequential::init(uint64_t seed) {
  for (size_t i = 0; i < layers_.size(); ++i) DETAUDIT_RETURN_IF_ERROR(layers_[i]->init(seed, 16 * i));
  return Status::ok();
}

}  // namespace detaudit
