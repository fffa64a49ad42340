// The reports of `diverge` (suites/diverge.hpp finds the first divergence, this renders it).
#pragma once
#include <string>

#include "contract/diverge_result.hpp"
#include "kernels/status.hpp"

namespace detaudit {

// <out_dir>/diverge.json, diverge.md and diverge.html (each written atomically).
Status write_diverge_outputs(const DivergeResult& r, const std::string& out_dir);
// The four outputs' destinations (diverge.svg, .json, .md, .html) as write_diverge_outputs checks them: checked
// before a run too, so that a run whose report would be refused stops before it replaces any trace.
Status check_diverge_destinations(const std::string& out_dir);

}  // namespace detaudit
