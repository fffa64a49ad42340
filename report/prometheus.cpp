#include "report/prometheus.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "contract/atomic_file.hpp"

namespace detaudit {

namespace {
// A label value as the text format wants it: backslash, double quote and newline escaped.
std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}
}  // namespace

void PromText::sample(const std::string& name, const std::string& help, const Labels& labels, double value) {
  auto it = families_.find(name);
  if (it == families_.end()) {
    order_.push_back(name);
    it = families_.emplace(name, std::make_pair(help, std::vector<std::string>{})).first;
  }
  std::string line = name;
  if (!labels.empty()) {
    line += "{";
    for (size_t i = 0; i < labels.size(); ++i)
      line += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escaped(labels[i].second));
    line += "}";
  }
  it->second.second.push_back(line + " " + number(value));
}

std::string PromText::str() const {
  std::string out;
  for (auto& name : order_) {
    const auto& [help, samples] = families_.at(name);
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
    for (auto& s : samples) out += s + "\n";
  }
  return out;
}

void add_node_metrics(PromText* p, const std::string& command, const Labels& subject, int exit_code, size_t cells,
                      const std::vector<MetricFinding>& findings) {
  Labels base = {{"command", command}};
  base.insert(base.end(), subject.begin(), subject.end());
  // The first family names the file as detaudit's (Own::kMetrics reads its first line).
  p->sample("detaudit_health_status", "0 ok, 1 a problem (see detaudit_finding), 2 could not judge", base,
            exit_code == 0 || exit_code == 1 ? exit_code : 2);
  p->sample("detaudit_cells_judged", "Cells judged (a cell on two CPUs counts twice)", base, double(cells));
  for (const char* action : {"ISOLATE", "CONFIGURE", "RETEST", "MONITOR"}) {
    size_t n = 0;
    for (auto& f : findings) n += f.action == action;
    Labels l = base;
    l.push_back({"action", action});
    p->sample("detaudit_findings", "Findings per action class", l, double(n));
  }
  // One series per distinct set of labels (a series twice is refused by a scrape), valued by how many findings have
  // them; the first kMaxFindingSeries.
  std::vector<Labels> series;
  std::vector<size_t> count;
  for (auto& f : findings) {
    Labels l = base;
    l.insert(l.end(), f.where.begin(), f.where.end());
    l.push_back({"action", f.action});
    l.push_back({"kind", f.kind});
    l.push_back({"cell", f.cell});
    const auto at = std::find(series.begin(), series.end(), l);
    if (at != series.end()) {
      ++count[size_t(at - series.begin())];
    } else if (series.size() < kMaxFindingSeries) {
      series.push_back(std::move(l));
      count.push_back(1);
    }
  }
  for (size_t i = 0; i < series.size(); ++i)
    p->sample("detaudit_finding", "Findings with these labels (the first 200 sets): where, what to do, what, which cell",
              series[i], double(count[i]));
}

void add_run_metrics(PromText* p, const std::string& command, const std::string& host, double seconds) {
  const Labels l = {{"command", command}, {"host", host}};
  p->sample("detaudit_check_seconds", "How long the command ran", l, seconds);
  p->sample("detaudit_last_check_timestamp_seconds", "When it ended (Unix time)", l, double(std::time(nullptr)));
}

Status write_metrics(const std::string& path, const PromText& p) {
  return write_file_atomic(path, p.str(), Own::kMetrics);
}

}  // namespace detaudit
