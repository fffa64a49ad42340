#include "models/convlstm.hpp"

#include <cmath>
#include <string>

#include "kernels/generator.hpp"

namespace detaudit {

namespace {
Status need(bool ok, const std::string& what) { return ok ? Status::ok() : Status::invalid(what); }
}  // namespace

ConvLstm::ConvLstm(Backend* b, int in_channels, int hidden, int filter)
    : be_(b), cin_(in_channels), k_(hidden), filter_(filter) {
  cs_.c = cin_ + k_, cs_.k = 4 * k_, cs_.r = cs_.s = filter_, cs_.stride = 1, cs_.pad = filter_ / 2;
  Status st = Tensor::create(b, {4 * k_, cin_ + k_, filter_, filter_}, &w_);
  if (st) st = Tensor::create(b, {4 * k_}, &b_);
  if (st) st = Tensor::create(b, {4 * k_, cin_ + k_, filter_, filter_}, &dw_);
  if (st) st = Tensor::create(b, {4 * k_}, &db_);
  if (st) st = w_.zero();
  if (st) st = b_.zero();
}

Status ConvLstm::init(uint64_t seed, uint64_t stream) {
  DETAUDIT_RETURN_IF_ERROR(need(!w_.empty() && !db_.empty(), "convlstm: parameters not allocated"));
  const int ff = filter_ * filter_;
  const double limit = std::sqrt(6.0 / double((cin_ + k_) * ff + k_ * ff));
  const size_t block = size_t(k_) * (cin_ + k_) * ff;  // one gate's filters, contiguous in w_
  std::vector<float> host(w_.size());
  for (int g = 0; g < 4; ++g)
    for (size_t i = 0; i < block; ++i)
      host[g * block + i] = float(limit * counter_value(seed, stream + g, i, Dist::kUniform));
  DETAUDIT_RETURN_IF_ERROR(w_.upload(host));
  return b_.zero();
}

Status ConvLstm::begin(int n, int h, int w, int steps) {
  DETAUDIT_RETURN_IF_ERROR(need(n > 0 && h > 0 && w > 0 && steps > 0, "convlstm: empty shape"));
  cs_.n = n, cs_.h = h, cs_.w = w;
  steps_ = steps;
  hw_ = size_t(h) * w;
  m_ = size_t(n) * k_ * hw_;
  const int tn = steps * n, m = int(m_);
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {tn, cin_ + k_, h, w}, &xh_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {steps, 4, m}, &zg_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {steps, 4, m}, &a_));
  for (Tensor* t : {&c_, &tc_, &h_}) DETAUDIT_RETURN_IF_ERROR(ensure(be_, {tn, k_, h, w}, t));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {n, 4 * k_, h, w}, &zs_));
  for (Tensor* t : {&zero_, &ones_, &tmp_, &dh_rec_, &dc_rec_, &dh_, &dc_}) DETAUDIT_RETURN_IF_ERROR(ensure(be_, {m}, t));
  DETAUDIT_RETURN_IF_ERROR(zero_.zero());
  DETAUDIT_RETURN_IF_ERROR(be_->fill(ones_.data(), 1.0f, m_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {4, m}, &da_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {4, m}, &dzg_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {n, cin_ + k_, h, w}, &dxh_));
  return ensure(be_, {tn, 4 * k_, h, w}, &dz_);
}

// tanh, or 2*sigmoid(2x) - 1 from exact doublings on a backend without a tanh forward (order=portable
// has none yet): the same function to within a few ulps of 1, and still one definition per backend.
Status ConvLstm::tanh_fwd(const float* x, float* y, size_t n) {
  if (!tanh_composite_) {
    const Status st = be_->unary(UnaryOp::kTanh, x, y, n);
    if (st.code() != Status::Code::kUnsupported) return st;
    tanh_composite_ = true;
  }
  float* t = tmp_.data();  // n <= m_; the callers' x and y are never tmp_
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kAdd, x, x, t, n));
  DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kSigmoid, t, y, n));
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kAdd, y, y, t, n));
  return be_->binary(BinaryOp::kSub, t, ones_.data(), y, n);
}

