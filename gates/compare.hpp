// Two results directories side by side (two machines, drivers or library versions): which cells kept
// their bits, which changed, which ran on one side only, what differs between the machines and the
// software, and which targets of either run are bit-identical to which.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/comparison.hpp"
#include "contract/results.hpp"

namespace detaudit {

Comparison compare_results(const Results& a, const Results& b, const std::string& name_a, const std::string& name_b);


}  // namespace detaudit
