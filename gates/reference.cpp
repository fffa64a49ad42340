#include "gates/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <set>
#include <tuple>

#include "contract/atomic_file.hpp"
#include "contract/json_fields.hpp"
#include "contract/observation.hpp"
#include "contract/results.hpp"
#include "gates/fleet.hpp"
#include "kernels/fingerprint.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"

namespace detaudit {
namespace {

auto cell_order(const ReferenceCell& c) { return std::tie(c.key, c.workload, c.target); }

void sort_cells(std::vector<ReferenceCell>* cells) {
  std::sort(cells->begin(), cells->end(),
            [](const ReferenceCell& a, const ReferenceCell& b) { return cell_order(a) < cell_order(b); });
}

bool is_fingerprint(const std::string& s) {
  Fingerprint f;
  return s.size() == 32 && Fingerprint::from_hex(s, &f);
}

}  // namespace

const ReferenceCell* Reference::find(const std::string& key, const std::string& workload,
                                     const std::string& target) const {
  ReferenceCell probe;
  probe.key = key, probe.workload = workload, probe.target = target;
  auto it = std::lower_bound(cells.begin(), cells.end(), probe, [](const ReferenceCell& a, const ReferenceCell& b) {
    return cell_order(a) < cell_order(b);
  });
  return it != cells.end() && cell_order(*it) == cell_order(probe) ? &*it : nullptr;
}

std::string fleet_start(const std::vector<FleetNode>& nodes) {
  std::string at;
  for (const FleetNode& n : nodes)
    if (!n.key.empty() && n.state != NodeState::kMissing && n.state != NodeState::kFailed && !n.started_at.empty() &&
        (at.empty() || n.started_at < at))
      at = n.started_at;
  return at;
}

std::string holds_own_agreement(const Reference& known, const std::vector<FleetNode>& nodes) {
  const std::string start = fleet_start(nodes);
  std::set<std::string> keys;
  for (const FleetNode& n : nodes)
    if (!n.key.empty()) keys.insert(fleet_key_hash(n.key));
  for (const ReferenceCell& c : known.cells)
    if (c.at == start && keys.count(c.key))
      return fmt::format("it holds this fleet's own agreement ({} on {} under key {} was agreed at {}, when this fleet "
                         "started): judged by itself, nothing would be judged",
                         c.workload, c.target, c.key, start);
  return "";
}

std::string mirrors_own_agreement(const Reference& known, const std::vector<FleetNode>& nodes) {
  const Reference agreed = reference_of_fleet(nodes);
  const auto start = iso8601_seconds(fleet_start(nodes));
  if (agreed.cells.empty() || !start) return "";
  // The fleet's span: its earliest start to its latest end, and the longest a node of it ran.
  int64_t end = *start, longest = 0;
  for (const FleetNode& n : nodes) {
    const auto s0 = iso8601_seconds(n.started_at), s1 = iso8601_seconds(n.finished_at);
    if (s1) end = std::max(end, *s1);
    if (s0 && s1) longest = std::max(longest, *s1 - *s0);
  }
  size_t mine = 0;
  for (const ReferenceCell& c : known.cells) {
    if (!agreed.keys.count(c.key)) continue;
    const ReferenceCell* own = agreed.find(c.key, c.workload, c.target);
    const auto at = iso8601_seconds(c.at);
    if (!own || !at || own->fingerprint != c.fingerprint || own->rows_fingerprint != c.rows_fingerprint ||
        own->nodes != c.nodes || own->of != c.of || *at < *start - longest - 1 || *at > end)
      return "";
    ++mine;
  }
  if (mine == 0) return "";
  return fmt::format("every cell the reference holds of this fleet's keys ({}) is this fleet's own agreement (the same "
                     "bits and counts), agreed within one run's length of its start: it says nothing the fleet did "
                     "not say of itself (the vote judged it)",
                     mine);
}

Reference reference_of_fleet(const std::vector<FleetNode>& nodes, const Reference* known) {
  Reference ref;
  // Nodes by machine key; a node without one (it never said) is in no group.
  std::map<std::string, std::vector<const FleetNode*>> groups;
  const std::string at = fleet_start(nodes);
  for (const FleetNode& n : nodes) {
    if (n.key.empty() || n.state == NodeState::kMissing || n.state == NodeState::kFailed) continue;
    groups[fleet_key_hash(n.key)].push_back(&n);
  }
  for (auto& [hash, members] : groups) {
    if (members.size() < 2) continue;
    // (workload, target) -> each member's observation of it
    std::map<std::pair<std::string, std::string>, std::vector<std::pair<const FleetNode*, const Observation*>>> cells;
    for (const FleetNode* n : members)
      for (const Observation& o : n->probe.observations) cells[{o.workload, o.target}].push_back({n, &o});
    bool used = false;
    for (auto& [cell, present] : cells) {
      std::map<std::string, int> votes, row_votes;
      std::set<std::string> failed;  // fingerprints a node's own run FAILed
      bool all_one_output = true, promised = true;
      for (auto& [n, o] : present) {
        all_one_output = all_one_output && o->status == ObsStatus::kOk && o->distinct == 1 && !o->fingerprints.empty();
        promised = promised && fleet_promise(*n, *o) == Promise::RunToRun::kDeterministic;
        if (!all_one_output) break;
        ++votes[o->fingerprints[0]];
        if (o->verdict == Verdict::kFail) failed.insert(o->fingerprints[0]);
        if (o->batch && !o->batch->rows_fingerprint.empty()) ++row_votes[o->batch->rows_fingerprint];
      }
      if (!all_one_output || !promised) continue;
      const auto best = std::max_element(votes.begin(), votes.end(), [](auto& a, auto& b) { return a.second < b.second; });
      const int of = int(present.size());
      if (best->second < 2 || best->second * 2 <= of || failed.count(best->first)) continue;
      if (const ReferenceCell* k = known ? known->find(hash, cell.first, cell.second) : nullptr;
          k && k->fingerprint != best->first)
        continue;
      ReferenceCell c;
      c.key = hash, c.workload = cell.first, c.target = cell.second, c.fingerprint = best->first;
      c.nodes = best->second, c.of = of, c.at = at, c.tool_version = members.front()->key.value("tool_version", "");
      // The rows computed alone, where every node that agreed on the product recorded them and a majority agreed.
      if (!row_votes.empty()) {
        const auto rows = std::max_element(row_votes.begin(), row_votes.end(),
                                           [](auto& a, auto& b) { return a.second < b.second; });
        if (rows->second >= 2 && rows->second * 2 > of) c.rows_fingerprint = rows->first;
      }
      if (const ReferenceCell* k = known ? known->find(hash, cell.first, cell.second) : nullptr;
          k && !k->rows_fingerprint.empty() && !c.rows_fingerprint.empty() && k->rows_fingerprint != c.rows_fingerprint)
        continue;
      ref.cells.push_back(std::move(c));
      used = true;
    }
    if (used) ref.keys[hash] = members.front()->key;
  }
  sort_cells(&ref.cells);
  return ref;
}

std::vector<ReferenceConflict> merge_reference(Reference* into, const Reference& from, const std::string& source) {
  std::vector<ReferenceConflict> conflicts;
  for (auto& [hash, key] : from.keys) into->keys.emplace(hash, key);
  std::vector<ReferenceCell> added;
  for (const ReferenceCell& c : from.cells) {
    ReferenceCell* have = into->find(c.key, c.workload, c.target);
    if (!have) {
      added.push_back(c);
      continue;
    }
    if (have->fingerprint != c.fingerprint ||
        (!have->rows_fingerprint.empty() && !c.rows_fingerprint.empty() && have->rows_fingerprint != c.rows_fingerprint)) {
      const bool product = have->fingerprint != c.fingerprint;
      conflicts.push_back({c.key, c.workload, c.target, product ? have->fingerprint : "rows " + have->rows_fingerprint,
                           product ? c.fingerprint : "rows " + c.rows_fingerprint, source});
      continue;
    }
    // The same bits: the wider agreement and the earlier time stand, and rows one side lacked are taken.
    ReferenceCell& mine = *have;
    if (std::tie(c.nodes, c.of) > std::tie(mine.nodes, mine.of)) mine.nodes = c.nodes, mine.of = c.of;
    if (c.at < mine.at) mine.at = c.at;
    if (mine.rows_fingerprint.empty()) mine.rows_fingerprint = c.rows_fingerprint;
  }
  // Two cells of one file are never the same (a loaded or made reference holds each once).
  into->cells.insert(into->cells.end(), added.begin(), added.end());
  sort_cells(&into->cells);
  return conflicts;
}

nlohmann::json to_json(const Reference& r) {
  nlohmann::json keys = nlohmann::json::object(), cells = nlohmann::json::array();
  for (auto& [hash, key] : r.keys) keys[hash] = key;
  for (auto& c : r.cells) {
    nlohmann::json j = {{"key", c.key},           {"workload", c.workload}, {"target", c.target},
                        {"fingerprint", c.fingerprint}, {"nodes", c.nodes},   {"of", c.of},
                        {"at", c.at},             {"tool_version", c.tool_version}};
    if (!c.rows_fingerprint.empty()) j["rows_fingerprint"] = c.rows_fingerprint;
    cells.push_back(std::move(j));
  }
  return {{"schema", kReferenceSchema}, {"keys", keys}, {"cells", cells}};
}

Status reference_from_json(const nlohmann::json& j, Reference* out) {
  using T = JsonType;
  Reference r;
  if (const std::string k = unknown_field(j, {"schema", "keys", "cells"}); !k.empty())
    return Status::invalid(fmt::format("\"{}\" is not a field of a reference", shown_safely(k.substr(0, 40))));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "keys", T::kObject, true, ""));
  DETAUDIT_RETURN_IF_ERROR(check_array_key(j, "cells", T::kObject, true, ""));
  for (auto& [hash, key] : j["keys"].items()) {
    const std::string where = json_path("keys", hash);
    if (!key.is_object()) return Status::invalid(where + " must be an object (a machine key)");
    for (auto& [field, value] : key.items())
      if (!value.is_string())
        return Status::invalid(fmt::format("{} must be a string (a machine key's fields are text)", json_path(where, field)));
    if (fleet_key_hash(key) != hash)
      return Status::invalid(fmt::format("{}: the key's hash is {}, not its name (a key is named by what it holds)",
                                         where.substr(0, 60), fleet_key_hash(key)));
    if (!is_version_text(key.value("tool_version", "")))
      return Status::invalid(where.substr(0, 60) + ".tool_version is missing or not a version");
    r.keys[hash] = key;
  }
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<std::string, size_t>> products;
  const auto& cells = j["cells"];
  for (size_t i = 0; i < cells.size(); ++i) {
    const nlohmann::json& cj = cells[i];
    const std::string where = json_path("cells", i);
    if (const std::string k = unknown_field(cj, {"key", "workload", "target", "fingerprint", "rows_fingerprint", "nodes",
                                                 "of", "at", "tool_version"});
        !k.empty())
      return Status::invalid(fmt::format("{} is not a field of a reference cell", json_path(where, shown_safely(k.substr(0, 40)))));
    for (const char* k : {"key", "workload", "target", "fingerprint", "at", "tool_version"})
      DETAUDIT_RETURN_IF_ERROR(check_key(cj, k, T::kString, true, where));
    DETAUDIT_RETURN_IF_ERROR(check_key(cj, "rows_fingerprint", T::kString, false, where));
    DETAUDIT_RETURN_IF_ERROR(check_key(cj, "nodes", T::kCount, true, where));
    DETAUDIT_RETURN_IF_ERROR(check_key(cj, "of", T::kCount, true, where));
    ReferenceCell c;
    c.key = cj["key"], c.workload = cj["workload"], c.target = cj["target"], c.fingerprint = cj["fingerprint"];
    c.rows_fingerprint = cj.value("rows_fingerprint", ""), c.at = cj["at"], c.tool_version = cj["tool_version"];
    const uint64_t nodes = cj["nodes"].get<uint64_t>(), of = cj["of"].get<uint64_t>();
    auto key = r.keys.find(c.key);
    if (key == r.keys.end())
      return Status::invalid(fmt::format("{} \"{}\" is not one of the reference's keys", json_path(where, "key"),
                                         shown_safely(c.key.substr(0, 40))));
    Spec t, w;
    if (!parse_target(c.target, &t) || t.str() != c.target)
      return Status::invalid(fmt::format("{} \"{}\" is not a target spec as detaudit writes one", json_path(where, "target"),
                                         shown_safely(c.target.substr(0, 80))));
    if (!parse_workload(c.workload, &w) || w.str() != c.workload)
      return Status::invalid(fmt::format("{} \"{}\" is not a workload spec as detaudit writes one",
                                         json_path(where, "workload"), shown_safely(c.workload.substr(0, 80))));
    // Known-good bits are of a target that promises them: a host target's promise follows from its spec (a GPU
    // target's may follow from the algorithm its library chose, which the reference does not keep).
    // (A GPU target that permits variation by its spec, atomics or completion order, promises it on any GPU.)
    if (const BackendEntry* be = find_backend(t.name);
        !be || be->imported ||
        (be->device == DeviceKind::kHost &&
         promise_for(t, w, nlohmann::json::object(), {}).run_to_run != Promise::RunToRun::kDeterministic) ||
        promise_for(t, w, nlohmann::json::object(), {}).run_to_run == Promise::RunToRun::kNondeterministic)
      return Status::invalid(fmt::format("{}: {} does not promise the same bits run to run on {}, so it has no known-good "
                                         "bits",
                                         where, c.target, c.workload));
    for (auto [k, v] : {std::pair{"fingerprint", &c.fingerprint}, std::pair{"rows_fingerprint", &c.rows_fingerprint}})
      if ((k == std::string("fingerprint") || !v->empty()) && !is_fingerprint(*v))
        return Status::invalid(fmt::format("{} \"{}\" is not 32 hex digits", json_path(where, k), shown_safely(v->substr(0, 40))));
    if (!c.rows_fingerprint.empty() && w.name != "batchinv")
      return Status::invalid(fmt::format("{}: rows computed alone on {}, which is no batch-invariance workload", where,
                                         c.workload));
    if (nodes < 2 || nodes > of || nodes * 2 <= of || of > 1000000)
      return Status::invalid(fmt::format("{}: {} of {} nodes agreed, but known-good bits are a majority of two nodes or "
                                         "more",
                                         where, nodes, of));
    c.nodes = int(nodes), c.of = int(of);
    // A fleet agreed on it when it ran: not in the future (a day of clock skew allowed), nor before this format existed.
    if (!is_utc_iso8601(c.at) || c.at > utc_iso8601(std::time(nullptr) + 86400) || c.at < kReferenceFormatSince)
      return Status::invalid(fmt::format("{} \"{}\" is not a time (UTC, ISO 8601) from {} (when this format began) to "
                                         "now: a fleet agreed on it when it ran",
                                         json_path(where, "at"), shown_safely(c.at.substr(0, 40)), kReferenceFormatSince));
    if (c.tool_version != key->second.value("tool_version", ""))
      return Status::invalid(fmt::format("{} \"{}\", but its key was made by {}", json_path(where, "tool_version"),
                                         shown_safely(c.tool_version.substr(0, 40)),
                                         key->second.value("tool_version", "")));
    if (!seen.insert({c.key, c.workload, c.target}).second)
      return Status::invalid(fmt::format("{}: {} on {} under key {} twice (a reference holds each cell once)", where,
                                         c.workload, c.target, c.key));
    // One product (a batchinv cell computes the matmul of its sizes, dist and seed) on one target and key has one set
    // of known-good bits.
    if (const auto [it, fresh] = products.try_emplace({c.key, c.target, product_of(c.workload)}, c.fingerprint, i);
        !fresh && it->second.first != c.fingerprint)
      return Status::invalid(fmt::format("{}: {} on {} is the product of cells[{}], whose known-good bits are {}, not {}: "
                                         "one product, one target and one key have one",
                                         where, c.workload, c.target, it->second.second, it->second.first,
                                         c.fingerprint));
    r.cells.push_back(std::move(c));
  }
  // A key no cell uses holds nothing known.
  std::set<std::string> used;
  for (const ReferenceCell& c : r.cells) used.insert(c.key);
  for (auto& [hash, key] : r.keys)
    if (!used.count(hash)) return Status::invalid(fmt::format("keys.{} has no cell", hash.substr(0, 40)));
  sort_cells(&r.cells);
  *out = std::move(r);
  return Status::ok();
}

Status load_reference(const std::string& path, Reference* out) {
  nlohmann::json j;
  DETAUDIT_RETURN_IF_ERROR(load_json_document(path, kReferenceSchema, "reference", &j));
  return reference_from_json(j, out).prefixed(path + ": ");
}

Status save_reference(const std::string& path, const Reference& r) {
  return write_file_atomic(path, to_json(r).dump(1) + "\n", Own::kReference);
}

}  // namespace detaudit
