#include "contract/comparison.hpp"

namespace detaudit {

const char* to_string(CellComparison::Kind k) {
  switch (k) {
    case CellComparison::Kind::kSame: return "same bits";
    case CellComparison::Kind::kChanged:
      return "bits changed";
    case CellComparison::Kind::kOnlyA: return "only in A";
    case CellComparison::Kind::kOnlyB: return "only in B";
    case CellComparison::Kind::kVaries: return "varies";
  }
  return "bits changed";
}

const char* json_name(CellComparison::Kind k) {
  switch (k) {
    case CellComparison::Kind::kSame:
      return "same";
    case CellComparison::Kind::kChanged:
      return "bits_changed";
    case CellComparison::Kind::kOnlyA:
      return "only_a";
    case CellComparison::Kind::kOnlyB:
      return "only_b";
    case CellComparison::Kind::kVaries:
      return "varies";
  }
  return "bits_changed";
}

nlohmann::json to_json(const Comparison& c) {
  auto side = [](const std::string& status, const std::vector<std::string>& fps, int distinct,
                 const std::string& rows) -> nlohmann::json {
    if (status.empty()) return nullptr;
    nlohmann::json s = {{"status", status}, {"fingerprints", fps}, {"distinct", distinct}};
    if (!rows.empty()) s["rows_fingerprint"] = rows;
    return s;
  };
  nlohmann::json cells = nlohmann::json::array();
  for (auto& x : c.cells)
    cells.push_back({{"workload", x.workload},
                     {"target", x.target},
                     {"kind", json_name(x.kind)},
                     {"a", side(x.status_a, x.fps_a, x.distinct_a, x.rows_a)},
                     {"b", side(x.status_b, x.fps_b, x.distinct_b, x.rows_b)}});
  nlohmann::json diffs = nlohmann::json::array();
  for (auto& d : c.differences) diffs.push_back({{"field", d.field}, {"a", d.a}, {"b", d.b}});
  nlohmann::json groups = nlohmann::json::array();
  for (auto& w : c.groups) {
    nlohmann::json gs = nlohmann::json::array();
    for (auto& g : w.groups) gs.push_back({{"fingerprints", g.fingerprints}, {"targets", g.targets}});
    groups.push_back({{"workload", w.workload}, {"groups", gs}});
  }
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json training = nlohmann::json::array();
  for (auto& t : c.training)
    training.push_back(
        {{"condition", t.condition},
         {"target", t.target},
         {"kind", json_name(t.kind)},
         {"deterministic", t.deterministic},
         {"a", {{"runs", t.runs_a}, {"finished", t.finished_a}, {"mean", opt(t.mean_a)}, {"sd", opt(t.sd_a)}}},
         {"b", {{"runs", t.runs_b}, {"finished", t.finished_b}, {"mean", opt(t.mean_b)}, {"sd", opt(t.sd_b)}}},
         {"runs_matched", t.runs_matched},
         {"runs_same_bits", t.runs_same_bits},
         {"first_difference", t.first_difference}});
  return {{"a", c.a},
          {"b", c.b},
          {"kind", c.kind},
          {"summary",
           {{"same", c.same},
            {"bits_changed", c.changed},
            {"only_a", c.only_a},
            {"only_b", c.only_b},
            {"varies", c.varies}}},
          {"training_summary",
           {{"same", c.training_same},
            {"bits_changed", c.training_changed},
            {"only_a", c.training_only_a},
            {"only_b", c.training_only_b},
            {"varies", c.training_varies}}},
          {"cells", cells},
          {"training", training},
          {"differences", diffs},
          {"groups", groups}};
}

}  // namespace detaudit
