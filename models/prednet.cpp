#include "models/prednet.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "models/layers.hpp"

namespace detaudit {

namespace {
Status need(bool ok, const std::string& what) { return ok ? Status::ok() : Status::invalid(what); }

double time_weight(int t, int nt) { return t == 0 ? 0.0 : 1.0 / double(nt - 1); }
}  // namespace

std::string PredNetConfig::validate() const {
  if (stacks.empty()) return "no layers";
  for (int s : stacks)
    if (s <= 0) return "a stack size is not positive";
  if (int(layer_weights.size()) != layers()) return "layer_weights has " + std::to_string(layer_weights.size()) +
                                                    " entries for " + std::to_string(layers()) + " layers";
  const int div = 1 << (layers() - 1);
  if (height <= 0 || width <= 0 || height % div || width % div)
    return "height and width must be positive and divisible by " + std::to_string(div);
  if (nt < 2) return "nt must be at least 2";
  if (batch < 1) return "batch must be at least 1";
  if (filter < 1 || filter % 2 == 0) return "filter must be odd";
  return "";
}

PredNetConfig prednet_paper() {
  PredNetConfig c;
  c.height = 128, c.width = 160;
  c.stacks = {3, 48, 96, 192};
  return c;
}

PredNetConfig prednet_quick() { return PredNetConfig{}; }

PredNet::PredNet(Backend* b, PredNetConfig cfg) : be_(b), cfg_(std::move(cfg)) {}

Status PredNet::allocate() {
  const std::string bad = cfg_.validate();
  DETAUDIT_RETURN_IF_ERROR(need(bad.empty(), "prednet: " + bad));
  const int L = cfg_.layers(), N = cfg_.batch, T = cfg_.nt, TN = T * N, F = cfg_.filter;
  lv_.clear();
  lv_.resize(L);
  size_t max_e = 0;
  for (int l = 0; l < L; ++l) {
    Level& v = lv_[l];
    v.s = cfg_.stacks[l], v.h = cfg_.height >> l, v.w = cfg_.width >> l;
    const int up = l + 1 < L ? cfg_.stacks[l + 1] : 0;
    v.cell = std::make_unique<ConvLstm>(be_, 2 * v.s + up, v.s, F);
    DETAUDIT_RETURN_IF_ERROR(v.cell->begin(N, v.h, v.w, T));
    auto conv = [&](Conv* c, int cin, int cout) -> Status {
      c->cs.n = N, c->cs.c = cin, c->cs.h = v.h, c->cs.w = v.w;
      c->cs.k = cout, c->cs.r = c->cs.s = F, c->cs.stride = 1, c->cs.pad = F / 2;
      DETAUDIT_RETURN_IF_ERROR(Tensor::create(be_, {cout, cin, F, F}, &c->w));
      DETAUDIT_RETURN_IF_ERROR(Tensor::create(be_, {cout, cin, F, F}, &c->dw));
      DETAUDIT_RETURN_IF_ERROR(Tensor::create(be_, {cout}, &c->b));
      return Tensor::create(be_, {cout}, &c->db);
    };
    DETAUDIT_RETURN_IF_ERROR(conv(&v.ahat, v.s, v.s));
    if (up) DETAUDIT_RETURN_IF_ERROR(conv(&v.a, 2 * v.s, up));
    const Shape all = {TN, v.s, v.h, v.w}, one = {N, v.s, v.h, v.w};
    for (Tensor* t : {&v.ahat_pre, &v.ahat_relu, &v.d, &v.dahat_pre}) DETAUDIT_RETURN_IF_ERROR(ensure(be_, all, t));
    if (l == 0) DETAUDIT_RETURN_IF_ERROR(ensure(be_, all, &v.clamp_gap));
    DETAUDIT_RETURN_IF_ERROR(ensure(be_, {TN, 2 * v.s, v.h, v.w}, &v.e));
    if (l > 0) {
      const Shape below = {TN, v.s, 2 * v.h, 2 * v.w};
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, below, &v.a_pre));
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, below, &v.a_relu));
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, below, &v.da_pre));
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, all, &v.a_out));
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, {N, v.s, 2 * v.h, 2 * v.w}, &v.dpool));
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, one, &v.dupr));
    }
    for (Tensor* t : {&v.p, &v.q, &v.negd, &v.dp, &v.dq, &v.dd, &v.dq2, &v.dahat, &v.dahat2, &v.da1, &v.dr})
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, one, t));
    for (Tensor* t : {&v.de, &v.de_next, &v.dtmp_e}) DETAUDIT_RETURN_IF_ERROR(ensure(be_, {N, 2 * v.s, v.h, v.w}, t));
    if (up) {
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, {N, up, v.h, v.w}, &v.up));
      DETAUDIT_RETURN_IF_ERROR(ensure(be_, {N, up, v.h, v.w}, &v.dup));
    }
    max_e = std::max(max_e, size_t(N) * 2 * v.s * v.h * v.w);
  }
  const Shape img = {TN, cfg_.channels(), cfg_.height, cfg_.width};
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, img, &pred_));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {int(slot(0))}, &pmax_));
  DETAUDIT_RETURN_IF_ERROR(be_->fill(pmax_.data(), cfg_.pixel_max, slot(0)));
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {int(max_e)}, &zeros_));
  DETAUDIT_RETURN_IF_ERROR(zeros_.zero());
  DETAUDIT_RETURN_IF_ERROR(ensure(be_, {T * L}, &sums_));
  return Status::ok();
}

