#include "contract/diverge_result.hpp"

#include <fmt/format.h>

#include "contract/metrics.hpp"

namespace detaudit {

namespace {

constexpr const char* kResultSchema = "detaudit-diverge/1";

nlohmann::json side_json(const DivergeSide& s) {
  return {{"target", s.target}, {"backend", s.backend}, {"details", details_json(s.details)}, {"trace", s.trace}};
}

}  // namespace

nlohmann::json details_json(const std::vector<std::pair<std::string, std::string>>& d) {
  nlohmann::json j = nlohmann::json::object();
  for (auto& [k, v] : d) j[k] = v;
  return j;
}

bool DivergeRecord::same_place(const DivergeRecord& o) const {
  return step == o.step && layer == o.layer && name == o.name && pass == o.pass && tensor == o.tensor &&
         count == o.count;
}

std::string DivergeRecord::where() const {
  return fmt::format("step {}, layer {} ({}), pass {}, tensor {}", step, layer, name, pass, tensor);
}

std::string DivergeResult::summary() const {
  if (!first) return fmt::format("no divergence in {} steps", steps);
  const DivergeRecord& r = first->a;
  std::string s = fmt::format("diverged at step {}, layer {} ({}), pass {}: tensor {} ({}) differs", r.step, r.layer,
                              r.name, r.pass, r.tensor, first->op.op);
  if (first->distance) {
    const TensorDistance& d = *first->distance;
    s += fmt::format(", {} of {} elements, max {} ULP, relative L2 {:.3g}", d.mismatched, r.count,
                     d.max_ulp == kUlpInfinite ? std::string("inf") : std::to_string(d.max_ulp), d.rel_l2);
  } else {
    s += " (fingerprints only)";
  }
  s += fmt::format(", after {} identical records", first->equal_before);
  return s;
}

nlohmann::json design_json(const DivergeDesign& d) {
  return {{"model", d.model},         {"batch_size", d.batch_size},   {"steps", d.steps},
          {"init_seed", d.init_seed}, {"data_seed", d.data_seed},     {"optimizer", d.optimizer},
          {"lr", d.lr},               {"data_fingerprint", d.data_fingerprint}, {"layers", d.layers}};
}

nlohmann::json record_json(const DivergeRecord& r) {
  nlohmann::json j = {{"kind", "record"}, {"step", r.step},     {"layer", r.layer},      {"name", r.name},
                      {"pass", r.pass},   {"tensor", r.tensor}, {"fp", r.fp.hex()},      {"n", r.count}};
  if (r.loss) j["loss"] = *r.loss;
  return j;
}

std::string DivergeResult::to_json() const {
  nlohmann::json j = {{"schema", kResultSchema},
                      {"tool_version", DETAUDIT_VERSION},
                      {"offline", offline},
                      {"design", design_json(design)},
                      {"a", side_json(a)},
                      {"b", side_json(b)},
                      {"steps", steps},
                      {"records", records},
                      {"diverged", first.has_value()},
                      {"summary", summary()},
                      {"loss_a", loss_a},
                      {"loss_b", loss_b},
                      {"loss_gap", loss_gap},
                      {"weight_l2", weight_l2}};
  if (first) {
    nlohmann::json f = record_json(first->a);
    f.erase("kind");
    f.erase("fp");
    f["fingerprint_a"] = first->a.fp.hex();
    f["fingerprint_b"] = first->b.fp.hex();
    f["equal_before"] = first->equal_before;
    f["op"] = first->op.op;
    f["reduction"] = first->op.reduction;
    if (first->distance) {
      f["max_ulp"] = first->distance->max_ulp;
      f["rel_l2"] = first->distance->rel_l2;
      f["mismatched"] = first->distance->mismatched;
    }
    f["kernels_a"] = first->kernels_a;
    f["kernels_b"] = first->kernels_b;
    f["kernels_note"] = first->kernels_note;
    j["first"] = f;
  }
  return j.dump(2) + "\n";
}

}  // namespace detaudit
