// The reports of `compare` (gates/compare.hpp compares, this renders).
#pragma once
#include <string>

#include "report/document.hpp"  // OutputFormat
#include "contract/comparison.hpp"

namespace detaudit {

// Markdown stays under kMarkdownLimit (report/probe_report.hpp: a PR comment): long lists end with
// "... and N more".
std::string render_comparison(const Comparison& c, OutputFormat f);

}  // namespace detaudit
