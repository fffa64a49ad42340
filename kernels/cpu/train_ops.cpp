#include "kernels/cpu/train_ops.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace detaudit::train_ops {

// Elementwise loops give the same bits at any vector width (each element's operations are fixed and
// the project builds with -ffp-contract=off), so these are built for several ISAs and the best one
// the CPU has runs; they are written branch-free so that they vectorise.
#define DETAUDIT_ELEMENTWISE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

DETAUDIT_ELEMENTWISE_CLONES void bias_add_f32(float* y, const float* bias, size_t c, size_t hw, size_t p0, size_t p1) {
  if (c == 0) return;
  if (hw == 1) {  // a linear layer's rows: planes p0..p1 are whole rows when p0 and p1 are multiples of c
    size_t p = p0;
    for (; p < p1 && p % c != 0; ++p) y[p] = y[p] + bias[p % c];
    for (; p + c <= p1; p += c) {
      float* row = y + p;
      for (size_t j = 0; j < c; ++j) row[j] = row[j] + bias[j];
    }
    for (; p < p1; ++p) y[p] = y[p] + bias[p % c];
    return;
  }
  for (size_t p = p0; p < p1; ++p) {
    const float b = bias[p % c];
    float* row = y + p * hw;
    for (size_t l = 0; l < hw; ++l) row[l] = row[l] + b;
  }
}

namespace {
DETAUDIT_ELEMENTWISE_CLONES void relu_bwd(const float* x, const float* dy, float* dx, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) {
    const float g = dy[i];
    dx[i] = x[i] > 0.0f ? g : 0.0f;
  }
}
DETAUDIT_ELEMENTWISE_CLONES void sigmoid_bwd(const float* y, const float* dy, float* dx, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) dx[i] = dy[i] * (y[i] * (1.0f - y[i]));
}
DETAUDIT_ELEMENTWISE_CLONES void tanh_bwd(const float* y, const float* dy, float* dx, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
}
DETAUDIT_ELEMENTWISE_CLONES void hard_sigmoid_bwd(const float* x, const float* dy, float* dx, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) {
    const float g = dy[i] * 0.2f;
    dx[i] = (x[i] > -2.5f && x[i] < 2.5f) ? g : 0.0f;
  }
}
}  // namespace

// One element of tanh_f32 (train_ops.hpp), every step one rounded IEEE operation.
[[gnu::always_inline]] inline float tanh_one(float x) {
  const float a = x < 0.0f ? -x : x;
  // |x| < 0.625: x + x*z*P(z).
  const float z = x * x;
  float p = -5.70498872745e-3f * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + (p * z) * x;
  // Otherwise 1 - 2/(exp(v) + 1), v = 2|x| <= 40: v = k ln2 + r with k = round(v log2(e)) (by adding
  // and taking away 1.5 * 2^23, exact for these magnitudes) and ln2 in two parts, the first exact
  // in k times it; exp(r) by Cephes' polynomial; 2^k from its bits.
  const float v = a + a < 40.0f ? a + a : 40.0f;
  const float k = (v * 1.44269502162933349609375f + 12582912.0f) - 12582912.0f;
  const float r = (v - k * 0.693359375f) + k * 2.12194440e-4f;
  float q = 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  const float er = ((q * (r * r)) + r) + 1.0f;
  const float ex = er * std::bit_cast<float>(uint32_t(int32_t(k) + 127) << 23);
  const float large = 1.0f - 2.0f / (ex + 1.0f);
  const float t = a < 0.625f ? small : (x < 0.0f ? -large : large);
  return ((x == x) & (x != 0.0f)) ? t : x;  // NaN stays NaN, and -0 stays -0
}

DETAUDIT_ELEMENTWISE_CLONES void tanh_f32(const float* x, float* y, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) y[i] = tanh_one(x[i]);
}

