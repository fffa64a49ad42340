// The reports of `compare` (gates/compare.hpp compares, this renders).
#pragma once
#include <string>

#include "report/document.hpp"  // OutputFormat
#include "contract/comparison.hpp"

namespace detaudit {

// Markdown stays under kMarkdownLimit (report/probe_report.hpp: a PR comment): long lists end with
// "... and N more". Text lists the cells that differ (and vary); `all` lists every cell and the
// bit-identical groups too.
std::string render_comparison(const Comparison& c, OutputFormat f, bool all = false);

}  // namespace detaudit
