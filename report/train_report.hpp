// The training report: the paper's table, variance components with intervals, the confounding guard,
// learning curves and their phases, the machine.
#pragma once
#include <string>

#include "report/document.hpp"
#include "contract/results.hpp"

namespace detaudit {

void add_train_sections(Document& d, const Results& r);

// The report of any results document: probe sections when it holds observations, training sections
// when it holds training runs, the machine last.
Document build_report(const Results& r);
// Writes DIR/report.md and/or DIR/report.html (atomically); the failure of the write that failed.
Status write_reports(const std::string& dir, const Results& r, bool md = true, bool html = true);

}  // namespace detaudit