Status PredNet::init(uint64_t seed) {
  ready_ = forwarded_ = false;
  DETAUDIT_RETURN_IF_ERROR(allocate());
  for (int l = 0; l < cfg_.layers(); ++l) {
    Level& v = lv_[l];
    const uint64_t base = 16 * uint64_t(l);
    DETAUDIT_RETURN_IF_ERROR(v.cell->init(seed, base));
    const int ff = cfg_.filter * cfg_.filter;
    for (auto [c, stream] : {std::pair<Conv*, uint64_t>{&v.ahat, base + 8}, {&v.a, base + 9}}) {
      if (c->w.empty()) continue;
      DETAUDIT_RETURN_IF_ERROR(glorot_uniform(c->w, c->cs.c * ff, c->cs.k * ff, seed, stream));
      DETAUDIT_RETURN_IF_ERROR(c->b.zero());
    }
  }
  ready_ = true;
  return Status::ok();
}

std::vector<Tensor*> PredNet::params() {
  std::vector<Tensor*> p;
  for (Level& v : lv_) {
    for (Tensor* t : v.cell->params()) p.push_back(t);
    p.push_back(&v.ahat.w), p.push_back(&v.ahat.b);
    if (!v.a.w.empty()) p.push_back(&v.a.w), p.push_back(&v.a.b);
  }
  return p;
}

std::vector<Tensor*> PredNet::grads() {
  std::vector<Tensor*> g;
  for (Level& v : lv_) {
    for (Tensor* t : v.cell->grads()) g.push_back(t);
    g.push_back(&v.ahat.dw), g.push_back(&v.ahat.db);
    if (!v.a.w.empty()) g.push_back(&v.a.dw), g.push_back(&v.a.db);
  }
  return g;
}

const float* PredNet::a_of(int l, int t) const {
  return l == 0 ? frames_->data() + size_t(t) * slot(0) : lv_[l].a_out.data() + size_t(t) * slot(l);
}

Status PredNet::forward(const Tensor& frames, double* loss) {
  DETAUDIT_RETURN_IF_ERROR(need(ready_, "prednet: init() first"));
  forwarded_ = false;
  const Shape want = {cfg_.nt * cfg_.batch, cfg_.channels(), cfg_.height, cfg_.width};
  DETAUDIT_RETURN_IF_ERROR(
      need(frames.shape() == want && frames.backend() == be_, "prednet: frames " + frames.shape().str() + " are not " + want.str()));
  frames_ = &frames;
  DETAUDIT_RETURN_IF_ERROR(sums_.zero());
  for (int t = 0; t < cfg_.nt; ++t) DETAUDIT_RETURN_IF_ERROR(forward_step(t));
  forwarded_ = true;
  if (!loss) return Status::ok();
  std::vector<float> sums;
  DETAUDIT_RETURN_IF_ERROR(sums_.download(&sums));
  const int L = cfg_.layers();
  double total = 0;
  for (int t = 0; t < cfg_.nt; ++t)
    for (int l = 0; l < L; ++l)
      total += time_weight(t, cfg_.nt) * double(cfg_.layer_weights[l]) * double(sums[t * L + l]) / double(2 * slot(l));
  *loss = total;
  return Status::ok();
}

