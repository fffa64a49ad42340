#include "contract/comparison.hpp"

namespace detaudit {

const char* to_string(CellComparison::Kind k) {
  switch (k) {
    case CellComparison::Kind::kSame: return "same bits";
    case CellComparison::Kind::kChanged: return "changed";
    case CellComparison::Kind::kOnlyA: return "only in A";
    case CellComparison::Kind::kOnlyB: return "only in B";
    case CellComparison::Kind::kVaries: return "varies";
  }
  return "changed";
}

nlohmann::json to_json(const Comparison& c) {
  auto side = [](const std::string& status, const std::vector<std::string>& fps, int distinct) -> nlohmann::json {
    if (status.empty()) return nullptr;
    return {{"status", status}, {"fingerprints", fps}, {"distinct", distinct}};
  };
  nlohmann::json cells = nlohmann::json::array();
  for (auto& x : c.cells)
    cells.push_back({{"workload", x.workload},
                     {"target", x.target},
                     {"kind", to_string(x.kind)},
                     {"a", side(x.status_a, x.fps_a, x.distinct_a)},
                     {"b", side(x.status_b, x.fps_b, x.distinct_b)}});
  nlohmann::json diffs = nlohmann::json::array();
  for (auto& d : c.differences) diffs.push_back({{"field", d.field}, {"a", d.a}, {"b", d.b}});
  nlohmann::json groups = nlohmann::json::array();
  for (auto& w : c.groups) {
    nlohmann::json gs = nlohmann::json::array();
    for (auto& g : w.groups) gs.push_back({{"fingerprints", g.fingerprints}, {"targets", g.targets}});
    groups.push_back({{"workload", w.workload}, {"groups", gs}});
  }
  return {{"a", c.a},
          {"b", c.b},
          {"summary", {{"same", c.same}, {"changed", c.changed}, {"only_a", c.only_a}, {"only_b", c.only_b}, {"varies", c.varies}}},
          {"cells", cells},
          {"differences", diffs},
          {"groups", groups}};
}

}  // namespace detaudit
