// One logical CPU's place on the machine.
#pragma once

namespace detaudit {

// One logical CPU: its number as the operating system gives it (taskset, /proc/cpuinfo, `lscpu`'s CPU column), the
// core it belongs to (hwloc's logical index over the machine: `lscpu`'s CORE column) and its package (the physical
// package id: `lscpu`'s SOCKET column). -1 where the machine does not say.
struct CpuPlace {
  int cpu = -1, core = -1, package = -1;
};

}  // namespace detaudit