Status PredNet::forward_step(int t) {
  const int L = cfg_.layers(), N = cfg_.batch;
  // top-down: R_l(t) from E_l(t-1) and R_{l+1}(t)
  for (int l = L - 1; l >= 0; --l) {
    Level& v = lv_[l];
    std::vector<ConvLstm::Part> in = {{t == 0 ? zeros_.data() : v.e.data() + size_t(t - 1) * 2 * slot(l), 2 * v.s}};
    if (l + 1 < L) {
      const Level& u = lv_[l + 1];
      DETAUDIT_RETURN_IF_ERROR(be_->upsample2_fwd(u.cell->h(t), v.up.data(), size_t(N) * u.s, u.h, u.w));
      in.push_back({v.up.data(), u.s});
    }
    DETAUDIT_RETURN_IF_ERROR(v.cell->forward_step(t, in));
  }
  // bottom-up: Ahat_l, E_l, A_{l+1}
  for (int l = 0; l < L; ++l) {
    Level& v = lv_[l];
    const size_t n1 = slot(l), hw = size_t(v.h) * v.w, sc = size_t(v.s) * hw, o = size_t(t) * n1;
    DETAUDIT_RETURN_IF_ERROR(conv_fwd(v.ahat, v.cell->h(t), v.ahat_pre.data() + o));
    DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kRelu, v.ahat_pre.data() + o, v.ahat_relu.data() + o, n1));
    const float* ahat = v.ahat_relu.data() + o;
    if (l == 0) {  // pixel clamp; the gap pixel_max - Ahat (> 0 where the min passes Ahat) for the backward
      DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kSub, pmax_.data(), ahat, v.clamp_gap.data() + o, n1));
      DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kMin, ahat, pmax_.data(), pred_.data() + o, n1));
      ahat = pred_.data() + o;
    }
    float* d = v.d.data() + o;
    DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kSub, ahat, a_of(l, t), d, n1));
    DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kRelu, d, v.p.data(), n1));
    DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kNeg, d, v.negd.data(), n1));
    DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kRelu, v.negd.data(), v.q.data(), n1));
    float* e = v.e.data() + 2 * o;
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(size_t(N), sc, v.p.data(), sc, e, 2 * sc));
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(size_t(N), sc, v.q.data(), sc, e + sc, 2 * sc));
    if (time_weight(t, cfg_.nt) != 0 && cfg_.layer_weights[l] != 0)
      DETAUDIT_RETURN_IF_ERROR(be_->reduce(ReduceOp::kSum, e, nullptr, 2 * n1, sums_.data() + t * L + l));
    if (l + 1 < L) {
      Level& u = lv_[l + 1];
      const size_t nb = size_t(N) * u.s * v.h * v.w, ob = size_t(t) * nb;
      DETAUDIT_RETURN_IF_ERROR(conv_fwd(v.a, e, u.a_pre.data() + ob));
      DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kRelu, u.a_pre.data() + ob, u.a_relu.data() + ob, nb));
      DETAUDIT_RETURN_IF_ERROR(be_->maxpool_fwd(pool_shape(l + 1), u.a_relu.data() + ob, u.a_out.data() + size_t(t) * slot(l + 1)));
    }
  }
  return Status::ok();
}

PoolShape PredNet::pool_shape(int l) const {
  PoolShape ps;
  ps.n = cfg_.batch, ps.c = lv_[l].s, ps.h = 2 * lv_[l].h, ps.w = 2 * lv_[l].w, ps.window = 2, ps.stride = 2;
  return ps;
}

Status PredNet::conv_fwd(Conv& c, const float* x, float* y) {
  return be_->conv2d_fwd_bias(c.cs, x, c.w.data(), c.b.data(), y);
}

Status PredNet::backward() {
  DETAUDIT_RETURN_IF_ERROR(need(forwarded_, "prednet: backward() without forward()"));
  for (Level& v : lv_) DETAUDIT_RETURN_IF_ERROR(v.de_next.zero());
  for (int t = cfg_.nt - 1; t >= 0; --t) DETAUDIT_RETURN_IF_ERROR(backward_step(t));
  // Weight gradients over all steps at once.
  const int L = cfg_.layers(), TN = cfg_.nt * cfg_.batch;
  for (int l = 0; l < L; ++l) {
    Level& v = lv_[l];
    const size_t hw = size_t(v.h) * v.w;
    ConvShape all = v.ahat.cs;
    all.n = TN;
    DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_filter(all, v.cell->h_all().data(), v.dahat_pre.data(), v.ahat.dw.data()));
    DETAUDIT_RETURN_IF_ERROR(be_->bias_grad(v.dahat_pre.data(), v.ahat.db.data(), size_t(TN), size_t(v.s), hw));
    if (l + 1 < L) {
      const Level& u = lv_[l + 1];
      all = v.a.cs;
      all.n = TN;
      DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_filter(all, v.e.data(), u.da_pre.data(), v.a.dw.data()));
      DETAUDIT_RETURN_IF_ERROR(be_->bias_grad(u.da_pre.data(), v.a.db.data(), size_t(TN), size_t(u.s), hw));
    }
  }
  return Status::ok();
}

