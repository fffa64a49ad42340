// external: a framework's outputs imported with `detaudit import` (suites/external.cpp); never run.
#include "probes/backends/common.hpp"

#include <fmt/format.h>

namespace detaudit {

namespace {

Promise promise_external(const Spec& t, const Spec&, const std::map<std::string, std::string>&) {
  return nothing(fmt::format("{}: a framework's outputs imported with `detaudit import`; detaudit knows nothing it "
                             "promises",
                             t.str()));
}

}  // namespace

BackendEntry external_backend() {
  BackendEntry e;
  e.name = "external";
  // Any name the spec syntax allows (letters, digits, '_', '-', '.'); name it by framework, version and
  // device ("torch-1.13-cpu"): detaudit cannot see a framework's version, so baselines key it by name.
  e.keys = {{"name", "",
             [](const std::string& v) {
               return v.size() <= 64 ? Status::ok() : Status::invalid("at most 64 characters");
             },
             "framework name, e.g. torch-cpu", [](const std::string& v) { return v; }, ""}};
  e.summary = "a framework's outputs imported with `detaudit import` (never run: see `detaudit export`)";
  e.imported = true;
  e.applicable = always;
  e.promise = promise_external;
  return e;
}

}  // namespace detaudit