Status ConvLstm::forward_step(int t, const std::vector<Part>& inputs) {
  DETAUDIT_RETURN_IF_ERROR(need(t >= 0 && t < steps_, "convlstm: step " + std::to_string(t) + " outside begin()"));
  const size_t n = size_t(cs_.n), ld = size_t(cin_ + k_) * hw_, m = m_;
  float* xh = xh_.data() + size_t(t) * n * ld;
  size_t off = 0;
  for (const Part& p : inputs) {
    DETAUDIT_RETURN_IF_ERROR(need(p.data != nullptr && off + p.channels <= size_t(cin_), "convlstm: inputs exceed " +
                                                                                            std::to_string(cin_) + " channels"));
    const size_t cols = size_t(p.channels) * hw_;
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(n, cols, p.data, cols, xh + off * hw_, ld));
    off += p.channels;
  }
  DETAUDIT_RETURN_IF_ERROR(need(off == size_t(cin_), "convlstm: inputs have " + std::to_string(off) + " channels, not " +
                                                         std::to_string(cin_)));
  const size_t kc = size_t(k_) * hw_;
  DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(n, kc, t == 0 ? zero_.data() : h(t - 1), kc, xh + off * hw_, ld));

  float* zg = zg_.data() + size_t(t) * 4 * m;
  float* a = a_.data() + size_t(t) * 4 * m;
  float* c = c_.data() + size_t(t) * m;
  float* tc = tc_.data() + size_t(t) * m;
  DETAUDIT_RETURN_IF_ERROR(be_->conv2d_fwd_bias(cs_, xh, w_.data(), b_.data(), zs_.data()));
  if (!unfused_) {  // the backend's one-pass gate arithmetic (the same bits as the ops below), if it has one
    LstmFwdArgs f;
    f.n = n, f.kc = kc, f.z = zs_.data(), f.c_prev = c_prev(t), f.zg = zg, f.a = a, f.c = c, f.tc = tc;
    f.h = h_.data() + size_t(t) * m;
    const Status st = be_->lstm_cell_fwd(f);
    if (st.code() != Status::Code::kUnsupported) return st;
    unfused_ = true;
  }
  for (int g = 0; g < 4; ++g)  // sample-major [N][4][K*HW] -> gate-major [4][N][K*HW]
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(n, kc, zs_.data() + g * kc, 4 * kc, zg + g * m, kc));
  DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kHardSigmoid, zg, a, 3 * m));
  DETAUDIT_RETURN_IF_ERROR(tanh_fwd(zg + 3 * m, a + 3 * m, m));

  const float *ai = a, *af = a + m, *ao = a + 2 * m, *ag = a + 3 * m;
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, af, c_prev(t), c, m));
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, ai, ag, dc_.data(), m));  // dc_: free scratch here
  DETAUDIT_RETURN_IF_ERROR(be_->axpy(m, 1.0f, dc_.data(), c));
  DETAUDIT_RETURN_IF_ERROR(tanh_fwd(c, tc, m));
  return be_->binary(BinaryOp::kMul, ao, tc, h_.data() + size_t(t) * m, m);
}

Status ConvLstm::backward_step(int t, const float* dh_ext, const std::vector<GradPart>& dx) {
  DETAUDIT_RETURN_IF_ERROR(need(t >= 0 && t < steps_, "convlstm: step " + std::to_string(t) + " outside begin()"));
  const size_t n = size_t(cs_.n), m = m_, kc = size_t(k_) * hw_;
  if (t == steps_ - 1) {  // nothing flows back from beyond the last step
    DETAUDIT_RETURN_IF_ERROR(dh_rec_.zero());
    DETAUDIT_RETURN_IF_ERROR(dc_rec_.zero());
  }
  const float* zg = zg_.data() + size_t(t) * 4 * m;
  const float* a = a_.data() + size_t(t) * 4 * m;
  const float* tc = tc_.data() + size_t(t) * m;
  float* dz = dz_.data() + size_t(t) * 4 * m;
  bool fused = false;
  if (!unfused_) {
    LstmBwdArgs f;
    f.n = n, f.kc = kc, f.zg = zg, f.a = a, f.c_prev = c_prev(t), f.tc = tc, f.dh_rec = dh_rec_.data(),
    f.dh_ext = dh_ext, f.dc_rec = dc_rec_.data(), f.dz = dz;
    const Status st = be_->lstm_cell_bwd(f);
    if (st.code() != Status::Code::kUnsupported) {
      DETAUDIT_RETURN_IF_ERROR(st);
      fused = true;
    } else {
      unfused_ = true;
    }
  }
  if (!fused) DETAUDIT_RETURN_IF_ERROR(gates_backward(t, dh_ext));
  return conv_backward(t, dx);
}