namespace {
// One contiguous run [j0, j1) of sample s, as a few simple loops (each vectorizes; one loop over all
// sixteen arrays did not).
DETAUDIT_ELEMENTWISE_CLONES void lstm_fwd_run(const LstmFwdArgs& a, size_t s, size_t j0, size_t j1) {
  const size_t m = a.n * a.kc, o = s * a.kc, kc = a.kc;
  const float* z = a.z + s * 4 * kc;
  for (int g = 0; g < 4; ++g) {  // zg = z, gate-major; a_ifo = hard_sigmoid(z_ifo), a_g = tanh(z_g)
    const float* __restrict zs = z + g * kc;
    float* __restrict zd = a.zg + g * m + o;
    float* __restrict ad = a.a + g * m + o;
    for (size_t j = j0; j < j1; ++j) zd[j] = zs[j];
    if (g < 3) {
      for (size_t j = j0; j < j1; ++j) ad[j] = hard_sigmoid_one(zs[j]);
    } else {
      for (size_t j = j0; j < j1; ++j) ad[j] = tanh_one(zs[j]);
    }
  }
  const float* __restrict ai = a.a + o, * __restrict af = ai + m, * __restrict ao = af + m, * __restrict ag = ao + m;
  const float* __restrict cp = a.c_prev + o;
  float* __restrict c = a.c + o, * __restrict tc = a.tc + o, * __restrict h = a.h + o;
  for (size_t j = j0; j < j1; ++j) c[j] = af[j] * cp[j] + ai[j] * ag[j];  // = fma(1, i*g, f*c_prev)
  for (size_t j = j0; j < j1; ++j) tc[j] = tanh_one(c[j]);
  for (size_t j = j0; j < j1; ++j) h[j] = ao[j] * tc[j];
}

DETAUDIT_ELEMENTWISE_CLONES void lstm_bwd_run(const LstmBwdArgs& a, size_t s, size_t j0, size_t j1) {
  const size_t m = a.n * a.kc, o = s * a.kc, kc = a.kc;
  const float* __restrict ai = a.a + o, * __restrict af = ai + m, * __restrict ao = af + m, * __restrict ag = ao + m;
  const float* __restrict cp = a.c_prev + o, * __restrict tc = a.tc + o, * __restrict dhr = a.dh_rec + o;
  float* __restrict dcr = a.dc_rec + o;
  float* __restrict dz = a.dz + s * 4 * kc;
  float* __restrict dzi = dz, * __restrict dzf = dz + kc, * __restrict dzo = dz + 2 * kc, * __restrict dzg = dz + 3 * kc;
  // dz_o holds dh first, then dc's pieces go through dz_i and dz_g before the gates' derivatives.
  if (a.dh_ext) {
    const float* __restrict dhe = a.dh_ext + o;
    for (size_t j = j0; j < j1; ++j) dzo[j] = dhr[j] + dhe[j];  // dh = fma(1, dh_ext, dh_rec)
  } else {
    for (size_t j = j0; j < j1; ++j) dzo[j] = dhr[j];
  }
  for (size_t j = j0; j < j1; ++j) {  // dc = tanh'(c)*(dh*o) + dc_rec; dz_i holds dc
    const float t = tc[j];
    dzi[j] = (dzo[j] * ao[j]) * (1.0f - t * t) + dcr[j];
  }
  for (size_t j = j0; j < j1; ++j) {
    const float dc = dzi[j];
    dzf[j] = dc * cp[j];      // da_f
    dzg[j] = dc * ai[j];      // da_g
    dcr[j] = dc * af[j];      // into step t-1
    dzi[j] = dc * ag[j];      // da_i
    dzo[j] = dzo[j] * tc[j];  // da_o = dh*tanh(c)
  }
  const float* __restrict zi = a.zg + o, * __restrict zf = zi + m, * __restrict zo = zf + m;
  for (size_t j = j0; j < j1; ++j) dzi[j] = ((zi[j] > -2.5f) & (zi[j] < 2.5f)) ? dzi[j] * 0.2f : 0.0f;
  for (size_t j = j0; j < j1; ++j) dzf[j] = ((zf[j] > -2.5f) & (zf[j] < 2.5f)) ? dzf[j] * 0.2f : 0.0f;
  for (size_t j = j0; j < j1; ++j) dzo[j] = ((zo[j] > -2.5f) & (zo[j] < 2.5f)) ? dzo[j] * 0.2f : 0.0f;
  for (size_t j = j0; j < j1; ++j) dzg[j] = dzg[j] * (1.0f - ag[j] * ag[j]);
}

// Elements [b, e) of the index sample*kc + j, as contiguous runs per sample.
template <class Args, class Run>
void lstm_runs(const Args& a, size_t b, size_t e, Run run) {
  for (size_t i = b; i < e;) {
    const size_t s = i / a.kc, j0 = i - s * a.kc, j1 = std::min(a.kc, j0 + (e - i));
    run(a, s, j0, j1);
    i += j1 - j0;
  }
}
}  // namespace

void lstm_fwd_f32(const LstmFwdArgs& a, size_t b, size_t e) { lstm_runs(a, b, e, lstm_fwd_run); }
void lstm_bwd_f32(const LstmBwdArgs& a, size_t b, size_t e) { lstm_runs(a, b, e, lstm_bwd_run); }

void unary_bwd_f32(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t b, size_t e) {
  switch (op) {
    case UnaryOp::kRelu: return relu_bwd(x, dy, dx, b, e);
    case UnaryOp::kSigmoid: return sigmoid_bwd(y, dy, dx, b, e);
    case UnaryOp::kTanh: return tanh_bwd(y, dy, dx, b, e);
    case UnaryOp::kHardSigmoid: return hard_sigmoid_bwd(x, dy, dx, b, e);
    default: return;  // the backends reject other ops before calling
  }
}

void unary_bwd_f64(UnaryOp op, const float* x, const float* y, const float* dy, float* dx, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) {
    const double g = dy[i];
    double r = 0.0;
    switch (op) {
      case UnaryOp::kRelu: r = x[i] > 0.0f ? g : 0.0; break;
      case UnaryOp::kSigmoid: r = g * (double(y[i]) * (1.0 - double(y[i]))); break;
      case UnaryOp::kTanh: r = g * (1.0 - double(y[i]) * double(y[i])); break;
      case UnaryOp::kHardSigmoid: r = (x[i] > -2.5f && x[i] < 2.5f) ? g * 0.2 : 0.0; break;
      default: break;
    }
    dx[i] = float(r);
  }
}

