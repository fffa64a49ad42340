// What the layers above results need to know of a target without seeing the backend registry
// (probes/registry.hpp): the analysis of training runs is handed a function that answers it
// (probes' target_facts), so it reads facts and never names a backend.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace detaudit {

struct TargetFacts {
  bool known = false;      // the spec parsed and its backend exists
  std::string device_kind = "host";  // where it runs: "host" (the CPU), or the accelerator's kind ("cuda")
  int device = -1;         // the device index, for a target on an accelerator
  // Its bits are one implementation on every device (order=portable): they depend on neither the backend,
  // the thread count, the isa, the device nor a library.
  bool portable = false;
  // The canonical spec without its device index: what decides the bits, hardware apart.
  std::string implementation;
  // Keys of the machine's "libraries" whose versions its bits depend on (empty for a portable target).
  std::vector<std::string> libraries;
  // Keys of the machine's "libraries" that say how the build and the CPU select its code (compiler, C
  // library, resolved ISA or core); empty for a portable target.
  std::vector<std::string> build;
};

using TargetFactsFn = std::function<TargetFacts(const std::string& target)>;

}  // namespace detaudit
