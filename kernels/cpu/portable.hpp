// cpu?order=portable (kernels/portable.hpp has the arithmetic; kernels/cpu/portable.cpp runs it).
#pragma once
#include <memory>

#include "kernels/backend.hpp"
#include "kernels/cpu/native.hpp"

namespace detaudit {

// `threads` split output elements; `isa` chooses which compilation of the fma-holding loops runs
// (kAuto: the widest this CPU has). A forced ISA the CPU lacks makes every op return unavailable.
std::unique_ptr<Backend> make_cpu_portable(int threads, CpuIsa isa);

}  // namespace detaudit
