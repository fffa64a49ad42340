// OpenBLAS. Its kernel choice (OPENBLAS_CORETYPE) is read when the library loads, so the probes run each openblas
// target in its own worker process with its environment; the factory applies only what can be set at run time
// (threads) and reports what was chosen.
#pragma once
#include <string>

#include "kernels/backend.hpp"

namespace detaudit {

struct OpenblasOptions {
  int threads = 1;
};
// Returns nullptr and sets *st when detaudit was built without OpenBLAS.
BackendOr make_openblas(const OpenblasOptions& opts);
// "OpenBLAS 0.3.21 DYNAMIC_ARCH ... / core Haswell", or "not built".
std::string openblas_version_string();
std::string openblas_corename();

}  // namespace detaudit
