#include "gates/fleet.hpp"
#include "gates/qualify.hpp"

#include "contract/cells.hpp"
#include "probes/results_file.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "analysis/stats.hpp"
#include "contract/atomic_file.hpp"
#include "contract/command_text.hpp"
#include "gates/baseline.hpp"
#include "contract/machine_key.hpp"
#include "gates/verdict.hpp"
#include "kernels/fingerprint.hpp"
#include "kernels/input_file.hpp"
#include "probes/child.hpp"
#include "probes/registry.hpp"
#include "probes/spec.hpp"

namespace detaudit {

namespace fs = std::filesystem;

namespace {

std::string str_field(const nlohmann::json& j, const char* k) {
  if (!j.is_object() || !j.contains(k)) return "";
  const auto& v = j[k];
  return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
}

double median_of(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return !std::isfinite(x); }), v.end());
  return v.empty() ? NAN : finite_median(v);
}

std::string cell_name(const std::string& workload, const std::string& target) { return workload + " @ " + target; }

// A node's findings in one line: per verdict, how many and of which backends ("42 FAIL, all openblas targets"; "2 FAIL,
// cpu and openblas targets; 1 FAIL lost"), and the most urgent action among them.
std::string node_summary(const std::vector<const FleetFinding*>& fs) {
  // (verdict, about a cell) -> how many, and the backends of the cells (or the kinds of the node's own findings)
  std::map<std::pair<Verdict, bool>, std::pair<size_t, std::set<std::string>>> by;
  for (const FleetFinding* f : fs) {
    auto& [n, names] = by[{f->verdict, !f->cell.empty()}];
    ++n;
    if (f->cell.empty()) {
      names.insert(to_string(f->kind));
      continue;
    }
    const size_t at = f->cell.find(" @ ");
    const std::string target = at == std::string::npos ? f->cell : f->cell.substr(at + 3);
    names.insert(spec_name(target));
  }
  std::vector<std::string> parts;
  for (auto& [vk, nb] : by) {
    const auto& [n, names] = nb;
    if (!vk.second) {
      parts.push_back(fmt::format("{} {}: {}", n, to_string(vk.first), fmt::join(names, ", ")));
      continue;
    }
    const std::string list = fmt::format("{}", fmt::join(names, names.size() == 2 ? " and " : ", "));
    parts.push_back(fmt::format("{} {}, {}{} target{}", n, to_string(vk.first), n > 1 && names.size() == 1 ? "all " : "",
                                list, n > 1 || names.size() > 1 ? "s" : ""));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The oracle distance of an observation in a few words.
std::string oracle_words(const Observation& o) {
  if (!o.oracle) return "no oracle";
  return fmt::format("{} ULP, {} element(s) off the oracle", o.oracle->max_ulp, o.oracle->mismatched);
}

// The result most nodes gave among `votes` (result -> nodes), with its count; whether it is a majority is the caller's
// (against all the nodes present, voting or not).
std::pair<std::string, size_t> most_voted(const std::map<std::string, size_t>& votes) {
  std::pair<std::string, size_t> top{"", 0};
  for (auto& [result, v] : votes)
    if (v > top.second) top = {result, v};
  return top;
}

// The kernels of an observation's first traced repeat, by name ("" when none were traced).
std::string kernel_words(const Observation& o) {
  for (auto& k : o.kernels) {
    if (!k) continue;
    std::vector<std::string> names;
    for (auto& r : *k) names.push_back(r.name);
    return names.empty() ? "" : fmt::format("{}", fmt::join(names, ", "));
  }
  return "";
}

// What the target promises run to run for a node's cell (its own machine's promise): only a cell promised
// deterministic is compared bit for bit across nodes.
}  // namespace

Promise::RunToRun fleet_promise(const FleetNode& n, const Observation& o) {
  if (auto it = o.details.find("fleet_promise"); it != o.details.end())
    return it->second == "deterministic" ? Promise::RunToRun::kDeterministic : Promise::RunToRun::kNondeterministic;
  const std::optional<Promise> p = promise_of(o, n.probe.machine);
  return p ? p->run_to_run : Promise::RunToRun::kNone;
}

nlohmann::json FleetNode::node_json() const {
  nlohmann::json c = nlohmann::json::array();
  for (auto& x : collectives) c.push_back(x.to_json());
  return {{"schema", kFleetNodeSchema},
          {"rank", rank},
          {"ranks", ranks},
          {"level", level},
          {"host", host},
          {"placement", placement},
          {"state", to_string(state)},
          {"detail", detail},
          {"started_at", started_at},
          {"finished_at", finished_at},
          {"exit_code", exit_code},
          {"own_fail", own_fail},
          {"key", key},
          {"collectives", c}};
}

nlohmann::json fleet_key(const nlohmann::json& machine, const std::string& tool_version,
                         const std::string& tool_commit) {
  nlohmann::json k = nlohmann::json::object();
  k["cpu_model"] = str_field(machine, "cpu_model");
  std::vector<std::string> features;
  if (machine.is_object() && machine.contains("cpu_features") && machine["cpu_features"].is_array())
    for (auto& f : machine["cpu_features"])
      if (f.is_string()) features.push_back(f.get<std::string>());
  std::sort(features.begin(), features.end());
  k["cpu_features"] = fmt::format("{}", fmt::join(features, " "));
  k["cores"] = str_field(machine, "cores");
  if (machine.is_object() && machine.contains("gpus") && machine["gpus"].is_array()) {
    size_t i = 0;
    for (auto& g : machine["gpus"]) {
      const std::string p = fmt::format("gpu{}.", i++);
      k[p + "name"] = str_field(g, "name");
      k[p + "compute_capability"] = str_field(g, "compute_capability");
      k[p + "sm_count"] = str_field(g, "sm_count");
    }
  }
  if (machine.is_object() && machine.contains("libraries") && machine["libraries"].is_object())
    for (auto& [name, v] : machine["libraries"].items())
      k["libraries." + name] = v.is_string() ? v.get<std::string>() : v.dump();
  k["tool_version"] = tool_version;
  k["tool_commit"] = tool_commit;
  return k;
}

std::string fleet_key_hash(const nlohmann::json& key) {
  const std::string s = key.dump();
  return fingerprint_bytes(s.data(), s.size()).hex().substr(0, 16);
}

std::string fleet_folder(int rank, const std::string& host) {
  return fmt::format("ranks/{}-{}", rank, safe_file_name(host.empty() ? "unknown" : host));
}

Status save_fleet_node(const std::string& fleet_dir, const FleetNode& n) {
  const std::string dir = fleet_dir + "/" + n.folder;
  DETAUDIT_RETURN_IF_ERROR(make_dir_below(fleet_dir, n.folder));  // ranks/, ranks/<rank>-<host>/: no link
  return write_file_atomic(dir + "/node.json", n.node_json().dump(1) + "\n", Own::kFleetNode);
}

// A rank's qualify.json says what its node.json says of it: the same decision (exit code 1 exactly when a check
// failed, its counts its checks' verdicts), host and folder.
Status check_fleet_qualify(const std::string& text, const std::string& where, const FleetNode& n) {
  // A finished rank's qualification wrote it: without it the exit code in node.json is the only word on the
  // decision, and nothing to hold it against.
  if (text.empty())
    return n.state == NodeState::kFinished
               ? Status::invalid(fmt::format("{}: missing, yet rank {} says it finished: its qualification's decision "
                                             "is nowhere but node.json",
                                             where, n.rank))
               : Status::ok();
  nlohmann::json j;
  DETAUDIT_RETURN_IF_ERROR(parse_json_text(text, where, &j));
  if (!j.is_object() || j.value("schema", nlohmann::json()) != kQualifySchema)
    return Status::invalid(fmt::format("{}: not a qualify result (expected \"schema\": \"{}\")", where, kQualifySchema));
  auto bad = [&](const std::string& what) { return Status::invalid(fmt::format("{}: {}", where, what)); };
  if (!j.contains("exit_code") || !j["exit_code"].is_number_integer() || !j.contains("qualified") ||
      !j["qualified"].is_boolean() || !j.contains("hostname") || !j["hostname"].is_string() ||
      !j.contains("probe_dir") || !j["probe_dir"].is_string())
    return bad("exit_code, qualified, hostname and probe_dir are what a qualify result holds");
  const int64_t code = j["exit_code"];
  if (n.state == NodeState::kFinished && code != n.exit_code)
    return bad(fmt::format("exit_code {}, but node.json says {}", code, n.exit_code));
  if (j["qualified"].get<bool>() != (code == 0))
    return bad(fmt::format("qualified {} beside exit_code {}", j["qualified"].get<bool>(), code));
  if (j["hostname"].get<std::string>() != n.host)
    return bad(fmt::format("hostname '{}', but the rank ran on '{}'",
                           shown_safely(j["hostname"].get<std::string>().substr(0, 40)), n.host));
  if (const std::string pd = j["probe_dir"]; !pd.ends_with(n.folder + "/probe"))
    return bad(fmt::format("probe_dir '{}' is not this rank's folder's", shown_safely(pd.substr(0, 80))));
  // Its counts are its checks' verdicts, and exit code 1 is "a check failed".
  VerdictTally tally;
  bool shaped = j.contains("checks") && j["checks"].is_array();
  for (size_t i = 0; shaped && i < j["checks"].size(); ++i) {
    const auto& c = j["checks"][i];
    Verdict v;
    shaped = c.is_object() && c.contains("verdict") && c["verdict"].is_string() &&
             parse_verdict(c["verdict"].get<std::string>(), &v);
    if (shaped) tally.add(v);
  }
  if (!shaped) return bad("checks is not a list of checks with their verdicts");
  if (!j.contains("counts") || j["counts"] != tally.to_json())
    return bad(fmt::format("counts {} are not its checks' verdicts ({})",
                           shown_safely(j.value("counts", nlohmann::json()).dump().substr(0, 80)), tally.to_json().dump()));
  if ((tally.fail > 0) != (code == 1))
    return bad(fmt::format("exit_code {} beside {} failed checks (exit code 1 is a failed check)", code, tally.fail));
  // A rank that did not finish may keep an earlier run's qualify.json (of another start, or tool); a finished
  // rank's is this run's: what it ran with is the node's (its level, the tool of the node's key, the machine of
  // its probe results, its times within the node's), and its rows are what its own results give.
  if (n.state != NodeState::kFinished) return Status::ok();
  for (const char* k : {"level", "machine_key", "tool_version", "tool_commit", "started_at", "finished_at", "train_dir"})
    if (!j.contains(k) || (std::string(k) == "level" ? !j[k].is_number_integer() : !j[k].is_string()))
      return bad(fmt::format("{} is missing or not a {}", k, std::string(k) == "level" ? "number" : "string"));
  if (j["level"] != n.level) return bad(fmt::format("level {}, but the rank ran level {}", j["level"].dump(), n.level));
  for (const char* k : {"tool_version", "tool_commit"})
    if (n.key.contains(k) && j[k] != n.key[k])
      return bad(fmt::format("{} '{}', but node.json's key says '{}'", k, shown_safely(j[k].get<std::string>().substr(0, 40)),
                             n.key[k].get<std::string>()));
  if (n.probe.machine.is_object() && !n.probe.machine.empty() && j["machine_key"] != machine_key(n.probe.machine))
    return bad(fmt::format("machine_key '{}', but its probe results ran on machine {}",
                           shown_safely(j["machine_key"].get<std::string>().substr(0, 40)), machine_key(n.probe.machine)));
  const std::string started = j["started_at"], finished = j["finished_at"];
  if (Status st = check_run_times(started, finished, where); !st) return st;
  if (started < n.started_at || (!n.finished_at.empty() && finished > n.finished_at))
    return bad(fmt::format("it ran from {} to {}, outside the rank's run ({} to {})", started, finished, n.started_at,
                           n.finished_at.empty() ? "not finished" : n.finished_at));
  // Each check's seconds are a step of that run.
  if (const auto s0 = iso8601_seconds(started), s1 = iso8601_seconds(finished); s0 && s1)
    for (size_t i = 0; i < j["checks"].size(); ++i)
      if (const auto& c = j["checks"][i]; !c.contains("seconds") || !c["seconds"].is_number() ||
                                          !plausible_seconds(c["seconds"].get<double>()) ||
                                          !fits_in_run(c["seconds"].get<double>(), *s1 - *s0))
        return bad(fmt::format("checks[{}].seconds is {}: a step of a run from {} to {} takes 0, or a nanosecond (a "
                               "clock's tick) to {} s", i,
                               c.value("seconds", nlohmann::json()).dump().substr(0, 30), started, finished,
                               *s1 - *s0 + 2));
  if (const std::string td = j["train_dir"]; n.level == 1 ? !td.empty() : !td.ends_with(n.folder + "/train"))
    return bad(fmt::format("train_dir '{}' at level {} (level 1 trains nothing; level 2 trains into its folder's train)",
                           shown_safely(td.substr(0, 80)), n.level));
  // Its rows, in detail when this build judged them.
  if (Status st = check_rank_checks(j["checks"], n.probe, n.train, n.level,
                                    j["tool_commit"] == git_commit() && j["tool_version"] == DETAUDIT_VERSION);
      !st)
    return bad(st.message());
  return Status::ok();
}

namespace {

// What a node.json says of itself that cannot be true: a host name with control characters (it would
// reach the terminal raw), an exit code no finished rank gives, a failure it reports beside exit code 0,
// times that are no times or end before they start.
Status check_node_claims(const FleetNode& n, const std::string& where) {
  if (const int c = first_control_byte(n.host); c >= 0)
    return Status::invalid(
        fmt::format("{}: host holds a control character (byte 0x{:02x}): no host name does", where, c));
  // -1: not exited yet (a rank still running, or killed while it ran).
  if (n.exit_code < -1 || n.exit_code > 255 || (n.exit_code == -1 && n.state == NodeState::kFinished))
    return Status::invalid(fmt::format("{}: exit_code {} is no exit code{}", where, n.exit_code,
                                       n.state == NodeState::kFinished ? " of a finished rank" : ""));
  if (n.state == NodeState::kFinished && n.exit_code > 2)
    return Status::invalid(
        fmt::format("{}: exit_code {} with state finished (a finished rank exits 0, 1 or 2)", where, n.exit_code));
  // A rank still running (or killed) has no end and no exit code yet; one interrupted by a signal it caught
  // wrote both, the code 128 + the signal.
  if (n.state == NodeState::kRunning && (!n.finished_at.empty() || n.exit_code != -1))
    return Status::invalid(fmt::format("{}: state running, but it gives {} (a running rank has neither)", where,
                                       !n.finished_at.empty() ? "finished_at " + n.finished_at
                                                              : fmt::format("exit_code {}", n.exit_code)));
  if (n.state == NodeState::kInterrupted && (n.exit_code < 129 || n.exit_code > 128 + 64 || n.finished_at.empty()))
    return Status::invalid(fmt::format("{}: state interrupted with exit_code {}{} (an interrupted rank exits 128 + "
                                       "its signal, and gives when)",
                                       where, n.exit_code, n.finished_at.empty() ? " and no finished_at" : ""));
  if (n.state == NodeState::kFinished && !n.detail.empty())
    return Status::invalid(fmt::format("{}: state finished, but detail says '{}' (only a rank that failed or was "
                                       "interrupted says why)",
                                       where, shown_safely(n.detail.substr(0, 60))));
  if (n.state == NodeState::kFailed && n.detail.empty())
    return Status::invalid(fmt::format("{}: state failed, but detail does not say why", where));
  if (!n.own_fail.empty() && n.exit_code == 0)
    return Status::invalid(fmt::format("{}: own_fail says it failed ({}), but exit_code is 0", where, n.own_fail));
  if (n.own_fail.empty() && n.exit_code == 1 && n.state == NodeState::kFinished)
    return Status::invalid(fmt::format("{}: exit_code 1 (its own check failed), but own_fail names no failure", where));
  if (n.level < 1 || n.level > 2) return Status::invalid(fmt::format("{}: level {} is no fleet level (1 or 2)", where, n.level));
  // A time still to come would make every real rank "an earlier run".
  return check_run_times(n.started_at, n.finished_at, where);
}

// Whether an option's text is the number `value` as the command line reads it ("1", "01", "+1"); text that is no
// number says nothing (the command line would have refused it).
bool named_number_is(const std::string& text, int64_t value) {
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || !end || *end != '\0') return true;
  return n == value;
}

}  // namespace