Status PredNet::backward_step(int t) {
  const int L = cfg_.layers(), N = cfg_.batch;
  // bottom-up in reverse: dE_l(t) -> dAhat_l(t) -> dR_l(t), and dA_l(t) -> dE_{l-1}(t)
  for (int l = L - 1; l >= 0; --l) {
    Level& v = lv_[l];
    const size_t n1 = slot(l), hw = size_t(v.h) * v.w, sc = size_t(v.s) * hw, o = size_t(t) * n1;
    // dE = the loss's constant + from R_l(t+1) + (below the top) from A_{l+1}(t)
    const double c = time_weight(t, cfg_.nt) * double(cfg_.layer_weights[l]) / double(2 * n1);
    DETAUDIT_RETURN_IF_ERROR(be_->fill(v.de.data(), float(c), 2 * n1));
    DETAUDIT_RETURN_IF_ERROR(be_->axpy(2 * n1, 1.0f, v.de_next.data(), v.de.data()));
    if (l + 1 < L) {
      const Level& u = lv_[l + 1];
      const size_t ob = size_t(t) * N * u.s * v.h * v.w;
      DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_data(v.a.cs, u.da_pre.data() + ob, v.a.w.data(), v.dtmp_e.data()));
      DETAUDIT_RETURN_IF_ERROR(be_->axpy(2 * n1, 1.0f, v.dtmp_e.data(), v.de.data()));
    }
    // E = [relu(d), relu(-d)], d = Ahat - A
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(size_t(N), sc, v.de.data(), 2 * sc, v.dp.data(), sc));
    DETAUDIT_RETURN_IF_ERROR(be_->copy_2d(size_t(N), sc, v.de.data() + sc, 2 * sc, v.dq.data(), sc));
    const float* d = v.d.data() + o;
    DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kRelu, d, d, v.dp.data(), v.dd.data(), n1));
    DETAUDIT_RETURN_IF_ERROR(be_->unary(UnaryOp::kNeg, d, v.negd.data(), n1));
    DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kRelu, v.negd.data(), v.negd.data(), v.dq.data(), v.dq2.data(), n1));
    DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kSub, v.dd.data(), v.dq2.data(), v.dahat.data(), n1));
    if (l > 0) {  // A_l = maxpool(relu(a_pre))
      const size_t nb = size_t(N) * v.s * 4 * hw, ob = size_t(t) * nb;
      DETAUDIT_RETURN_IF_ERROR(be_->binary(BinaryOp::kSub, v.dq2.data(), v.dd.data(), v.da1.data(), n1));
      DETAUDIT_RETURN_IF_ERROR(be_->maxpool_bwd(pool_shape(l), v.a_relu.data() + ob, v.a_out.data() + o, v.da1.data(),
                                                v.dpool.data()));
      DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kRelu, v.a_pre.data() + ob, v.a_pre.data() + ob, v.dpool.data(),
                                              v.da_pre.data() + ob, nb));
    }
    const float* dahat = v.dahat.data();
    if (l == 0) {  // min(Ahat, pixel_max) passes the gradient where pixel_max - Ahat > 0
      DETAUDIT_RETURN_IF_ERROR(be_->unary_bwd(UnaryOp::kRelu, v.clamp_gap.data() + o, v.clamp_gap.data() + o, dahat, v.dahat2.data(), n1));
      dahat = v.dahat2.data();
    }
    DETAUDIT_RETURN_IF_ERROR(
        be_->unary_bwd(UnaryOp::kRelu, v.ahat_pre.data() + o, v.ahat_pre.data() + o, dahat, v.dahat_pre.data() + o, n1));
    DETAUDIT_RETURN_IF_ERROR(be_->conv2d_bwd_data(v.ahat.cs, v.dahat_pre.data() + o, v.ahat.w.data(), v.dr.data()));
  }
  // top-down in reverse: the cells, bottom first (layer l-1's cell took upsample2(R_l(t)))
  for (int l = 0; l < L; ++l) {
    Level& v = lv_[l];
    if (l > 0) {
      DETAUDIT_RETURN_IF_ERROR(be_->upsample2_bwd(lv_[l - 1].dup.data(), v.dupr.data(), size_t(N) * v.s, v.h, v.w));
      DETAUDIT_RETURN_IF_ERROR(be_->axpy(slot(l), 1.0f, v.dupr.data(), v.dr.data()));
    }
    std::vector<ConvLstm::GradPart> dx = {{v.de_next.data(), 2 * v.s}};
    if (l + 1 < L) dx.push_back({v.dup.data(), lv_[l + 1].s});
    DETAUDIT_RETURN_IF_ERROR(v.cell->backward_step(t, v.dr.data(), dx));
  }
  return Status::ok();
}

}  // namespace detaudit
