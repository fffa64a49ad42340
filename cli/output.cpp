#include "cli/output.hpp"

#include <unistd.h>

#include <cstdlib>
#include <optional>

#include "cli/common.hpp"
#include "contract/results.hpp"
#include "kernels/input_file.hpp"
#include "report/document.hpp"

namespace detaudit::cli {

namespace {

// A copy of the parsed flags: the command's own may not outlive it (main() reads them after it returns).
struct Active {
  std::string command;
  std::optional<OutputFlags> flags;
  bool judging = false;
  bool writes_files = false;
};
Active& active() {
  static Active a;
  return a;
}

bool colour_on_stdout() {
  const char* no = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) && !(no && *no) && active_format() == Format::kText;
}

std::string coloured(const std::string& word) {
  if (!colour_on_stdout()) return word;
  const char* c = word == "PASS" ? "\033[1;32m" : word == "FAIL" ? "\033[1;31m" : "\033[1;33m";
  return c + word + "\033[0m";
}

std::string line_with(const Outcome& o, const std::string& word) {
  std::string s = fmt::format("verdict: {}  fail={} warn={} skip={}  report={}", word, o.counts.fail, o.counts.warn,
                              o.counts.skip, o.report_md.empty() ? "-" : shown_safely(o.report_md));
  if (o.counts.fail > 0 && !o.first_fail.empty()) s += "  first: " + shown_safely(o.first_fail);
  if (o.exit_code != 0 && o.exit_code != 1 && !o.error.empty()) s += "  error: " + shown_safely(o.error);
  return s;
}

// --format md: the command's own markdown; else the markdown report it wrote (report, fleet report, analyze,
// diverge, import); else its text as a fenced block (baseline save, export), which renders as it prints.
std::string markdown_of(const Outcome& o) {
  if (!o.markdown.empty()) return o.markdown;
  if (std::string md; !o.report_md.empty() && read_regular_file(o.report_md, "markdown report", &md).is_ok()) return md;
  return "```text\n" + o.text + (o.text.empty() || o.text.back() == '\n' ? "" : "\n") + "```\n";
}

}  // namespace

Format OutputFlags::resolved() const {
  if (json || format == "json") return Format::kJson;
  return format == "md" ? Format::kMarkdown : Format::kText;
}

void add_output_flags(CLI::App* sub, OutputFlags* flags, bool judging) {
  auto* format = sub->add_option("--format", flags->format,
                                 "Output: text (the terminal), md (markdown, for a pull request) or json (one "
                                 "object: schema, exit_code, " +
                                     std::string(judging ? "verdict, counts, " : "") + "report paths, the results)")
                     ->check(CLI::IsMember({"text", "md", "json"}))
                     ->capture_default_str();
  sub->add_flag("--json", flags->json, "The same as --format json")->excludes(format);
  sub->add_flag("--quiet", flags->quiet,
                judging ? "Print only the closing verdict line (and errors); no progress"
                        : "Print nothing but errors; no progress");
}

void set_active_command(const std::string& name, const OutputFlags* flags, bool judging, bool writes_files) {
  active() = {name, flags ? std::optional<OutputFlags>(*flags) : std::nullopt, judging, writes_files};
}

Format active_format() { return active().flags ? active().flags->resolved() : Format::kText; }
bool active_quiet() { return active().flags && active().flags->quiet; }
const std::string& active_command() { return active().command; }
bool active_writes_files() { return active().writes_files; }

std::string markdown_summary(const std::string& title, const VerdictTally& t, const std::string& lead,
                             const std::vector<std::vector<std::string>>& fails, const std::vector<std::string>& header,
                             const std::string& report) {
  Document d;
  d.title = title;
  Section& s = d.add("");
  if (!lead.empty()) s.para(inline_text(lead));
  s.table({"PASS", "FAIL", "EXPECTED", "WARN", "SKIP"}, {{{std::to_string(t.pass)},
                                                          {std::to_string(t.fail)},
                                                          {std::to_string(t.expected)},
                                                          {std::to_string(t.warn)},
                                                          {std::to_string(t.skip)}}});
  if (!fails.empty()) {
    std::vector<std::vector<Cell>> rows;
    for (auto& f : fails) {
      std::vector<Cell> r;
      for (auto& x : f) r.push_back({inline_text(x)});
      rows.push_back(std::move(r));
    }
    d.add("FAIL").table(header, std::move(rows)).md_budget(40000);
  }
  if (!report.empty()) d.add("").para("Full report: " + inline_code(report));
  return render_markdown(d);
}

const char* verdict_word(const Outcome& o) {
  if (o.exit_code != 0 && o.exit_code != 1) return "ERROR";
  return o.exit_code == 1 || o.counts.fail > 0 ? "FAIL" : "PASS";
}

std::string verdict_line(const Outcome& o) { return line_with(o, verdict_word(o)); }

nlohmann::json outcome_json(const Outcome& o) {
  nlohmann::json j = {{"schema", kCliSchema}, {"command", active().command}, {"exit_code", o.exit_code}};
  if (active().judging) {
    j["verdict"] = verdict_word(o);
    j["counts"] = o.counts.to_json();
  }
  nlohmann::json reports = nlohmann::json::object();
  if (!o.report_md.empty()) reports["md"] = o.report_md;
  if (!o.report_html.empty()) reports["html"] = o.report_html;
  j["reports"] = reports;
  if (!o.first_fail.empty()) j["first_fail"] = o.first_fail;
  if (!o.error.empty()) j["error"] = o.error;
  for (auto& [k, v] : o.data.items())
    if (!j.contains(k)) j[k] = v;
  return j;
}

int emit(const Outcome& o) {
  // Every text the tool prints passes shown_safely: a string read from a file (a CPU model, a library version, a
  // host name) reaches the terminal as text, never as an escape sequence; JSON writes every character beyond
  // ASCII as \uXXXX, so no C1 control (U+0080..U+009F) reaches a terminal raw either.
  if (o.exit_code != 0 && o.exit_code != 1 && !o.error.empty())
    say(stderr, "detaudit: error: {}\n", shown_safely(o.error));
  const Format f = active_format();
  if (f == Format::kJson) {
    put(stdout, outcome_json(o).dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n");
    return o.exit_code;
  }
  if (!active_quiet()) {
    const std::string body = shown_safely(f == Format::kMarkdown ? markdown_of(o) : o.text);
    put(stdout, body);
    if (!body.empty() && body.back() != '\n') put(stdout, "\n");
  }
  if (active().judging) put(stdout, line_with(o, coloured(verdict_word(o))) + "\n");
  return o.exit_code;
}

std::function<void(const std::string&)> progress_sink() {
  if (active_quiet()) return nullptr;
  return [](const std::string& line) { say(stderr, "[detaudit] {}\n", shown_safely(line)); };
}

void emit_failure(const std::string& msg) {
  if (active().command.empty()) return;
  Outcome o;
  o.exit_code = 2;
  o.error = msg;
  if (active_format() == Format::kJson) {
    put(stdout, outcome_json(o).dump(2, ' ', true, nlohmann::json::error_handler_t::replace) + "\n");
    return;
  }
  if (active().judging) put(stdout, line_with(o, coloured("ERROR")) + "\n");
}

}  // namespace detaudit::cli