// The gate arithmetic of backward_step through the backend's separate ops (lstm_cell_bwd's bits).
Status ConvLstm::gates_backward(int t, const float* dh_ext) {
  const size_t n = size_t(cs_.n), m = m_, kc = size_t(k_) * hw_;
  // dh = dh_ext + dh from step t+1
  float* dh = dh_.data();
  DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(1, m, dh_rec_.data(), m, dh, m));
  if (dh_ext) DETAUDIT_RETURN_IF_ERROR(be_->axpy(m, 1.0f, dh_ext, dh));

  const float* zg = zg_.data() + size_t(t) * 4 * m;
  const float* a = a_.data() + size_t(t) * 4 * m;
  const float *ai = a, *af = a + m, *ao = a + 2 * m, *ag = a + 3 * m;
  const float* c = c_.data() + size_t(t) * m;
  const float* tc = tc_.data() + size_t(t) * m;
  float* da = da_.data();
  float *dai = da, *daf = da + m, *dao = da + 2 * m, *dag = da + 3 * m;
  float* dc = dc_.data();
  // h = o*tanh(c): do = dh*tanh(c); dc = tanh'(c)*(dh*o) + dc from step t+1
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, dh, tc, dao, m));
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, dh, ao, tmp_.data(), m));
  DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kTanh, c, tc, tmp_.data(), dc, m));
  DETAUDIT_RETURN_IF_ERROR(be_->axpy(m, 1.0f, dc_rec_.data(), dc));
  // c = f*c_prev + i*g
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, dc, ag, dai, m));
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, dc, c_prev(t), daf, m));
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, dc, ai, dag, m));
  DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMul, dc, af, dc_rec_.data(), m));
  // gates
  float* dzg = dzg_.data();
  DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kHardSigmoid, zg, a, da, dzg, 3 * m));
  DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kTanh, zg + 3 * m, a + 3 * m, da + 3 * m, dzg + 3 * m, m));
  float* dz = dz_.data() + size_t(t) * 4 * m;
  for (int g = 0; g < 4; ++g)  // gate-major -> sample-major
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(n, kc, dzg + g * m, kc, dz + g * kc, 4 * kc));
  return Status::ok();
}

// [dx, dh_prev] from the step's dz; at t = 0 also the weight and bias gradients.
Status ConvLstm::conv_backward(int t, const std::vector<GradPart>& dx) {
  const size_t n = size_t(cs_.n), ld = size_t(cin_ + k_) * hw_, m = m_, kc = size_t(k_) * hw_;
  const float* dz = dz_.data() + size_t(t) * 4 * m;

  // [dx, dh_prev] = conv^T(dz)
  DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_data(cs_, dz, w_.data(), dxh_.data()));
  size_t off = 0;
  for (const GradPart& p : dx) {
    DETAUDIT_RETURN_IF_ERROR(need(off + p.channels <= size_t(cin_), "convlstm: input gradients exceed the inputs"));
    const size_t cols = size_t(p.channels) * hw_;
    if (p.data) DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(n, cols, dxh_.data() + off * hw_, ld, p.data, cols));
    off += p.channels;
  }
  DETAUDIT_RETURN_IF_ERROR(need(off == size_t(cin_), "convlstm: input gradients do not cover the inputs"));
  if (t > 0) return be_->copy_2d(n, kc, dxh_.data() + off * hw_, ld, dh_rec_.data(), kc);

  // All steps are done: dW and db over steps*N samples in one reduction each.
  ConvShape all = cs_;
  all.n = steps_ * cs_.n;
  DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_filter(all, xh_.data(), dz_.data(), dw_.data()));
  return be_->bias_grad(dz_.data(), db_.data(), size_t(all.n), size_t(4 * k_), hw_);
}

}  // namespace detaudit
