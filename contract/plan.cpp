#include "contract/plan.hpp"

#include <fmt/format.h>

namespace detaudit {

namespace {

// The fields of a design that two runs must share (targets may differ; data_dir is a path on each
// machine, the data's identity is its pixel fingerprint, plan.data_fingerprint).
constexpr const char* kDesignFields[] = {"model",      "design",     "seeds",     "batches",        "window",
                                         "replicates", "batch_size", "data_seed", "init_seed_base", "prednet_config"};

nlohmann::json field_of(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nlohmann::json(nullptr) : *it;
}

std::string value_text(const nlohmann::json& v) { return v.is_null() ? "(absent)" : v.dump(); }

}  // namespace

std::vector<std::string> probe_suite_names() { return {"quick", "full"}; }

bool is_plan_suite(const std::string& name) {
  for (const std::string& s : probe_suite_names())
    if (s == name) return true;
  return name == "import";
}

bool is_training_plan(const nlohmann::json& plan) { return field_of(plan, "kind") == "train"; }

std::string plan_kind(const nlohmann::json& plan) {
  if (is_training_plan(plan)) {
    const nlohmann::json d = field_of(plan, "design");
    const nlohmann::json model = field_of(d, "model"), design = field_of(d, "design");
    return fmt::format("training {}/{}", model.is_string() ? model.get<std::string>() : "?",
                       design.is_string() ? design.get<std::string>() : "?");
  }
  const nlohmann::json suite = field_of(plan, "suite");
  if (!suite.is_string()) return "probe";
  return "probe suite " + suite.get<std::string>() + (field_of(plan, "custom") == true ? " (custom)" : "");
}

std::string plan_difference(const nlohmann::json& a, const nlohmann::json& b, bool suite_matters) {
  const bool ta = is_training_plan(a), tb = is_training_plan(b);
  if (ta != tb) return fmt::format("kind is {} vs {}", plan_kind(a), plan_kind(b));
  if (!ta) {
    const nlohmann::json sa = field_of(a, "suite"), sb = field_of(b, "suite");
    if (suite_matters && sa != sb) return fmt::format("suite is {} vs {}", value_text(sa), value_text(sb));
    return "";
  }
  const nlohmann::json da = field_of(a, "design"), db = field_of(b, "design");
  for (const char* f : kDesignFields) {
    const nlohmann::json x = field_of(da, f), y = field_of(db, f);
    if (x != y) return fmt::format("design.{} is {} vs {}", f, value_text(x), value_text(y));
  }
  const nlohmann::json fa = field_of(a, "data_fingerprint"), fb = field_of(b, "data_fingerprint");
  if (fa != fb) return fmt::format("data_fingerprint is {} vs {}", value_text(fa), value_text(fb));
  // The data's size, where both record it (results of older versions do not).
  const nlohmann::json ea = field_of(a, "data_examples"), eb = field_of(b, "data_examples");
  if (!ea.is_null() && !eb.is_null() && ea != eb)
    return fmt::format("data_examples is {} vs {}", value_text(ea), value_text(eb));
  return "";
}

}  // namespace detaudit
