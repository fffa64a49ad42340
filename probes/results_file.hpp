// results.json as every command reads it: the contract's checks (contract/results.hpp, load_results),
// then what only the backend registry can check: every target and workload is a spec this version
// parses. Specs are rewritten in canonical form, so a file of an older version that spelled a default
// out, or put keys in another order, meets this version's cells.
#pragma once
#include <set>
#include <string>

#include "contract/results.hpp"

namespace detaudit {

// Invalid, with one line naming the file and the field ("R/results.json: observations[3].target: ..."),
// for a target or workload that does not parse.
Status canonicalize_specs(Results* r, const std::string& path);

// `detaudit probe`'s defaults: the suite and the time limit of a command that names neither (the plan of a run,
// resumed or not, is always its last command's).
inline constexpr const char* kDefaultProbeSuite = "quick";
inline constexpr double kDefaultProbeTimeoutS = 120;

// What a probe's recorded command line asks for and its plan holds: "" when they agree, else one clause.
// --targets and --workloads (any spelling of the same specs, `key=all` expanded; a plan that names its suite is
// then a custom one) and --repeats are compared where the command names them (the suite decides the rest);
// --suite and --timeout always, a command that names neither asking for the defaults above. A command that is not
// a probe's says nothing here. `plan_targets`, `plan_workloads`: the plan's, canonical.
std::string command_contradicts_plan(const std::string& command, const std::set<std::string>& plan_targets,
                                     const std::set<std::string>& plan_workloads, const nlohmann::json& plan);

// load_results, then canonicalize_specs.
Status load_checked_results(const std::string& path, Results* out);

// save_results of results that every reader takes: read back as load_checked_results reads them first, and
// written only if they pass (a run resumed from results that were edited can end in a file no command reads;
// the run stops with the reader's one line instead of writing it).
Status save_checked_results(const std::string& path, const Results& r);

}  // namespace detaudit
