// A typed training run from the JSON a test writes (the results contract), checked as results.json is:
// through its text, so that {"seed", 1000} reads back as the unsigned integer a file holds.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "contract/training_run.hpp"

namespace detaudit {

inline TrainingRun training_run(const nlohmann::json& j) {
  TrainingRun r;
  if (Status st = from_json(nlohmann::json::parse(j.dump()), &r, "test run"); !st) ADD_FAILURE() << st.message();
  return r;
}

}  // namespace detaudit
