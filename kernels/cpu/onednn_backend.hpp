// oneDNN. Its kernel choice (ONEDNN_MAX_CPU_ISA) is read when the library loads, so the probes run each onednn
// target in its own worker process with its environment; the factories apply only what can be set at run time
// (threads) and report what was chosen.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/backend.hpp"

namespace detaudit {

struct OnednnOptions {
  int threads = 1;
};
BackendOr make_onednn(const OnednnOptions& opts);
// Memory layout oneDNN's conv2d primitives work in. kPlain asks for NCHW / KCRS directly, which
// oneDNN 2.6 serves with its im2col + sgemm path ("x64:gemm:jit"); kBlocked lets it choose
// (format_tag::any), which selects its direct JIT kernels ("jit:avx512_core", "jit:avx2", ...) as
// frameworks do, with exact reorders to and from the plain user tensors. The two give different
// bits. make_onednn(opts) is kPlain; the blocked backend is named "onednn?layout=blocked&...".
enum class OnednnConvLayout : uint8_t { kPlain, kBlocked };
BackendOr make_onednn(const OnednnOptions& opts, OnednnConvLayout layout);
std::string onednn_version_string();
// The instruction set oneDNN's kernels use in this process (ONEDNN_MAX_CPU_ISA applied): "AVX2", ...;
// "not built" without oneDNN.
std::string onednn_effective_isa();

}  // namespace detaudit
