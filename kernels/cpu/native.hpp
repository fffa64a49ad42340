// cpu: detaudit's own multithreaded kernels with a selectable reduction order. All orders share one
// fast code path (packed, register-blocked micro-kernels); only the way partial sums combine differs.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/backend.hpp"

namespace detaudit {

enum class ReduceOrder : uint8_t {
  // determinism: one running sum in index order. Same bits for every thread count.
  kSequential,
  // determinism: fixed-size chunks combined by a pairwise (binary) tree. Same bits for every thread count.
  kPairwise,
  // determinism: one contiguous block per thread, partials combined in thread order.
  // Deterministic for a given thread count; the bits change with the thread count.
  kBlocked,
  // determinism: the work cut into chunks (as a GPU has blocks; see README for the sizes); each chunk's partial sum is
  // added into the result in completion order. A real race, like GPU atomics: NOT deterministic.
  kAtomic,
  // determinism: kernels/portable.hpp's fixed trees and spelled-out operations: the same bits for every
  // thread count, every isa, and on every GPU (cuda?order=portable). A backend of its own
  // (kernels/cpu/portable.cpp); make_cpu_native returns it.
  kPortable,
};
const char* to_string(ReduceOrder o);
bool parse_reduce_order(const std::string& s, ReduceOrder* out);

// Which vector code runs. Every ISA gives the same bits (explicit FMAs, fixed lane layouts); forcing
// one exists to test exactly that. kAuto picks AVX-512, else AVX2+FMA, else scalar, at run time.
enum class CpuIsa : uint8_t { kAuto, kAvx512, kAvx2, kScalar };
const char* to_string(CpuIsa isa);
bool parse_cpu_isa(const std::string& s, CpuIsa* out);
// Whether this CPU can run `isa` (kAuto and kScalar: always).
bool cpu_isa_supported(CpuIsa isa);
// The instruction set `isa` runs on this CPU: kAuto resolved to the widest it has (AVX-512, AVX2+FMA,
// scalar); any other as it is.
CpuIsa resolved_cpu_isa(CpuIsa isa);

// How 3x3 stride-1 convolutions are computed. kDirect: the im2col gemm (one reduction over C*R*S).
// kWinograd: Winograd F(4x4, 3x3) (kernels/cpu/winograd.hpp), 4x fewer multiplies in its gemms, its own
// bits (the transforms change the terms and the sums run over C or tiles); other shapes stay direct.
enum class ConvAlgo : uint8_t { kDirect, kWinograd };
const char* to_string(ConvAlgo a);
bool parse_conv_algo(const std::string& s, ConvAlgo* out);

struct CpuNativeOptions {
  int threads = 1;
  ReduceOrder order = ReduceOrder::kBlocked;
  // Test hook for kAtomic: when nonzero, chunks run on one thread and their partials are combined in
  // a permutation derived from this seed, so a test can force two different completion orders.
  uint64_t forced_atomic_order_seed = 0;
  // A forced ISA the CPU lacks makes every op return Status::unavailable (never SIGILL).
  CpuIsa isa = CpuIsa::kAuto;
  // Not for order=kPortable (its own backend, whose bits are fixed on every CPU and GPU):
  // make_cpu_native returns nullptr for that combination.
  ConvAlgo conv = ConvAlgo::kDirect;
  // conv=winograd takes a 3x3 stride-1 convolution only when min(C, K) is at least this: with fewer
  // channels its transforms cost more than the multiplies they save (measured on the PredNet layers:
  // C or K of 2 to 32 ran slower than direct, 64 and up faster). A fixed function of the shape,
  // so the bits stay a function of the spec and the workload. Tests lower it to reach every shape.
  int winograd_min_channels = 64;
};

// nullptr when the options contradict each other (order=portable with conv=winograd).
std::unique_ptr<Backend> make_cpu_native(const CpuNativeOptions& opts);

}  // namespace detaudit
