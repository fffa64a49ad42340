#include "kernels/backend.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace detaudit {

namespace {
// The reason names the op, not the target: the report groups identical reasons across targets.
Status not_provided(const Backend& b, const char* op) {
  return Status::unsupported(std::string(op) + " is not provided by this backend");
}
}  // namespace

void* Backend::alloc(size_t bytes) {
  // 64-byte alignment for vector loads; round the size up as aligned_alloc requires.
  size_t rounded = (bytes + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
}
void Backend::free(void* p) { std::free(p); }
Status Backend::upload(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::ok();
}
Status Backend::download(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  return Status::ok();
}
Status Backend::zero(void* p, size_t bytes) {
  std::memset(p, 0, bytes);
  return Status::ok();
}
Status Backend::fingerprint(const void* p, size_t bytes, Fingerprint* out) {
  *out = fingerprint_bytes(p, bytes);
  return Status::ok();
}

Status Backend::gemm(Trans, Trans, int, int, int, float, const float*, int, const float*, int, float,
                     float*, int) {
  return not_provided(*this, "gemm");
}
Status Backend::gemm_f64(Trans, Trans, int, int, int, double, const double*, int, const double*, int,
                         double, double*, int) {
  return not_provided(*this, "gemm (f64)");
}
Status Backend::conv2d_fwd(const ConvShape&, const float*, const float*, float*) {
  return not_provided(*this, "conv2d forward");
}
Status Backend::conv2d_fwd_bias(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  DETAUDIT_RETURN_IF_ERROR(conv2d_fwd(s, x, w, y));
  return bias_add(y, bias, size_t(s.n), size_t(s.k), size_t(s.p()) * s.q());
}
Status Backend::conv2d_bwd_data(const ConvShape&, const float*, const float*, float*) {
  return not_provided(*this, "conv2d backward-data");
}
Status Backend::conv2d_bwd_filter(const ConvShape&, const float*, const float*, float*) {
  return not_provided(*this, "conv2d backward-filter");
}
Status Backend::maxpool_fwd(const PoolShape&, const float*, float*) {
  return not_provided(*this, "max pooling forward");
}
Status Backend::maxpool_bwd(const PoolShape&, const float*, const float*, const float*, float*) {
  return not_provided(*this, "max pooling backward");
}
Status Backend::reduce(ReduceOp op, const float*, const float*, size_t, float*) {
  return not_provided(*this, (std::string("reduce ") + to_string(op)).c_str());
}
Status Backend::softmax(const float*, float*, size_t, size_t) { return not_provided(*this, "softmax"); }
Status Backend::unary(UnaryOp op, const float*, float*, size_t) {
  return not_provided(*this, to_string(op));
}
Status Backend::binary(BinaryOp op, const float*, const float*, float*, size_t) {
  return not_provided(*this, to_string(op));
}
Status Backend::axpy(size_t, float, const float*, float*) { return not_provided(*this, "axpy"); }
Status Backend::bias_add(float*, const float*, size_t, size_t, size_t) { return not_provided(*this, "bias add"); }
Status Backend::bias_grad(const float*, float*, size_t, size_t, size_t) {
  return not_provided(*this, "bias gradient");
}
Status Backend::unary_bwd(UnaryOp op, const float*, const float*, const float*, float*, size_t) {
  return not_provided(*this, (std::string(to_string(op)) + " backward").c_str());
}
Status Backend::upsample2_fwd(const float*, float*, size_t, int, int) {
  return not_provided(*this, "upsample2 forward");
}
Status Backend::upsample2_bwd(const float*, float*, size_t, int, int) {
  return not_provided(*this, "upsample2 backward");
}
Status Backend::copy_2d(size_t, size_t, const float*, size_t, float*, size_t) {
  return not_provided(*this, "copy_2d");
}
Status Backend::fill(float*, float, size_t) { return not_provided(*this, "fill"); }
Status Backend::lstm_cell_fwd(const LstmFwdArgs&) { return Status::unsupported("lstm_cell_fwd"); }
Status Backend::lstm_cell_bwd(const LstmBwdArgs&) { return Status::unsupported("lstm_cell_bwd"); }
Status Backend::scale(float*, float, size_t) { return not_provided(*this, "scale"); }
Status Backend::loss(LossOp op, const float*, const float*, size_t, float*, float*) {
  return not_provided(*this, (std::string(to_string(op)) + " loss").c_str());
}
Status Backend::adam_step(const AdamParams&, float*, const float*, float*, float*, size_t) {
  return not_provided(*this, "adam step");
}
Status Backend::sgd_step(const SgdParams&, float*, const float*, float*, size_t) {
  return not_provided(*this, "sgd step");
}

const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kDot: return "dot";
    case ReduceOp::kNorm2: return "norm";
  }
  return "?";
}
const char* to_string(UnaryOp op) {
  switch (op) {
    case UnaryOp::kCopy: return "copy";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kHardSigmoid: return "hard_sigmoid";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kSquare: return "square";
  }
  return "?";
}
const char* to_string(LossOp op) {
  switch (op) {
    case LossOp::kMse: return "mse";
    case LossOp::kL1: return "l1";
  }
  return "?";
}
const char* to_string(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
    case BinaryOp::kMax: return "max";
    case BinaryOp::kMin: return "min";
  }
  return "?";
}

}  // namespace detaudit