Status fleet_node_from_texts(const std::string& node_text, const std::string& probe_text, const std::string& train_text,
                             const std::string& where, FleetNode* out) {
  FleetNode n;
  nlohmann::json j;
  DETAUDIT_RETURN_IF_ERROR(parse_json_text(node_text, where + " (not a fleet node file)", &j));
  if (!j.is_object() || j.value("schema", nlohmann::json()) != kFleetNodeSchema)
    return Status::invalid(
        fmt::format("{}: not a fleet node file (expected \"schema\": \"{}\")", where, kFleetNodeSchema));
  for (const char* k : {"rank", "ranks", "level", "exit_code"}) {
    if (!j.contains(k) || !j[k].is_number_integer())
      return Status::invalid(fmt::format("{}: {} must be an integer", where, k));
    // 9223372036854775808 would have been read as 0.
    const bool fits = j[k].is_number_unsigned() ? j[k].get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max())
                                                : j[k].get<int64_t>() >= std::numeric_limits<int>::min() &&
                                                      j[k].get<int64_t>() <= std::numeric_limits<int>::max();
    if (!fits) return Status::invalid(fmt::format("{}: {} {} is beyond any {}", where, k, j[k].dump(), k));
  }
  for (const char* k : {"host", "placement", "state", "detail", "started_at", "finished_at", "own_fail"})
    DETAUDIT_RETURN_IF_ERROR(check_key(j, k, JsonType::kString, true, where));
  if (const std::string k = unknown_field(j, {"schema", "rank", "ranks", "level", "exit_code", "host", "placement",
                                               "state", "detail", "started_at", "finished_at", "own_fail", "key",
                                               "collectives"});
      !k.empty())
    return Status::invalid(fmt::format("{}: \"{}\" is not a field of a fleet node file", where, k.substr(0, 40)));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "key", JsonType::kObject, true, where));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "collectives", JsonType::kArray, true, where));
  n.rank = j["rank"], n.ranks = j["ranks"], n.level = j["level"], n.exit_code = j["exit_code"];
  if (n.rank < 0 || n.ranks < 1 || n.rank >= n.ranks || n.ranks > 1000000)
    return Status::invalid(fmt::format("{}: rank {} of {} is not a rank", where, n.rank, n.ranks));
  n.host = j["host"], n.placement = j["placement"], n.detail = j["detail"], n.started_at = j["started_at"];
  n.finished_at = j["finished_at"], n.own_fail = j["own_fail"], n.key = j["key"];
  for (auto& [k, v] : n.key.items())
    if (!v.is_string()) return Status::invalid(fmt::format("{}: key.{} must be a string", where, k));
  // (A missing rank is one without a folder: no node.json says so of itself.)
  const std::string state = j["state"];
  if (!parse_node_state(state, &n.state) || n.state == NodeState::kMissing)
    return Status::invalid(
        fmt::format("{}: state '{}' (finished, running, interrupted or failed)", where, shown_safely(state)));
  DETAUDIT_RETURN_IF_ERROR(check_node_claims(n, where));
  n.folder = fleet_folder(n.rank, n.host);
  for (size_t i = 0; i < j["collectives"].size(); ++i) {
    CollectiveCell c;
    DETAUDIT_RETURN_IF_ERROR(
        CollectiveCell::from_json(j["collectives"][i], &c, fmt::format("{}: collectives[{}]", where, i)));
    n.collectives.push_back(std::move(c));
  }
  // Read as every command reads a results file: the contract's checks, then each spec parsed and in canonical
  // form, each cell once (a cell twice would count twice among its peers).
  if (!probe_text.empty()) {
    DETAUDIT_RETURN_IF_ERROR(parse_results(probe_text, where + " probe results", &n.probe));
    DETAUDIT_RETURN_IF_ERROR(canonicalize_specs(&n.probe, where + " probe results"));
  }
  if (!train_text.empty()) {
    DETAUDIT_RETURN_IF_ERROR(parse_results(train_text, where + " training results", &n.train));
    DETAUDIT_RETURN_IF_ERROR(canonicalize_specs(&n.train, where + " training results"));
  }
  // The node's own verdicts as this detaudit judges its observations, never as its file states them.
  judge(&n.probe);
  // The host a node names is the one its own results ran on.
  for (const Results* r : {&n.probe, &n.train}) {
    const std::string ran_on = r->machine.is_object() ? r->machine.value("hostname", "") : "";
    if (!ran_on.empty() && !n.host.empty() && ran_on != n.host)
      return Status::invalid(
          fmt::format("{}: host '{}', but its results ran on '{}'", where, n.host, ran_on));
  }
  // How the rank was placed, and what its own command says of it: `--rank N --ranks M` named in the command for
  // "--rank" (and the same numbers as node.json), `--ranks M` alone for a Kubernetes Indexed Job, neither under mpirun
  // or srun. A node.json that says otherwise was edited (a rank dropped, a folder cloned, a placement relabelled).
  const bool by_options = n.placement == "--rank", indexed = n.placement == "JOB_COMPLETION_INDEX";
  if (!by_options && !indexed && n.placement != "MPI" && n.placement != "SLURM_PROCID")
    return Status::invalid(fmt::format("{}: placement '{}' (MPI, --rank, SLURM_PROCID or JOB_COMPLETION_INDEX)", where,
                                       shown_safely(n.placement.substr(0, 40))));
  for (const Results* r : {&n.probe, &n.train})
    if (const auto named = command_options(r->command, "fleet", {"--rank", "--ranks"})) {
      for (auto [opt, value] : {std::pair{"--rank", int64_t(n.rank)}, std::pair{"--ranks", int64_t(n.ranks)}})
        if (const auto it = named->find(opt); it != named->end() && !named_number_is(it->second, value))
          return Status::invalid(fmt::format("{}: {} {}, but its results' command says {} {}", where,
                                             std::string(opt).substr(2), value, opt,
                                             shown_safely(it->second.substr(0, 20))));
      for (auto [opt, wanted] : {std::pair{"--rank", by_options}, std::pair{"--ranks", by_options || indexed}})
        if (named->count(opt) != size_t(wanted))
          return Status::invalid(fmt::format("{}: placed by {}, but its results' command {} {}", where, n.placement,
                                             wanted ? "lacks" : "names", opt));
    }
  // A node.json whose key is not the machine its own results describe (a 96-core EPYC claiming its peers'
  // key would be compared with them, and its bits judged against theirs).
  if (!n.key.empty() && n.probe.machine.is_object() && !n.probe.machine.empty()) {
    const nlohmann::json own = fleet_key(n.probe.machine, n.probe.tool_version, n.probe.tool_commit);
    if (own != n.key)
      return Status::invalid(fmt::format("{}: its machine key is not the machine its probe results describe ({}; "
                                         "node.json -> results)",
                                         where, key_difference(n.key, own)));
  }
  // Its results ran while it did: not before its start, not after its end.
  for (const Results* r : {&n.probe, &n.train}) {
    if (!r->started_at.empty() && r->started_at < n.started_at)
      return Status::invalid(fmt::format("{}: its results started at {}, before the rank did ({})", where,
                                         r->started_at, n.started_at));
    if (!r->finished_at.empty() && !n.finished_at.empty() && r->finished_at > n.finished_at)
      return Status::invalid(fmt::format("{}: its results finished at {}, after the rank did ({})", where,
                                         r->finished_at, n.finished_at));
  }
  // A rank that finished wrote its results to the end: results it left unfinished are a killed or lost rank's.
  if (n.state == NodeState::kFinished)
    for (auto [r, part] : {std::pair{&n.probe, "probe"}, std::pair{&n.train, "training"}})
      if (!r->started_at.empty() && r->finished_at.empty())
        return Status::invalid(fmt::format("{}: state finished, but its {} results never finished (a rank killed or "
                                           "lost before its end)",
                                           where, part));
  // Collectives run under MPI among all the job's ranks: each cell on as many ranks as the node's fleet has, and none
  // on a rank placed otherwise (one process per rank, which talk through no MPI).
  for (size_t i = 0; i < n.collectives.size(); ++i)
    if (n.collectives[i].ranks != n.ranks)
      return Status::invalid(fmt::format("{}: collectives[{}] ran on {} ranks, but the node is a rank of {}", where, i,
                                         n.collectives[i].ranks, n.ranks));
  if (!n.collectives.empty() && n.placement != "MPI")
    return Status::invalid(fmt::format("{}: {} collective cells, but it was placed by {} (one process per rank, no "
                                       "MPI: no collective ran)",
                                       where, n.collectives.size(), n.placement));
  // A node that says it passed while its own results hold a FAIL.
  if (n.state == NodeState::kFinished && n.exit_code == 0)
    for (auto& o : n.probe.observations)
      if (o.verdict == Verdict::kFail)
        return Status::invalid(fmt::format("{}: exit_code 0, but its probe results FAIL {} on {}", where, o.workload,
                                           o.target));
  *out = std::move(n);
  return Status::ok();
}

