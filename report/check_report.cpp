#include "report/check_report.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/probe_report.hpp"  // kMarkdownLimit

namespace detaudit {

// ---- rendering -------------------------------------------------------------------------------------
namespace {

constexpr size_t kMdField = 300;  // a header field in the markdown (from the baseline file, or a path)

std::string plural(int n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); }

std::string where(const CheckFinding& f) { return f.target.empty() ? f.workload : f.workload + " on " + f.target; }

bool listed_as_new(const CheckFinding& f) {
  return (f.kind == FindingKind::kNoBaseline || f.kind == FindingKind::kTrainingNoBaseline) && f.verdict != Verdict::kFail;
}

std::vector<const CheckFinding*> pick(const CheckReport& rep, Verdict v, bool new_cells = false) {
  std::vector<const CheckFinding*> out;
  for (auto& f : rep.findings)
    if (f.verdict == v && listed_as_new(f) == new_cells) out.push_back(&f);
  return out;
}

// Cells on another key whose bits changed: no failure, but what a release review wants to see.
std::vector<const CheckFinding*> other_key_changes(const CheckReport& rep) {
  std::vector<const CheckFinding*> out;
  for (auto& f : rep.findings)
    if (f.kind == FindingKind::kOtherKey && f.old_value != f.new_value) out.push_back(&f);
  return out;
}

// At most `max` bytes of `s` and "..." when clipped, never cutting a UTF-8 character.
std::string clip(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // s[cut] starts a character
  return s.substr(0, cut) + "...";
}

std::string kernels_text(const std::vector<std::string>& ks, size_t max_names, size_t max_len) {
  std::string s;
  for (size_t i = 0; i < ks.size() && i < max_names; ++i) {
    std::string k = clip(ks[i], max_len);
    s += (i ? ", " : "") + k;
  }
  if (ks.size() > max_names) s += fmt::format(", ... and {} more", ks.size() - max_names);
  return s;
}

std::string summary_line(const CheckReport& rep) {
  return fmt::format(
      "{} cells compared ({} on the same key, {} on another key, {} of them with other bits), {} training runs; "
      "{} FAIL, {} WARN, {} not judged, {} new without a baseline",
      rep.cells_compared, rep.cells_same_key, rep.cells_other_key, rep.cells_other_key_bits_changed, rep.runs_compared,
      rep.count(Verdict::kFail), rep.count(Verdict::kWarn), int(pick(rep, Verdict::kSkip).size()),
      int(pick(rep, Verdict::kSkip, true).size()));
}

std::string render_text(const CheckReport& rep) {
  std::string s = fmt::format("detaudit check {} against {} (baseline of {}, created {}, detaudit {})\n", rep.dir,
                              rep.baseline_path, rep.baseline_source, rep.baseline_created_at, rep.baseline_tool);
  auto section = [&](const char* title, const std::vector<const CheckFinding*>& fs, size_t cap) {
    if (fs.empty()) return;
    s += fmt::format("{} ({}):\n", title, fs.size());
    for (size_t i = 0; i < fs.size() && i < cap; ++i) {
      const auto& f = *fs[i];
      s += fmt::format("  {:<8} {:<20} {}: {}\n", to_string(f.verdict), to_string(f.kind), where(f), f.message);
      if (!f.old_kernels.empty()) s += "           kernels before: " + kernels_text(f.old_kernels, 8, 160) + "\n";
      if (!f.new_kernels.empty()) s += "           kernels now:    " + kernels_text(f.new_kernels, 8, 160) + "\n";
    }
    if (fs.size() > cap) s += fmt::format("  ... and {} more (--format json lists every finding)\n", fs.size() - cap);
  };
  section("FAIL", pick(rep, Verdict::kFail), std::numeric_limits<size_t>::max());
  section("WARN", pick(rep, Verdict::kWarn), 50);
  section("not judged", pick(rep, Verdict::kSkip), 20);
  section("new, no baseline", pick(rep, Verdict::kSkip, true), 20);
  section("other bits where the key differs (not failures)", other_key_changes(rep), 20);
  s += summary_line(rep) + "\n";
  int fails = rep.count(Verdict::kFail);
  int warns = rep.count(Verdict::kWarn);
  // The closing line says what the exit code says: a check with training cells it could not judge has not
  // passed (exit 2 without --allow-unjudged).
  s += fails                  ? "check FAILED: " + plural(fails, "failure") + "\n"
       : rep.decision() == Decision::kNotJudged ? fmt::format("check could not judge {} of the baseline (not passed)\n",
                                            plural(int(rep.training_not_judged.size()), "training cell"))
                              : "check passed" + (warns ? " (" + plural(warns, "warning") + ")" : std::string()) + "\n";
  return s;
}

// A code span for GitHub markdown (safe in a table cell); text with a backtick or a line break is escaped instead.
std::string md_code(const std::string& s) {
  if (s.empty() || s.find_first_of("`\n\r") != std::string::npos) return markdown_escape(s);
  std::string out = "`";
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out + "`";
}

std::string md_row(const CheckFinding& f) {
  std::string what = std::string("`") + to_string(f.kind) + "`";
  std::string change;
  if (!f.old_value.empty() || !f.new_value.empty())
    change = markdown_escape(f.old_value.empty() ? "-" : f.old_value) + " → " + markdown_escape(f.new_value.empty() ? "-" : f.new_value);
  std::string msg = markdown_escape(clip(f.message, 400));
  if (!f.old_kernels.empty()) msg += "<br>kernels before: " + markdown_escape(kernels_text(f.old_kernels, 3, 80));
  if (!f.new_kernels.empty()) msg += "<br>kernels now: " + markdown_escape(kernels_text(f.new_kernels, 3, 80));
  return fmt::format("| {} | {} | {} | {} | {} | {} |\n", to_string(f.verdict), what, md_code(f.workload),
                     md_code(f.target), change, msg);
}

// Rows until `budget` characters are used, then "... and N more".
std::string md_table(const std::vector<const CheckFinding*>& fs, size_t budget) {
  std::string s = "| verdict | kind | workload | target | baseline → now | message |\n|---|---|---|---|---|---|\n";
  size_t shown = 0;
  for (auto* f : fs) {
    std::string row = md_row(*f);
    if (s.size() + row.size() > budget) break;
    s += row;
    ++shown;
  }
  if (shown < fs.size()) s += fmt::format("\n... and {} more (`--format json` lists every finding)\n", fs.size() - shown);
  return s;
}

std::string render_md(const CheckReport& rep) {
  int fails = rep.count(Verdict::kFail), warns = rep.count(Verdict::kWarn);
  std::string s = fmt::format("## detaudit check: {}\n\n", fails ? "FAIL (" + plural(fails, "failure") + ")"
                                                              : (warns ? "PASS (" + plural(warns, "warning") + ")" : "PASS"));
  // The baseline file's header fields and the paths are whatever they are: each clipped.
  s += fmt::format("{} against {} (baseline of {}, created {}, detaudit {}).\n\n", md_code(clip(rep.dir, kMdField)),
                   md_code(clip(rep.baseline_path, kMdField)), md_code(clip(rep.baseline_source, kMdField)),
                   markdown_escape(clip(rep.baseline_created_at, kMdField)),
                   markdown_escape(clip(rep.baseline_tool, kMdField)));
  s += markdown_escape(summary_line(rep)) + "\n\n";
  // Budgets: failures first and most; the whole stays under kMarkdownLimit.
  auto fl = pick(rep, Verdict::kFail), wl = pick(rep, Verdict::kWarn), sl = pick(rep, Verdict::kSkip),
       nl = pick(rep, Verdict::kSkip, true);
  if (!fl.empty()) s += fmt::format("### Failures ({})\n\n", fl.size()) + md_table(fl, 28000) + "\n";
  if (!wl.empty())
    s += fmt::format("<details><summary>Warnings ({})</summary>\n\n", wl.size()) + md_table(wl, 10000) + "\n</details>\n\n";
  if (!sl.empty())
    s += fmt::format("<details><summary>Not judged ({})</summary>\n\n", sl.size()) + md_table(sl, 5000) + "\n</details>\n\n";
  if (!nl.empty())
    s += fmt::format("<details><summary>New, no baseline ({})</summary>\n\n", nl.size()) + md_table(nl, 5000) +
         "\n</details>\n\n";
  auto ol = other_key_changes(rep);
  if (!ol.empty())
    s += fmt::format("<details><summary>Other bits where the key differs, not failures ({})</summary>\n\n", ol.size()) +
         md_table(ol, 5000) + "\n</details>\n";
  return cap_markdown(s, kMarkdownLimit);
}

}  // namespace

