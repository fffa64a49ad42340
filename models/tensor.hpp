// Tensors in a target's memory: host memory for CPU backends, device memory for GPU backends. A
// Tensor owns its storage (shared with its views) and knows its Backend, which must outlive it.
#pragma once
#include <array>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace detaudit {

// Up to 4 dims, row-major (NCHW for images, rows x cols for matrices).
struct Shape {
  std::array<int, 4> d{1, 1, 1, 1};
  int rank = 0;
  Shape() = default;
  Shape(std::initializer_list<int> dims);
  size_t size() const;
  int operator[](int i) const { return d[i]; }
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[64,1,28,28]"
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates shape.size() floats in b's memory (contents undefined).
  static Status create(Backend* b, const Shape& shape, Tensor* out);
  // Allocates and uploads `host` (host.size() must equal shape.size()).
  static Status from_host(Backend* b, const Shape& shape, const std::vector<float>& host, Tensor* out);

  bool empty() const { return data_ == nullptr; }
  Backend* backend() const { return backend_; }
  const Shape& shape() const { return shape_; }
  size_t size() const { return shape_.size(); }
  size_t bytes() const { return size() * sizeof(float); }
  float* data() const { return data_; }

  // A view of the same storage with another shape of the same size (no copy).
  Status reshape(const Shape& shape, Tensor* view) const;
  Status upload(const std::vector<float>& host) const;
  Status upload(const float* host, size_t n) const;
  Status download(std::vector<float>* host) const;
  Status zero() const;

 private:
  Backend* backend_ = nullptr;
  Shape shape_;
  std::shared_ptr<void> storage_;
  float* data_ = nullptr;
};

// Allocates `out` unless it already has exactly this shape on this backend (workspaces are kept
// across steps: no allocation in the steady state).
Status ensure(Backend* b, const Shape& shape, Tensor* out);

}  // namespace detaudit