Status load_fleet_dir(const std::string& dir, std::vector<FleetNode>* nodes, std::vector<std::string>* ignored) {
  nodes->clear();
  if (ignored) ignored->clear();
  std::error_code ec;
  const fs::path ranks = fs::path(dir) / "ranks";
  // The evidence is read where the ranks wrote it: a link at ranks/ or anywhere below would put another fleet's
  // rank (or a file of the reader's choosing) in its place.
  auto no_link = [&](const fs::path& p) -> Status {
    if (fs::is_symlink(fs::symlink_status(p, ec)))
      return Status::invalid(fmt::format("{} is a symbolic link: fleet report reads a rank's evidence only where the "
                                         "rank wrote it",
                                         p.string()));
    return Status::ok();
  };
  DETAUDIT_RETURN_IF_ERROR(no_link(ranks));
  if (!fs::is_directory(ranks, ec))
    return Status::invalid(fmt::format("{}: no ranks/ folder: not a directory written by `detaudit fleet`", dir));
  std::vector<fs::path> folders;
  std::vector<std::string> not_ranks;  // named on the report's ignored line, never silently passed over
  for (auto& e : fs::directory_iterator(ranks, ec))
    if (e.is_directory() && !e.is_symlink())
      folders.push_back(e.path());
    else
      not_ranks.push_back(fmt::format("ranks/{}: not a folder (a link or a file): not a rank's",
                                      shown_safely(e.path().filename().string().substr(0, 80))));
  std::sort(folders.begin(), folders.end());
  std::vector<FleetNode> all;
  for (auto& f : folders) {
    // Thousands of folders take a while to read: a signal stops it at once.
    if (interrupted()) return Status::interrupted("interrupted by " + signal_description(interrupted()));
    auto read = [&](const fs::path& p, std::string* text) -> Status {
      text->clear();
      for (fs::path q = p; q != f && q.has_relative_path(); q = q.parent_path()) DETAUDIT_RETURN_IF_ERROR(no_link(q));
      if (!fs::exists(p, ec)) return Status::ok();
      return read_regular_file(p.string(), "fleet file", text);
    };
    std::string node_text, probe_text, train_text;
    if (!fs::exists(f / "node.json", ec)) {  // a folder that never got its node.json: not a rank's
      not_ranks.push_back(fmt::format("ranks/{}: no node.json (not a rank's folder, or a rank that stopped before "
                                      "writing it)",
                                      shown_safely(f.filename().string().substr(0, 80))));
      continue;
    }
    DETAUDIT_RETURN_IF_ERROR(read(f / "node.json", &node_text));
    DETAUDIT_RETURN_IF_ERROR(read(f / "probe" / "results.json", &probe_text));
    DETAUDIT_RETURN_IF_ERROR(read(f / "train" / "results.json", &train_text));
    FleetNode n;
    // A probe killed mid-write leaves no partial results.json (written atomically), so a result text
    // that does not load is damage, not an interruption.
    DETAUDIT_RETURN_IF_ERROR(fleet_node_from_texts(node_text, probe_text, train_text, (f / "node.json").string(), &n));
    // A rank writes into the folder of its own rank and host: node.json in another folder is a copy or a lie,
    // and would let one folder stand for another rank.
    if ("ranks/" + f.filename().string() != n.folder)
      return Status::invalid(fmt::format("{}: rank {} on host '{}' writes into {}, not this folder",
                                         (f / "node.json").string(), n.rank, n.host, n.folder));
    // Its qualify.json (a finished rank's is required).
    std::string q;
    DETAUDIT_RETURN_IF_ERROR(read(f / "qualify.json", &q));
    DETAUDIT_RETURN_IF_ERROR(check_fleet_qualify(q, (f / "qualify.json").string(), n));
    all.push_back(std::move(n));
  }
  if (all.empty()) return Status::invalid(fmt::format("{}: no rank wrote its node.json here", ranks.string()));
  // The run is the one the latest started node belongs to (its number of ranks). A folder left by an
  // earlier run into the same directory (another number of ranks, or an older start of the same rank on
  // another host) is left out and named, never merged.
  auto later = [](const FleetNode& a, const FleetNode& b) { return a.started_at > b.started_at; };
  const FleetNode& newest = *std::min_element(all.begin(), all.end(), later);
  const int expected = newest.ranks;
  std::stable_sort(all.begin(), all.end(), later);
  std::map<int, const FleetNode*> chosen;
  for (auto& n : all) {
    std::string why;
    if (n.ranks != expected)
      why = fmt::format("from a run of {} ranks (the latest run has {})", n.ranks, expected);
    else if (auto it = chosen.find(n.rank); it != chosen.end())
      why = fmt::format("rank {} started again later in {}", n.rank, it->second->folder);
    if (!why.empty()) {
      if (ignored) ignored->push_back(fmt::format("{} (started {}): {}", n.folder, n.started_at, why));
      continue;
    }
    chosen[n.rank] = &n;
  }
  std::sort(not_ranks.begin(), not_ranks.end());
  if (ignored) ignored->insert(ignored->end(), not_ranks.begin(), not_ranks.end());
  // Every missing rank is a row of its own: a node.json claiming a million ranks beside three folders held
  // fleet report for minutes at gigabytes. Past kMaxMissingRanks missing, the claim is refused.
  if (expected > 0 && size_t(expected) - chosen.size() > kMaxMissingRanks)
    return Status::invalid(fmt::format("{}: the latest run claims {} ranks, but {} of them have a folder: more than "
                                       "{} ranks missing is not a fleet this directory holds (a node.json's \"ranks\" "
                                       "is wrong?)",
                                       dir, expected, chosen.size(), kMaxMissingRanks));
  // Collectives are collective: every rank of the job that finished took part in each cell (a cell on some finished
  // ranks only was run by none of them).
  {
    const FleetNode* first = nullptr;
    std::set<std::string> cells_of_first;
    for (auto& [r, n] : chosen) {
      if (n->state != NodeState::kFinished) continue;
      std::set<std::string> cells;
      for (auto& c : n->collectives) cells.insert(c.workload + " @ " + c.library + " " + c.algorithm);
      if (!first) {
        first = n, cells_of_first = std::move(cells);
        continue;
      }
      if (cells != cells_of_first)
        return Status::invalid(fmt::format("{}/{}: its collective cells ({}) are not those of {} ({}), which finished "
                                           "in the same run: a collective runs on every rank or on none",
                                           dir, n->folder, cells.size(), first->folder, cells_of_first.size()));
    }
  }
  // Two ranks are two runs: results that started and finished at the same instants with the same time for every
  // repeat of every cell are one run's, copied into another rank's folder (a clone would make a majority). Three timed
  // repeats alike at least, as for a baseline: two genuine ranks of one tiny cell started in the same second can time
  // its one repeat alike to the nanosecond.
  for (auto a = chosen.begin(); a != chosen.end(); ++a)
    for (auto b = std::next(a); b != chosen.end(); ++b) {
      const Results &x = a->second->probe, &y = b->second->probe;
      if (x.observations.empty() || x.started_at.empty() || x.started_at != y.started_at || x.finished_at != y.finished_at ||
          x.observations.size() != y.observations.size())
        continue;
      size_t timed = 0;
      bool same = true;
      for (size_t i = 0; same && i < x.observations.size(); ++i) {
        same = x.observations[i].seconds == y.observations[i].seconds;
        for (double t : x.observations[i].seconds) timed += t > 0;
      }
      if (same && timed >= 3)
        return Status::invalid(fmt::format("{}/{}: its probe results are a copy of {}'s (the same start, end and time "
                                           "of every repeat): one run does not count as two ranks",
                                           dir, b->second->folder, a->second->folder));
    }
  for (auto& [r, n] : chosen) nodes->push_back(*n);
  for (int r = 0; r < expected; ++r) {
    if (chosen.count(r)) continue;
    FleetNode m;
    m.rank = r, m.ranks = expected, m.state = NodeState::kMissing;
    m.detail = "no folder: this rank never started (or wrote elsewhere)";
    nodes->push_back(std::move(m));
  }
  std::sort(nodes->begin(), nodes->end(), [](const FleetNode& a, const FleetNode& b) { return a.rank < b.rank; });
  return check_fleet_distances(*nodes);
}

