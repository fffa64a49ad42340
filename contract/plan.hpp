// A results directory's plan (results.json "plan") as a kind of run: a probe suite or a training design.
// What two runs must share to be compared (compare), checked against each other (check, qualify) or
// merged into one analysis (analyze).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace detaudit {

// The probe suites a plan can name: the two the tool defines, and "import" (outputs another program
// computed, detaudit import).
std::vector<std::string> probe_suite_names();
bool is_plan_suite(const std::string& name);

// "probe suite quick", "training autoencoder/sony2021", "probe" (a plan without a suite).
std::string plan_kind(const nlohmann::json& plan);
// Whether the plan is a training design's (plan.kind "train").
bool is_training_plan(const nlohmann::json& plan);

// The first field in which two plans differ as runs of one kind: "" when they are the same kind and,
// for training, the same design; else "<field> is <a> vs <b>" (kind; suite when `suite_matters`; the
// design's model, design, seeds, batches, window, replicates, batch size, data seed, initial-seed base
// and PredNet configuration; the data's pixel fingerprint). The targets may differ.
std::string plan_difference(const nlohmann::json& a, const nlohmann::json& b, bool suite_matters);

}  // namespace detaudit