DETAUDIT_ELEMENTWISE_CLONES void upsample2_fwd(const float* x, float* y, int h, int w, size_t p0, size_t p1) {
  const size_t W2 = size_t(2) * w;
  for (size_t p = p0; p < p1; ++p) {
    const float* xp = x + p * h * w;
    float* yp = y + p * 4 * h * w;
    for (int i = 0; i < h; ++i) {
      float* r0 = yp + size_t(2 * i) * W2;
      for (int j = 0; j < w; ++j) r0[2 * j] = r0[2 * j + 1] = xp[size_t(i) * w + j];
      float* r1 = r0 + W2;
      for (size_t j = 0; j < W2; ++j) r1[j] = r0[j];
    }
  }
}

DETAUDIT_ELEMENTWISE_CLONES void upsample2_bwd_f32(const float* dy, float* dx, int h, int w, size_t p0, size_t p1) {
  const size_t W2 = size_t(2) * w;
  for (size_t p = p0; p < p1; ++p) {
    const float* g = dy + p * 4 * h * w;
    float* out = dx + p * h * w;
    for (int i = 0; i < h; ++i) {
      const float* r0 = g + size_t(2 * i) * W2;
      const float* r1 = r0 + W2;
      for (int j = 0; j < w; ++j)
        out[size_t(i) * w + j] = (r0[2 * j] + r0[2 * j + 1]) + (r1[2 * j] + r1[2 * j + 1]);
    }
  }
}

void upsample2_bwd_f64(const float* dy, float* dx, int h, int w, size_t p0, size_t p1) {
  const size_t W2 = size_t(2) * w;
  for (size_t p = p0; p < p1; ++p) {
    const float* g = dy + p * 4 * h * w;
    float* out = dx + p * h * w;
    for (int i = 0; i < h; ++i) {
      const float* r0 = g + size_t(2 * i) * W2;
      const float* r1 = r0 + W2;
      for (int j = 0; j < w; ++j)
        out[size_t(i) * w + j] =
            float(((double(r0[2 * j]) + double(r0[2 * j + 1])) + double(r1[2 * j])) + double(r1[2 * j + 1]));
    }
  }
}

DETAUDIT_ELEMENTWISE_CLONES void adam_f32(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t b, size_t e) {
  const float omb1 = 1.0f - p.beta1, omb2 = 1.0f - p.beta2;
  for (size_t i = b; i < e; ++i) {
    const float gi = g[i];
    const float mi = p.beta1 * m[i] + omb1 * gi;
    const float vi = p.beta2 * v[i] + omb2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    const float step = (p.lr * (mi / p.bias_correction1)) / (std::sqrt(vi / p.bias_correction2) + p.eps);
    w[i] = w[i] - step;
  }
}

// The oracle: the same formula in double; m, v and w rounded to float when stored.
void adam_f64(const AdamParams& p, float* w, const float* g, float* m, float* v, size_t b, size_t e) {
  const double b1 = p.beta1, b2 = p.beta2;
  for (size_t i = b; i < e; ++i) {
    const double gi = g[i];
    const double mi = b1 * double(m[i]) + (1.0 - b1) * gi;
    const double vi = b2 * double(v[i]) + (1.0 - b2) * (gi * gi);
    m[i] = float(mi);
    v[i] = float(vi);
    const double step =
        (double(p.lr) * (mi / double(p.bias_correction1))) / (std::sqrt(vi / double(p.bias_correction2)) + double(p.eps));
    w[i] = float(double(w[i]) - step);
  }
}

DETAUDIT_ELEMENTWISE_CLONES void sgd_f32(const SgdParams& p, float* w, const float* g, float* vel, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) {
    const float vi = p.momentum * vel[i] + g[i];
    vel[i] = vi;
    w[i] = w[i] - p.lr * vi;
  }
}

void sgd_f64(const SgdParams& p, float* w, const float* g, float* vel, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) {
    const double vi = double(p.momentum) * double(vel[i]) + double(g[i]);
    vel[i] = float(vi);
    w[i] = float(double(w[i]) - double(p.lr) * vi);
  }
}

DETAUDIT_ELEMENTWISE_CLONES void loss_terms_f32(LossOp op, const float* y, const float* t, size_t n, float* d, float* dy, size_t b, size_t e) {
  const float fn = float(n);
  for (size_t i = b; i < e; ++i) {
    const float diff = y[i] - t[i];
    if (op == LossOp::kMse) {
      d[i] = diff;
      if (dy) dy[i] = (diff + diff) / fn;
    } else {
      d[i] = std::fabs(diff);
      if (dy) dy[i] = (diff > 0.0f ? 1.0f : diff < 0.0f ? -1.0f : 0.0f) / fn;
    }
  }
}

}  // namespace detaudit::train_ops