Status check_fleet_distances(const std::vector<FleetNode>& nodes) {
  // (machine key, workload, outputs) -> the first rank's cell that gave them
  std::map<std::tuple<std::string, std::string, std::vector<std::string>>, std::pair<const FleetNode*, const Observation*>>
      first;
  for (const FleetNode& n : nodes) {
    if (n.state == NodeState::kMissing || n.state == NodeState::kFailed) continue;
    const std::string key = n.key.dump();
    for (const Observation& o : n.probe.observations) {
      if (o.status != ObsStatus::kOk || !o.oracle || o.fingerprints.empty()) continue;
      const auto [it, fresh] = first.try_emplace({key, o.workload, fingerprint_set(o)}, &n, &o);
      if (const std::string why = fresh ? "" : same_outputs_other_distance(o, *it->second.second); !why.empty())
        return Status::invalid(fmt::format(
            "{}: {} on {}: its outputs are those {} gave on {} on the same machine key, but its oracle distance is not "
            "({}): the same bits against one oracle have one distance (bits copied from a peer?)",
            n.folder, o.workload, o.target, it->second.first->folder, it->second.second->target, why));
    }
  }
  return Status::ok();
}

namespace {

// One fleet's consensus, judged in steps over the same nodes: the nodes' own states and plans, their grouping by
// machine key, each cell's bits within a group (and against the reference's known-good bits), what no step could
// judge, time, and collectives. Each step adds its findings; fleet.json is written from what they left.
class Consensus {
 public:
  Consensus(const std::vector<FleetNode>& nodes, const std::string& dir, const Reference* known)
      : nodes(nodes), dir(dir), known(known) {}

