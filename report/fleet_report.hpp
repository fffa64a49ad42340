// The fleet report (report.md, report.html of a fleet directory), rendered from its consensus (FleetOutcome, what
// fleet.json holds): one row per node (host, rank, machine key, verdict), the findings with the disagreeing cells
// first, the machine key groups and the fields that split them, the collectives, and a heat map of nodes x cells.
#pragma once
#include <string>

#include "contract/atomic_file.hpp"
#include "contract/fleet_outcome.hpp"
#include "report/document.hpp"

namespace detaudit {

Document build_fleet_report(const FleetOutcome& fleet);
// DIR/report.md and DIR/report.html, atomically.
Status write_fleet_reports(const std::string& dir, const FleetOutcome& fleet);

}  // namespace detaudit
