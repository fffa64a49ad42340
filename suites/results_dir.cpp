#include "suites/results_dir.hpp"

#include "contract/atomic_file.hpp"
#include "probes/results_file.hpp"

namespace detaudit {

Status ResultsDir::open_for_writing() {
  DETAUDIT_RETURN_IF_ERROR(not_a_fleet_directory(dir_));
  DETAUDIT_RETURN_IF_ERROR(check_destination(results_path()));
  return lock();
}

Status ResultsDir::load(Results* out) const { return load_checked_results(results_path(), out); }

Status ResultsDir::save(const Results& r) const { return save_results(results_path(), r); }

Status ResultsDir::save_checked(const Results& r) const { return save_checked_results(results_path(), r); }

}  // namespace detaudit