  FleetOutcome run() {
    out.ranks = nodes.empty() ? 0 : nodes[0].ranks;
    for (auto& n : nodes) out.level = std::max(out.level, n.level);
    judge_states();
    judge_plans();
    group_by_key();
    collect_cells();
    judge_bits();
    judge_unjudged();
    judge_time();
    judge_collectives();
    std::stable_sort(out.findings.begin(), out.findings.end(), [](const FleetFinding& a, const FleetFinding& b) {
      return (a.verdict == Verdict::kFail) > (b.verdict == Verdict::kFail);
    });
    for (auto& f : out.findings) (f.verdict == Verdict::kFail ? fails : warns)++;
    for (auto& n : nodes)
      if (n.state == NodeState::kFinished || n.state == NodeState::kRunning || n.state == NodeState::kInterrupted) ++ran;
    // No cell on any node: nothing was judged, whatever the nodes said of themselves.
    out.decision = ran == 0 || cells.empty() ? Decision::kNotJudged : fails > 0 ? Decision::kFail : Decision::kPass;
    write_document();
    return std::move(out);
  }

 private:
  const std::vector<FleetNode>& nodes;
  const std::string& dir;
  const Reference* known;
  FleetOutcome out;
  size_t fails = 0, warns = 0, ran = 0;
  // Machine key hash -> the nodes of that key; the largest group (the reference of key differences); node -> key.
  std::map<std::string, std::vector<size_t>> groups;
  std::string reference;
  std::map<size_t, std::string> group_of;
  // The cells (workload, target), in the order of the first node that has them; level 2's training runs as cells.
  std::vector<std::pair<std::string, std::string>> cells;
  std::set<std::pair<std::string, std::string>> cell_set;
  std::vector<std::vector<Observation>> train_cells;
  // matrix[node][cell]: agree, differs, varies, failed, missing, nondeterministic, alone
  std::vector<std::vector<std::string>> matrix;
  std::vector<std::map<std::pair<std::string, std::string>, const Observation*>> obs_of;
  std::set<std::string> differing_cells;
  std::vector<double> slowness;  // per node: its time against its group's (NAN: not timed)

  void find(Verdict v, FleetFindingKind kind, const FleetNode& n, const std::string& cell, std::string detail,
            nlohmann::json data = nlohmann::json::object()) {
    FleetFinding f;
    f.verdict = v, f.kind = kind, f.rank = n.rank, f.host = n.host, f.cell = cell, f.detail = std::move(detail);
    f.action = fleet_action(kind);
    f.data = std::move(data);
    out.findings.push_back(std::move(f));
  }

  void judge_states() {
    // Nodes that did not run to the end are named; what they wrote still counts.
    for (auto& n : nodes) {
      if (n.state == NodeState::kMissing) find(Verdict::kFail, FleetFindingKind::kMissing, n, "", n.detail);
      if (n.state == NodeState::kFailed) find(Verdict::kFail, FleetFindingKind::kFailed, n, "", "could not run: " + n.detail);
      if (n.state == NodeState::kRunning)
        find(Verdict::kFail, FleetFindingKind::kLost, n, "",
             fmt::format("did not finish (killed, crashed or lost after {} probe cells; those count)",
                         n.probe.observations.size()));
      if (n.state == NodeState::kInterrupted)
        find(Verdict::kFail, FleetFindingKind::kInterrupted, n, "",
             fmt::format("{} after {} probe cells (those count); its command run again resumes it",
                         n.detail.empty() ? "interrupted" : n.detail, n.probe.observations.size()));
      if (n.state == NodeState::kFinished && n.exit_code == 1)
        find(Verdict::kFail, FleetFindingKind::kOwnCheck, n, "", "its own qualification failed: " + n.own_fail);
      if (n.state == NodeState::kFinished && n.exit_code == 2)
        find(Verdict::kFail, FleetFindingKind::kOwnCheck, n, "", "its own qualification could not run a required check");
    }
  }

  void judge_plans() {
    // One fleet, one plan: a node that ran another level, or probe cells another number of times or other workloads
    // than most nodes, did not run the fleet's plan (its cells would be judged against peers that ran others).
    // Each node's plan is described once (its workloads as one text), then compared with the most common.
    {
      std::vector<std::string> plan(nodes.size()), said(nodes.size());
      std::map<std::string, size_t> count;
      size_t common = nodes.size();
      for (size_t i = 0; i < nodes.size(); ++i) {
        const FleetNode& n = nodes[i];
        if (n.state == NodeState::kMissing || n.state == NodeState::kFailed || n.probe.plan.empty()) continue;
        const nlohmann::json& p = n.probe.plan;
        const auto w = p.find("workloads");
        const size_t workloads = w != p.end() ? w->size() : 0;
        said[i] = fmt::format("level {}, {} repeats of {} workloads", n.level, p.value("repeats", int64_t(0)), workloads);
        plan[i] = said[i] + "\n" + (w != p.end() ? w->dump() : "[]");
        if (const size_t c = ++count[plan[i]]; common == nodes.size() || c > count[plan[common]]) common = i;
      }
      for (size_t i = 0; i < nodes.size(); ++i)
        if (common < nodes.size() && !plan[i].empty() && plan[i] != plan[common])
          find(Verdict::kFail, FleetFindingKind::kAnotherPlan, nodes[i], "",
               fmt::format("ran {}, most nodes {}{}", said[i], said[common],
                           said[i] == said[common] ? " (other workloads)" : ""));
    }
  }

  void group_by_key() {
    // Groups by machine key (nodes that recorded one).
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!nodes[i].key.empty()) groups[fleet_key_hash(nodes[i].key)].push_back(i);
    for (auto& [h, members] : groups)
      if (reference.empty() || members.size() > groups[reference].size()) reference = h;
    for (auto& [h, members] : groups)
      for (size_t i : members) group_of[i] = h;
    if (!reference.empty()) {
      const nlohmann::json& ref_key = nodes[groups[reference][0]].key;
      for (auto& [h, members] : groups) {
        if (h == reference || members.size() > 1 || groups[reference].size() < 2) continue;
        const FleetNode& n = nodes[members[0]];
        std::vector<std::string> diffs;
        nlohmann::json fields = nlohmann::json::object();
        std::set<std::string> names;
        for (auto& [k, v] : n.key.items()) names.insert(k);
        for (auto& [k, v] : ref_key.items()) names.insert(k);
        for (auto& k : names) {
          const std::string a = n.key.contains(k) ? n.key[k].get<std::string>() : "(none)";
          const std::string b = ref_key.contains(k) ? ref_key[k].get<std::string>() : "(none)";
          if (a == b) continue;
          diffs.push_back(fmt::format("{} {} (its peers: {})", k, a.size() > 60 ? a.substr(0, 57) + "..." : a,
                                      b.size() > 60 ? b.substr(0, 57) + "..." : b));
          fields[k] = {{"node", a}, {"peers", b}};
        }
        size_t known_cells = 0;
        if (known)
          for (auto& c : known->cells) known_cells += c.key == h;
        find(Verdict::kFail, FleetFindingKind::kKey, n, "",
             fmt::format("its machine key differs from its {} peers' in {}: {}; its cells are not compared with theirs{}",
                         groups[reference].size(), diffs.size(), fmt::join(diffs, "; "),
                         known_cells ? fmt::format(", but with the reference's {} cells of its own key", known_cells)
                                     : std::string(known ? " (the reference holds no cell of its key)" : "")),
             {{"fields", fields}});
      }
    }
  }

