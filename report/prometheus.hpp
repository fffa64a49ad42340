// `--metrics FILE` of healthcheck, qualify and fleet: Prometheus's text exposition format, for node_exporter's
// textfile collector (written atomically, as that collector asks: a temporary file, then a rename), so that a
// dashboard and an alert see every node. Names and labels in dcgm-exporter's manner: one gauge per fact, labels for
// where (host, cpu, core, package, or gpu and uuid), what (command, cell, kind) and what to do (action).
//
//   detaudit_health_status{command,host[,rank]}     0 ok, 1 a problem, 2 could not judge (the exit code)
//   detaudit_cells_judged{command,host[,rank]}      cells judged
//   detaudit_findings{command,host[,rank],action}   findings per action class (every class, 0 where none)
//   detaudit_finding{command,host,...,action,kind,cell}   findings with these labels (the first kMaxFindingSeries sets)
//   detaudit_check_seconds{command,host}            how long the command took
//   detaudit_last_check_timestamp_seconds{command,host}   when it ended (Unix time)
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kernels/status.hpp"

namespace detaudit {

inline constexpr size_t kMaxFindingSeries = 200;  // one series per finding beyond this floods a time-series store

using Labels = std::vector<std::pair<std::string, std::string>>;  // in order, as written

class PromText {
 public:
  // A gauge family; its HELP and TYPE lines come once, before its first sample.
  void sample(const std::string& name, const std::string& help, const Labels& labels, double value);
  std::string str() const;

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> families_;  // name -> help, samples
};

// One finding as a series: its labels beyond command and host, and its action class.
struct MetricFinding {
  Labels where;  // cpu, core, package / gpu, uuid / rank
  std::string action, kind, cell;
};

// The families every command writes, for one subject (a node: host, and rank in a fleet).
void add_node_metrics(PromText* p, const std::string& command, const Labels& subject, int exit_code, size_t cells,
                      const std::vector<MetricFinding>& findings);
// detaudit_check_seconds and detaudit_last_check_timestamp_seconds.
void add_run_metrics(PromText* p, const std::string& command, const std::string& host, double seconds);

// Writes the text to `path` atomically; refuses a destination that is not a metrics file detaudit wrote.
Status write_metrics(const std::string& path, const PromText& p);

}  // namespace detaudit
