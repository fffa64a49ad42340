// Argument checks shared by every backend, so all of them reject the same bad shapes with the same words.
#pragma once
#include "kernels/backend.hpp"

namespace detaudit {

// Row-major gemm: sizes non-negative, leading dimensions at least the row lengths of op(A), op(B), C.
Status validate_gemm(Trans ta, Trans tb, int m, int n, int k, int lda, int ldb, int ldc);
// Positive sizes, pad >= 0, the filter fits the padded input, and every im2col extent fits an int.
Status validate_conv(const ConvShape& s);
// Positive sizes and a window that fits the input.
Status validate_pool(const PoolShape& s);

}  // namespace detaudit
