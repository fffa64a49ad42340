#include "kernels/checks.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

namespace detaudit {

Status validate_gemm(Trans ta, Trans tb, int m, int n, int k, int lda, int ldb, int ldc) {
  if (m < 0 || n < 0 || k < 0)
    return Status::invalid("gemm: negative size m=" + std::to_string(m) + " n=" + std::to_string(n) +
                           " k=" + std::to_string(k));
  int min_lda = std::max(1, ta == Trans::kN ? k : m);
  int min_ldb = std::max(1, tb == Trans::kN ? n : k);
  if (lda < min_lda) return Status::invalid("gemm: lda=" + std::to_string(lda) + " < " + std::to_string(min_lda));
  if (ldb < min_ldb) return Status::invalid("gemm: ldb=" + std::to_string(ldb) + " < " + std::to_string(min_ldb));
  if (ldc < std::max(1, n)) return Status::invalid("gemm: ldc=" + std::to_string(ldc) + " < n");
  return Status::ok();
}

Status validate_conv(const ConvShape& s) {
  if (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1 || s.k < 1 || s.r < 1 || s.s < 1 || s.stride < 1 || s.pad < 0)
    return Status::invalid("conv2d: sizes must be positive (pad >= 0)");
  if (s.h + 2 * s.pad < s.r || s.w + 2 * s.pad < s.s) return Status::invalid("conv2d: filter larger than padded input");
  size_t crs = size_t(s.c) * s.r * s.s, pq = size_t(s.p()) * s.q();
  if (crs > size_t(INT32_MAX) || pq > size_t(INT32_MAX) || crs * pq > size_t(INT32_MAX) ||
      size_t(s.k) * pq > size_t(INT32_MAX))
    return Status::invalid("conv2d: shape exceeds the int range of an im2col gemm");
  return Status::ok();
}

Status validate_pool(const PoolShape& s) {
  if (s.n < 1 || s.c < 1 || s.window < 1 || s.stride < 1 || s.h < s.window || s.w < s.window)
    return Status::invalid("maxpool: sizes must be positive and the window must fit the input");
  return Status::ok();
}

}  // namespace detaudit