std::string cap_markdown(const std::string& md, size_t limit) {
  if (md.size() < limit) return md;
  // Cut after a whole line, so neither a UTF-8 character nor a table row nor a tag is split, then close
  // the <details> blocks still open there (ours start a line with "<details>" and end one as
  // "</details>"; escaped user text cannot).
  size_t reserve = 64;
  while (true) {
    size_t end = 0;  // bytes kept: md[0, end)
    if (limit > reserve) {
      size_t nl = md.rfind('\n', limit - reserve - 1);
      end = nl == std::string::npos ? 0 : nl + 1;
    }
    int open = 0;
    for (size_t p = 0; p < end;) {
      size_t q = md.find('\n', p);
      std::string_view line(md.data() + p, (q == std::string::npos || q >= end ? end : q) - p);
      if (line.starts_with("<details>")) ++open;
      else if (line.starts_with("</details>") && open > 0) --open;
      p = q == std::string::npos ? end : q + 1;
    }
    std::string tail = "\n... (truncated: `--format json` lists every finding)\n";
    for (int i = 0; i < open; ++i) tail += "\n</details>\n";
    if (end + tail.size() < limit || end == 0) return md.substr(0, end) + tail;
    reserve = limit - end + tail.size();  // cut earlier, leaving room for this tail
  }
}

std::string render_check(const CheckReport& rep, OutputFormat format) {
  switch (format) {
    case OutputFormat::kText: return render_text(rep);
    case OutputFormat::kMarkdown: return render_md(rep);
    case OutputFormat::kJson: return to_json(rep).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return render_text(rep);
}

}  // namespace detaudit
