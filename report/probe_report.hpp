// The probe report: verdict first (the FAIL list, counts per verdict, the WARN list), then the
// determinism matrix with its pictures, bit-identical groups, claimed vs observed determinism, kernel
// attribution, batch invariance, timing, and the machine. Verdicts are rendered as results.json holds
// them (gates/verdict.cpp judges); observations without one are shown by their status.
#pragma once
#include <string>
#include <vector>

#include "report/document.hpp"
#include "contract/results.hpp"

namespace detaudit {

// The probe sections, verdict to timing (build_report in train_report.hpp puts a report together).
void add_probe_sections(Document& d, const Results& r);
// The lines under the title of every report: the command line, tool version and git commit, when it
// ran, and the machine in one line (the full description is the machine section at the end).
void add_run_lines(Document& d, const Results& r);
void add_machine_section(Document& d, const nlohmann::json& machine);
// One line per imported target (external?name=..., detaudit import): the target whose outputs it matches
// bit for bit on the most workloads ("... matches T bit for bit on W of N workloads (...)"), or "matches no
// target"; plain text (the report and the import command's output).
std::vector<std::string> external_match_lines(const std::vector<Observation>& obs);

// report.md stays under this many characters whatever the suite (GitHub's comment limit is 65,536):
// every list and table of a report has a markdown budget, and report.html holds everything.
inline constexpr size_t kMarkdownLimit = 60000;

}  // namespace detaudit
