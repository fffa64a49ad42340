// cpu-ref: the oracle. Fixed order, double accumulation, simple enough to trust at a glance.
// determinism: every sum runs in index order in one double accumulator, single-threaded; the result
// is rounded to float once, at the end. Same bits on every x86-64 machine and every run.
#pragma once
#include <memory>

#include "kernels/backend.hpp"

namespace detaudit {
std::unique_ptr<Backend> make_cpu_ref();
}
