// From a validated target spec to a Backend (inside a worker) and to the environment the worker
// process needs (set by the parent before exec, since libraries read it when they load).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "kernels/backend.hpp"
#include "probes/spec.hpp"

namespace detaudit {

// Environment variables for the worker of this target. An empty value means "unset it".
std::map<std::string, std::string> target_environment(const Spec& target);

// Creates the backend in this process. nullptr with *st = unavailable/unsupported when it cannot run
// here (no device, library not built), which the probes record as `skipped` with that reason.
std::unique_ptr<Backend> make_target_backend(const Spec& target, Status* st);

}  // namespace detaudit