  void collect_cells() {
    // The cells, in the order of the first node that has them.
    for (auto& n : nodes)
      for (auto& o : n.probe.observations)
        if (cell_set.insert({o.workload, o.target}).second) cells.push_back({o.workload, o.target});
    // matrix[node][cell]: agree, differs, varies, failed, missing, nondeterministic, alone
    // Level 2's training runs are cells too: a run's final weights, one "repeat". A run with its
    // nondeterminism on may end elsewhere on every node and is compared as a distribution (never by bits).
    train_cells.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (auto& r : nodes[i].train.training) {
        Observation o;
        o.workload =
            fmt::format("training {} condition ({}) seed {} replicate {}", r.model, r.condition, r.seed, r.replicate);
        o.target = r.target;
        o.status = r.status, o.reason = r.reason, o.repeats = 1;
        if (r.ok()) o.fingerprints = {r.weights_fingerprint};
        // Nondeterministic runs count as varying, so the cell is compared as a distribution.
        o.distinct = r.ok() ? (r.nondeterministic ? 2 : 1) : 0;
        o.details["fleet_promise"] = r.nondeterministic ? "nondeterministic" : "deterministic";
        o.seconds = {r.seconds};
        train_cells[i].push_back(std::move(o));
      }
      for (auto& o : train_cells[i])
        if (cell_set.insert({o.workload, o.target}).second) cells.push_back({o.workload, o.target});
    }
    matrix.assign(nodes.size(), std::vector<std::string>(cells.size(), "missing"));
    obs_of.resize(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
      for (auto& o : nodes[i].probe.observations) obs_of[i][{o.workload, o.target}] = &o;
      for (auto& o : train_cells[i]) obs_of[i][{o.workload, o.target}] = &o;
    }
  }

    // A node's cell against the reference's known-good bits of its key: its product and, where both have them, its rows
    // computed alone. The state of the cell in the matrix, with a finding where the bits differ.
    std::string against_known(size_t i, const Observation& o, const ReferenceCell& k, const std::string& name) {
      const std::string whence = fmt::format("known good: {} of {} nodes of this key agreed on it at {}", k.nodes, k.of, k.at);
      if (o.fingerprints[0] != k.fingerprint) {
        find(Verdict::kFail, FleetFindingKind::kReference, nodes[i], name,
             fmt::format("other bits than the reference: {} here, {} {}; oracle: {} here", o.fingerprints[0], k.fingerprint,
                         whence, oracle_words(o)),
             {{"fingerprint", o.fingerprints[0]}, {"reference", k.fingerprint}});
        return "differs";
      }
      if (o.batch && !o.batch->rows_fingerprint.empty() && !k.rows_fingerprint.empty() &&
          o.batch->rows_fingerprint != k.rows_fingerprint) {
        find(Verdict::kFail, FleetFindingKind::kReference, nodes[i], name,
             fmt::format("other bits in the rows computed alone (batch invariance) than the reference: {} here, {} {}",
                         o.batch->rows_fingerprint, k.rows_fingerprint, whence),
             {{"rows_fingerprint", o.batch->rows_fingerprint}, {"reference", k.rows_fingerprint}});
        return "differs";
      }
      return "agree";
    }

  void judge_bits() {
    for (auto& [h, members] : groups) {
      const bool alone = members.size() < 2;
      for (size_t c = 0; c < cells.size(); ++c) {
        const std::string name = cell_name(cells[c].first, cells[c].second);
        std::vector<std::pair<size_t, const Observation*>> present;
        for (size_t i : members) {
          auto it = obs_of[i].find(cells[c]);
          if (it != obs_of[i].end()) present.push_back({i, it->second});
        }
        if (present.empty()) continue;
        // Known-good bits of this key and cell, where a reference holds them (never for a training run).
        const ReferenceCell* k = known ? known->find(h, cells[c].first, cells[c].second) : nullptr;
        // Known-good bits judge only a cell that promises them (a reference edited to hold bits of a target that may
        // vary judges nothing).
        if (k && alone && fleet_promise(nodes[present[0].first], *present[0].second) != Promise::RunToRun::kDeterministic)
          k = nullptr;
        if (alone && !k) {
          matrix[present[0].first][c] = "alone";
          continue;
        }
        if (alone) {
          judge_alone(present[0].first, c, *present[0].second, *k, name);
          continue;
        }
        judge_group_cell(c, name, present, k);
      }
    }
  }

  // One cell of a group of two or more nodes: each node's bits against the reference's where it holds them (a
  // deterministic cell), else against the group's majority; a cell that may vary as distributions.
  void judge_group_cell(size_t c, const std::string& name,
                        const std::vector<std::pair<size_t, const Observation*>>& present, const ReferenceCell* k) {
    size_t ran = 0, det = 0;
    std::map<std::string, size_t> votes;
    for (auto& [i, o] : present) {
      if (o->status != ObsStatus::kOk) continue;
      ++ran;
      if (o->distinct == 1) ++det, ++votes[o->fingerprints[0]];
    }
    const size_t n_present = present.size();
    // Bits are compared where the target promises determinism; where it promises variation (atomics),
    // or where nothing is promised and some node varied, or the cell varied on most nodes: distributions,
    // each node's own verdict against its promise.
    bool promised = true, permitted = false;
    for (auto& [i, o] : present) {
      const auto p = fleet_promise(nodes[i], *o);
      promised = promised && p == Promise::RunToRun::kDeterministic;
      permitted = permitted || p == Promise::RunToRun::kNondeterministic;
    }
    const bool unpromised = !promised && !permitted;  // nothing promised either way
    if (permitted || (unpromised && det < ran) || (ran > 0 && det * 2 <= ran && ran * 2 > n_present)) {
      for (auto& [i, o] : present) {
        matrix[i][c] = o->status == ObsStatus::kOk ? "nondeterministic" : "failed";
        if (o->verdict && *o->verdict == Verdict::kFail)
          find(Verdict::kFail, FleetFindingKind::kOwnCheck, nodes[i], name,
               fmt::format("varies on most nodes (compared as distributions: {} distinct of {} here) and fails "
                           "its promise on this node: {}",
                           o->distinct, o->repeats, o->verdict_reason));
      }
      return;
    }
    const auto [major, major_votes] = most_voted(votes);
    const bool has_majority = major_votes * 2 > n_present;
    const Observation* major_obs = nullptr;
    for (auto& [i, o] : present)
      if (o->status == ObsStatus::kOk && o->distinct == 1 && o->fingerprints[0] == major) major_obs = o;
    for (auto& [i, o] : present) {
      const FleetNode& n = nodes[i];
      std::string& m = matrix[i][c];
      if (o->status != ObsStatus::kOk) {
        // A cell skipped on every node of the group is the same on all: not a finding. (A plain pointer
        // for the lambda: clang 14, the sanitizer build's, cannot capture a structured binding.)
        const Observation* mine = o;
        const bool all_same = std::all_of(present.begin(), present.end(), [&](auto& p) {
          return p.second->status == mine->status && p.second->reason == mine->reason;
        });
        m = all_same ? "agree" : "failed";
        if (!all_same)
          find(Verdict::kFail, FleetFindingKind::kStatus, n, name,
               fmt::format("{} here ({}) where {} of {} nodes ran it", to_string(o->status), o->reason, ran,
                           n_present));
      } else if (o->distinct > 1) {
        m = "varies";
        find(Verdict::kFail, FleetFindingKind::kVaries, n, name,
             fmt::format("{} distinct outputs in {} repeats here; deterministic on {} of {} nodes", o->distinct,
                         o->repeats, det, n_present));
      } else if (k && promised) {
        // Known-good bits judge each node: no vote is needed (two nodes, one of them faulty, are told apart).
        m = against_known(i, *o, *k, name);
      } else if (!has_majority) {
        m = "differs";
        find(Verdict::kFail, FleetFindingKind::kNoMajority, n, name,
             fmt::format("no majority: {} distinct results on {} nodes; this node's {} ({})", votes.size(), n_present,
                         o->fingerprints[0], oracle_words(*o)),
             {{"fingerprint", o->fingerprints[0]}});
      } else if (o->fingerprints[0] != major) {
        m = "differs";
        const std::string kh = kernel_words(*o), km = major_obs ? kernel_words(*major_obs) : "";
        find(unpromised ? Verdict::kWarn : Verdict::kFail, FleetFindingKind::kBits, n, name,
             fmt::format("other bits: {} here, {} on {} of {} nodes; oracle: {} here, {} there{}", o->fingerprints[0],
                         major, major_votes, n_present, oracle_words(*o), major_obs ? oracle_words(*major_obs) : "?",
                         kh.empty() && km.empty() ? ""
                         : kh == km               ? "; the same kernels: " + kh
                                                  : fmt::format("; kernels here: {}; there: {}", kh, km)),
             {{"fingerprint", o->fingerprints[0]},
              {"majority", major},
              {"kernels", kh},
              {"majority_kernels", km},
              {"promise", unpromised ? "none: WARN, the target promises nothing run to run" : "deterministic"}});
      } else {
        m = "agree";
      }
      if (m != "agree") differing_cells.insert(name);
    }
    judge_rows(c, name, present, unpromised, k && promised);
  }

  // A cell of a key no peer shares: the reference's known-good bits are its only judge.
  void judge_alone(size_t i, size_t c, const Observation& o, const ReferenceCell& k, const std::string& name) {
    std::string& m = matrix[i][c];
    if (o.status != ObsStatus::kOk) {
      m = "failed";
      find(Verdict::kFail, FleetFindingKind::kStatus, nodes[i], name,
           fmt::format("{} here ({}) where the reference holds its bits", to_string(o.status), o.reason));
    } else if (o.distinct > 1) {
      m = "varies";
      find(Verdict::kFail, FleetFindingKind::kVaries, nodes[i], name,
           fmt::format("{} distinct outputs in {} repeats here, where the reference holds one", o.distinct,
                       o.repeats));
    } else {
      m = against_known(i, o, k, name);
    }
    if (m != "agree") differing_cells.insert(name);
  }

  // Batch invariance's rows computed alone, of one cell's nodes in a group.
  void judge_rows(size_t c, const std::string& name, const std::vector<std::pair<size_t, const Observation*>>& present,
                  bool unpromised, bool reference_judged) {
    const size_t n_present = present.size();
    // Batch invariance's rows computed alone are outputs too, of the same deterministic kernels: a node that
    // computed them to other bits is as faulty as one whose product was, and a fault that lands only there would
    // pass the product's comparison.
    // (the rows of a node's cell that ran to one output: what is compared)
    auto rows_of = [](const Observation* o) {
      return o->status == ObsStatus::kOk && o->distinct == 1 && o->batch ? &*o->batch : nullptr;
    };
    auto mark_differs = [&](size_t i) {
      if (matrix[i][c] == "agree") matrix[i][c] = "differs";
      differing_cells.insert(name);
    };
    std::map<std::string, size_t> row_votes;
    size_t with_rows = 0;
    for (auto& [i, o] : present)
      if (const BatchInvariance* b = rows_of(o); b && !b->rows_fingerprint.empty())
        ++row_votes[b->rows_fingerprint], ++with_rows;
    // One build writes the rows' fingerprint for every batchinv cell that ran (the key holds the tool's commit):
    // a node of the group without it, beside peers with it, had it taken out of its results.
    if (with_rows > 0)
      for (auto& [i, o] : present)
        if (const BatchInvariance* b = rows_of(o); b && b->rows_fingerprint.empty()) {
          mark_differs(i);
          find(Verdict::kFail, FleetFindingKind::kBits, nodes[i], name,
               fmt::format("its rows computed alone (batch invariance) carry no fingerprint, where {} of {} nodes' of "
                           "the same build do: nothing of them can be compared",
                           with_rows, n_present));
        }
    if (row_votes.size() < 2 || reference_judged) return;  // (the reference judged the rows in judge_bits)
    const auto [rows_major, rows_major_votes] = most_voted(row_votes);
    const bool rows_majority = rows_major_votes * 2 > n_present;
    for (auto& [i, o] : present) {
      const BatchInvariance* b = rows_of(o);
      if (!b || b->rows_fingerprint.empty() || (rows_majority && b->rows_fingerprint == rows_major)) continue;
      mark_differs(i);
      find(unpromised ? Verdict::kWarn : Verdict::kFail, rows_majority ? FleetFindingKind::kBits : FleetFindingKind::kNoMajority, nodes[i], name,
           rows_majority
               ? fmt::format("other bits in the rows computed alone (batch invariance): {} here, {} on {} of {} nodes "
                             "({} of {} rows differ from the product here)",
                             b->rows_fingerprint, rows_major, rows_major_votes, n_present, b->rows_differing,
                             b->rows_checked)
               : fmt::format("no majority in the rows computed alone (batch invariance): {} distinct results on {} "
                             "nodes; this node's {}",
                             row_votes.size(), n_present, b->rows_fingerprint),
           {{"rows_fingerprint", b->rows_fingerprint}, {"majority", rows_majority ? rows_major : ""}});
    }
  }

  void judge_unjudged() {
    // A finished node of which nothing was judged is no pass: no machine key (never grouped, never
    // compared), no cell at all, or a cell its peers of the same key ran missing from it.
    for (size_t i = 0; i < nodes.size(); ++i) {
      const FleetNode& n = nodes[i];
      if (n.state != NodeState::kFinished) continue;
      if (n.key.empty()) {
        find(Verdict::kFail, FleetFindingKind::kNothing, n, "", "finished without a machine key: its cells cannot be compared with any peer's");
        continue;
      }
      if (obs_of[i].empty()) {
        find(Verdict::kFail, FleetFindingKind::kNothing, n, "", "finished, but its results hold no cell: nothing of it was judged");
        continue;
      }
      // Cells that all skipped, crashed or timed out hold no bits: nothing of the node was compared.
      bool any_ran = false;
      for (auto& [cell, o] : obs_of[i]) any_ran = any_ran || o->status == ObsStatus::kOk;
      if (!any_ran) {
        find(Verdict::kFail, FleetFindingKind::kNothing, n, "",
             fmt::format("finished, but none of its {} cells ran (skipped, crashed or timed out): nothing of it was "
                         "judged",
                         obs_of[i].size()));
        continue;
      }
      const auto& members = groups[group_of[i]];
      if (members.size() < 2) continue;
      for (size_t c = 0; c < cells.size(); ++c) {
        if (matrix[i][c] != "missing") continue;
        size_t peers = 0;
        for (size_t k : members) peers += k != i && obs_of[k].count(cells[c]);
        if (peers)
          find(Verdict::kFail, FleetFindingKind::kMissingCell, n, cell_name(cells[c].first, cells[c].second),
               fmt::format("not in its results, though {} of its {} peers of the same key ran it", peers, members.size() - 1));
      }
    }
  }

  void judge_time() {
    // Time outliers: a node's median over cells of its median seconds against its group's median.
    slowness.assign(nodes.size(), NAN);
    for (auto& [h, members] : groups) {
      if (members.size() < 2) continue;
      std::vector<std::vector<double>> ratios(nodes.size());
      for (auto& cell : cells) {
        std::vector<std::pair<size_t, double>> med;
        for (size_t i : members) {
          auto it = obs_of[i].find(cell);
          if (it == obs_of[i].end() || it->second->status != ObsStatus::kOk) continue;
          const double s = median_of(it->second->seconds);
          if (std::isfinite(s)) med.push_back({i, s});
        }
        if (med.size() < 2) continue;
        std::vector<double> v;
        for (auto& [i, s] : med) v.push_back(s);
        const double g = median_of(v);
        if (!(g >= 1e-3)) continue;  // under a millisecond: timer noise
        for (auto& [i, s] : med) ratios[i].push_back(s / g);
      }
      for (size_t i : members) {
        if (ratios[i].empty()) continue;
        slowness[i] = median_of(ratios[i]);
        if (slowness[i] >= kFleetSlowWarn)
          find(slowness[i] >= kFleetSlowFail ? Verdict::kFail : Verdict::kWarn, FleetFindingKind::kSlow, nodes[i], "",
               fmt::format("{:.1f}x slower than its group (median over {} timed cells)", slowness[i], ratios[i].size()),
               {{"ratio", slowness[i]}, {"cells", ratios[i].size()}});
      }
      // Cells under a millisecond are timer noise one by one, but not together: a node that takes seconds
      // where its peers take microseconds hides below that floor. Each node's total over the cells every
      // member ran, against the group's median total.
      std::vector<double> total(nodes.size(), 0.0);
      size_t common = 0;
      for (auto& cell : cells) {
        std::vector<double> med;
        for (size_t i : members) {
          auto it = obs_of[i].find(cell);
          if (it == obs_of[i].end() || it->second->status != ObsStatus::kOk) break;
          const double s = median_of(it->second->seconds);
          if (!std::isfinite(s)) break;
          med.push_back(s);
        }
        if (med.size() != members.size()) continue;
        ++common;
        for (size_t k = 0; k < members.size(); ++k) total[members[k]] += med[k];
      }
      std::vector<double> totals;
      for (size_t i : members) totals.push_back(total[i]);
      const double g = common ? median_of(totals) : 0.0;
      if (common > 0)
        for (size_t i : members) {
          const double r = total[i] / g;
          // Judged only where the difference itself is measured time (10 ms), not the timer's noise.
          if (r < kFleetSlowWarn || total[i] - g < 0.01 || (std::isfinite(slowness[i]) && slowness[i] >= kFleetSlowWarn))
            continue;
          slowness[i] = std::isfinite(slowness[i]) ? std::max(slowness[i], r) : r;
          find(r >= kFleetSlowFail ? Verdict::kFail : Verdict::kWarn, FleetFindingKind::kSlow, nodes[i], "",
               fmt::format("{:.1f}x slower than its group in total ({:.3g} s against a median of {:.3g} s over the {} "
                           "cells every node ran)",
                           r, total[i], g, common),
               {{"ratio", r}, {"cells", common}, {"total_seconds", total[i]}});
        }
    }
  }

  void judge_collectives() {
    // Collectives: within one algorithm, every rank and every repeat must give the same bits (the ranks
    // all hold the reduced vector); across algorithms the sums may differ, and are only said.
    std::map<std::string, std::map<std::string, std::vector<std::pair<size_t, const CollectiveCell*>>>> coll;
    for (size_t i = 0; i < nodes.size(); ++i)
      for (auto& c : nodes[i].collectives) coll[c.workload][c.library + " " + c.algorithm].push_back({i, &c});
    for (auto& [workload, algos] : coll) {
      std::set<std::string> across;
      for (auto& [algo, list] : algos) {
        std::set<std::string> fps;
        size_t errors = 0;
        int ranks = 0;
        for (auto& [i, c] : list) {
          ranks = c->ranks;
          if (c->status != "ok") {
            ++errors;
            find(Verdict::kFail, FleetFindingKind::kCollective, nodes[i], workload + " @ " + algo, c->status);
            continue;
          }
          for (auto& f : c->fingerprints) fps.insert(f);
        }
        const bool same = fps.size() == 1;
        if (fps.size() > 1) {
          for (auto& [i, c] : list)
            find(Verdict::kFail, FleetFindingKind::kCollective, nodes[i], workload + " @ " + algo,
                 fmt::format("{} distinct results across {} ranks and their repeats (a fixed algorithm on fixed ranks "
                             "promises one): this rank's {}",
                             fps.size(), list.size(), c->fingerprints.empty() ? "none" : c->fingerprints[0]));
        }
        if (same) across.insert(*fps.begin());
        FleetCollective fc;
        fc.workload = workload, fc.library = list.front().second->library, fc.algorithm = list.front().second->algorithm;
        fc.ranks = ranks, fc.nodes = list.size(), fc.errors = errors, fc.distinct = fps.size();
        fc.verdict = fps.size() <= 1 && errors == 0 ? Verdict::kPass : Verdict::kFail;
        fc.fingerprint = same ? *fps.begin() : "";
        out.collectives.push_back(std::move(fc));
      }
      for (auto& c : out.collectives)
        if (c.workload == workload) c.distinct_across_algorithms = across.size();
    }
  }

  // One node's row: its state, key, cells, verdict and its most urgent action.
  FleetNodeRow node_row(size_t i) {
    const FleetNode& n = nodes[i];
    FleetNodeRow row;
    row.rank = n.rank, row.host = n.host, row.folder = n.folder, row.state = n.state, row.exit_code = n.exit_code;
    row.key = group_of.count(i) ? group_of[i] : "";
    row.cells = n.probe.observations.size() + train_cells[i].size();  // level 2: the runs too
    for (auto& m : matrix[i]) row.cells_agreeing += m == "agree";
    if (std::isfinite(slowness[i])) row.time_ratio = slowness[i];
    size_t nf = 0, nw = 0;
    std::vector<const FleetFinding*> mine;
    for (auto& f : out.findings)
      if (f.rank == n.rank) (f.verdict == Verdict::kFail ? nf : nw)++, mine.push_back(&f);
    row.verdict = nf ? Verdict::kFail : nw ? Verdict::kWarn : Verdict::kPass;
    // The most urgent action among its findings (Action's order), or none.
    for (const FleetFinding* f : mine)
      if (!row.action || int(f->action) < int(*row.action)) row.action = f->action;
    row.summary = node_summary(mine);
    row.findings = nf + nw;
    return row;
  }

  // What fleet.json says besides the findings: who made it, the groups, each node's row, the cells (disagreeing
  // ones first) and their matrix.
  void write_document() {
    out.tool_version = DETAUDIT_VERSION;
    out.tool_commit = git_commit();
    out.created_at = utc_now_iso8601();
    out.dir = dir;
    out.summary = fmt::format("{} nodes ({} ran), {} machine key group(s), {} cells: {} FAIL, {} WARN", nodes.size(),
                              ran, groups.size(), cells.size(), fails, warns);
    for (auto& [h, members] : groups) {
      FleetGroup g;
      g.key = h, g.fields = nodes[members[0]].key, g.reference = h == reference;
      for (size_t i : members) g.ranks.push_back(nodes[i].rank);
      out.groups.push_back(std::move(g));
    }
    for (size_t i = 0; i < nodes.size(); ++i) out.nodes.push_back(node_row(i));
    std::vector<size_t> order(cells.size());
    for (size_t c = 0; c < cells.size(); ++c) order[c] = c;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return differing_cells.count(cell_name(cells[a].first, cells[a].second)) >
             differing_cells.count(cell_name(cells[b].first, cells[b].second));
    });
    for (size_t c : order) out.cells.push_back(cell_name(cells[c].first, cells[c].second));
    for (size_t i = 0; i < nodes.size(); ++i) {
      std::vector<std::string> row;
      for (size_t c : order) row.push_back(matrix[i][c]);
      out.matrix.push_back(std::move(row));
    }
    out.cells_differing = differing_cells.size();
  }
};

}  // namespace

FleetOutcome fleet_consensus(const std::vector<FleetNode>& nodes, const std::string& dir, const Reference* known) {
  return Consensus(nodes, dir, known).run();
}

Action fleet_action(FleetFindingKind kind) {
  switch (kind) {
    case FleetFindingKind::kKey:
    case FleetFindingKind::kAnotherPlan: return Action::kConfigure;
    case FleetFindingKind::kSlow: return Action::kMonitor;
    case FleetFindingKind::kMissing:
    case FleetFindingKind::kFailed:
    case FleetFindingKind::kLost:
    case FleetFindingKind::kInterrupted:
    case FleetFindingKind::kNothing:
    case FleetFindingKind::kMissingCell: return Action::kRetest;
    case FleetFindingKind::kBits:
    case FleetFindingKind::kNoMajority:
    case FleetFindingKind::kVaries:
    case FleetFindingKind::kStatus:
    case FleetFindingKind::kReference:
    case FleetFindingKind::kOwnCheck:
    case FleetFindingKind::kCollective: return Action::kIsolate;
  }
  return Action::kIsolate;
}

}  // namespace detaudit
