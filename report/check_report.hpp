// The reports of `check` (gates/check.hpp finds, this renders).
#pragma once
#include <string>

#include "report/document.hpp"  // OutputFormat
#include "contract/check_report.hpp"

namespace detaudit {

// Text for a terminal (every failure listed; long lists of warnings capped with "... and N more"), markdown
// for a PR comment (always under kMarkdownLimit characters, the reports' limit; the baseline's header
// fields and the paths clipped to a few hundred each), or JSON (kCheckSchema: every finding with
// kind, verdict, workload, target, old, new, message).
std::string render_check(const CheckReport& rep, OutputFormat format);
// `md` itself when shorter than `limit`; otherwise its whole lines up to below the limit, a "truncated" line
// and a "</details>" for each <details> block (a line starting "<details>") left open there: never a cut
// UTF-8 character, row or tag.
std::string cap_markdown(const std::string& md, size_t limit);

}  // namespace detaudit
