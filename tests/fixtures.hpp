// Shared test fixtures.
#pragma once
#include <optional>
#include <string>

#include "contract/verdict.hpp"

namespace detaudit::test {

// A verdict by its name as results.json spells it ("PASS", ...); "" is a cell not judged.
inline std::optional<Verdict> verdict_named(const std::string& name) {
  Verdict v;
  if (name.empty() || !parse_verdict(name, &v)) return std::nullopt;
  return v;
}

}  // namespace detaudit::test
