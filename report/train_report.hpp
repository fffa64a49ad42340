// The training report: the paper's table, variance components with intervals, the confounding guard,
// learning curves and their phases, the machine.
#pragma once
#include <string>

#include "report/document.hpp"
#include "report/results.hpp"

namespace detaudit {

void add_train_sections(Document& d, const Results& r);
bool write_train_reports(const std::string& dir, const Results& r, std::string* err);

}  // namespace detaudit
