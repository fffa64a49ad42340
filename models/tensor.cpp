#include "models/tensor.hpp"

namespace detaudit {

Shape::Shape(std::initializer_list<int> dims) {
  for (int v : dims)
    if (rank < 4) d[rank++] = v;
}
size_t Shape::size() const {
  size_t n = 1;
  for (int i = 0; i < rank; ++i) n *= size_t(d[i] < 0 ? 0 : d[i]);
  return n;
}
bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (d[i] != o.d[i]) return false;
  return true;
}
std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

Status Tensor::create(Backend* b, const Shape& shape, Tensor* out) {
  if (!b) return Status::invalid("tensor: no backend");
  if (shape.rank < 1 || shape.size() == 0) return Status::invalid("tensor: empty shape " + shape.str());
  void* p = b->alloc(shape.size() * sizeof(float));
  if (!p) return Status::error("tensor: out of memory for " + shape.str() + " on " + b->name());
  Tensor t;
  t.backend_ = b;
  t.shape_ = shape;
  t.storage_ = std::shared_ptr<void>(p, [b](void* q) { b->free(q); });
  t.data_ = static_cast<float*>(p);
  *out = std::move(t);
  return Status::ok();
}

Status Tensor::from_host(Backend* b, const Shape& shape, const std::vector<float>& host, Tensor* out) {
  DETAUDIT_RETURN_IF_ERROR(create(b, shape, out));
  return out->upload(host);
}

Status Tensor::reshape(const Shape& shape, Tensor* view) const {
  if (shape.size() != size()) return Status::invalid("tensor: cannot view " + shape_.str() + " as " + shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  *view = std::move(t);
  return Status::ok();
}

Status Tensor::upload(const std::vector<float>& host) const { return upload(host.data(), host.size()); }
Status Tensor::upload(const float* host, size_t n) const {
  if (n != size()) return Status::invalid("tensor: upload of " + std::to_string(n) + " floats into " + shape_.str());
  return backend_->upload(data_, host, bytes());
}
Status Tensor::download(std::vector<float>* host) const {
  host->resize(size());
  return backend_->download(host->data(), data_, bytes());
}
Status Tensor::zero() const { return backend_->zero(data_, bytes()); }

Status ensure(Backend* b, const Shape& shape, Tensor* out) {
  if (!out->empty() && out->backend() == b && out->shape() == shape) return Status::ok();
  return Tensor::create(b, shape, out);
}

}  // namespace detaudit
