// A baseline's file (baseline.json, detaudit-baseline/1, schemas/baseline.schema.json): written from a Baseline
// (gates/baseline.hpp makes one of a run's results) and read back, strictly, held to what the judges give.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "gates/baseline.hpp"

namespace detaudit {

nlohmann::json to_json(const Baseline& b);
// The text of the file: sorted keys, two-space indent, a final newline. The same Baseline gives the
// same bytes.
std::string baseline_text(const Baseline& b);
// Writes atomically (write_file_atomic).
Status save_baseline(const std::string& path, const Baseline& b);
// Strict, as load_results: a missing file, truncated or invalid JSON, a wrong schema or a field of the
// wrong type is a failure of one line naming the file and the field's path. Never throws.
Status load_baseline(const std::string& path, Baseline* out);

// `detaudit baseline save DIR [--out FILE]`: loads DIR/results.json, writes the baseline to `out`
// (empty: DIR/baseline.json). A failure of one line when DIR holds nothing to make a baseline of.
struct BaselineSaved {
  std::string path;  // where it was written
  size_t cells = 0, training = 0, keys = 0;
  bool unfinished = false;  // DIR's run has no finished_at (interrupted or still running)
};
Status run_baseline_save(const std::string& dir, const std::string& out, BaselineSaved* saved);

}  // namespace detaudit
