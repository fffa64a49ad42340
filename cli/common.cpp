#include "cli/common.hpp"
#include "contract/results.hpp"

#include <fmt/ranges.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "cli/output.hpp"
#include "contract/command_text.hpp"
#include "probes/child.hpp"  // interrupted()

namespace detaudit::cli {

namespace {
std::atomic<int> g_stdout_lost{0};  // 0, or the errno of the first write to stdout that failed
std::atomic<bool> g_stdout_closed{false};
}  // namespace

void mark_stdout_closed() { g_stdout_closed = true; }
bool stdout_was_closed() { return g_stdout_closed.load(); }

void put(FILE* f, const std::string& s) {
  if (f == stdout && !s.empty() && g_stdout_closed) mark_stdout_lost(EBADF);
  bool ok = std::fwrite(s.data(), 1, s.size(), f) == s.size();
  const int e1 = errno;
  ok = std::fflush(f) == 0 && ok;
  if (!ok) {
    if (f == stdout) {
      int expected = 0;
      g_stdout_lost.compare_exchange_strong(expected, errno ? errno : (e1 ? e1 : EIO));
    }
    std::clearerr(f);
  }
}

void mark_stdout_lost(int err) {
  int expected = 0;
  g_stdout_lost.compare_exchange_strong(expected, err);
}

int stdout_lost() { return g_stdout_lost.load(); }

int fail(const std::string& raw) {
  // One line, whatever the message quotes: a newline, carriage return or any other control byte (an escape
  // sequence for the terminal) in a spec or name is shown escaped.
  std::string msg;
  for (char c : raw) {
    const auto u = static_cast<unsigned char>(c);
    msg += c == '\n'               ? std::string("\\n")
           : c == '\r'             ? std::string("\\r")
           : u < 0x20 || u == 0x7f ? fmt::format("\\x{:02x}", u)
                                   : std::string(1, c);
  }
  say(stderr, "detaudit: error: {}\n", msg);
  emit_failure(msg);
  return 2;
}

int fail(const Status& st) { return fail(st.message()); }

Status out_outside_fleet_ranks(const std::string& out, const char* option) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(out, ec), ec);
  if (ec) return Status::ok();  // (a path that cannot be resolved is refused where it is opened)
  if (!p.has_filename()) p = p.parent_path();  // (a trailing slash)
  auto refuse = [&](const fs::path& rank) {
    return Status::invalid(fmt::format("{} {}: a fleet rank's folder ({} holds its node.json): its results are the "
                                       "rank's, and only `detaudit fleet` writes them; choose another {}",
                                       option, out, rank.string(), option));
  };
  auto refuse_ranks = [&](const fs::path& ranks) {
    return Status::invalid(fmt::format("{} {}: in a fleet's ranks/ ({}), where every folder is read as a rank's, and "
                                       "only `detaudit fleet` writes them; choose another {}",
                                       option, out, ranks.string(), option));
  };
  // The folder or any folder above it: a rank's (ranks/<rank>-<host>/ with its node.json), at any depth below it;
  // or a fleet's ranks/ (a rank folder in it, or fleet.json beside it), where a new folder would sit among the
  // ranks' and be read as one.
  for (fs::path d = p; !d.empty(); d = d.parent_path()) {
    if (d.parent_path().filename() == "ranks" && fs::exists(d / "node.json", ec)) return refuse(d);
    if (d.filename() == "ranks" && fs::is_directory(d, ec)) {
      if (d == p)  // ranks/ itself: name the rank folder in it
        for (auto& e : fs::directory_iterator(d, ec))
          if (fs::exists(e.path() / "node.json", ec)) return refuse(e.path());
      if (fs::exists(d.parent_path() / "fleet.json", ec)) return refuse_ranks(d);
      for (auto& e : fs::directory_iterator(d, ec))
        if (fs::exists(e.path() / "node.json", ec)) return refuse_ranks(d);
    }
    if (d == d.parent_path()) break;
  }
  return Status::ok();
}

Status file_outside_fleet_ranks(const std::string& file, const char* option) {
  const std::string folder = std::filesystem::path(file).parent_path().string();
  return out_outside_fleet_ranks(folder.empty() ? "." : folder, option);
}

int fail_or_interrupted(const Status& st) {
  if (st.code() != Status::Code::kInterrupted) return fail(st);
  // (export, import, diverge and fleet report do not resume: probe and train say how they resume themselves.)
  say(stderr, "detaudit: {}: stopped; no file was left half-written, and the same command run again starts it over\n",
      shown_safely(st.message()));
  emit_failure(st.message());
  const int sig = interrupted();
  return 128 + (sig ? sig : SIGINT);
}

std::string command_line(int argc, char** argv) { return command_text(std::vector<std::string>(argv, argv + argc)); }

int interrupted_exit(const std::string& what, size_t done, size_t total, const std::string& resume) {
  const int sig = interrupted();
  say(stderr, "interrupted: {} of {} {} done; resume with: {}\n", done, total, what, resume);
  return 128 + (sig ? sig : SIGINT);
}

std::string self_exe(const char* argv0) {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(argv0) : p.string();
}

std::string default_out(const std::string& prefix) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return fmt::format("results/{}-{}", prefix, buf);
}

namespace {
std::vector<std::pair<int, CommandFactory>>& factories() {
  static std::vector<std::pair<int, CommandFactory>> f;
  return f;
}
}  // namespace

CommandRegistration::CommandRegistration(int order, CommandFactory factory) { factories().emplace_back(order, factory); }

std::vector<std::pair<int, CommandFactory>> registered_commands() {
  auto f = factories();
  std::stable_sort(f.begin(), f.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return f;
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(1, word.size() / 3) + 1;
  for (auto& c : candidates) {
    if (c == word) return "";
    size_t d = edit_distance(word, c);
    if (word.size() >= 3 && c.rfind(word, 0) == 0) d = std::min<size_t>(d, 1);
    if (d < best_d) best_d = d, best = c;
  }
  return best;
}

std::string parse_error_line(CLI::App& app, int argc, char** argv, const std::string& cli11_message) {
  std::vector<std::string> names;
  for (auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  // The first word that is not an option names the subcommand.
  CLI::App* chosen = nullptr;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-", 0) == 0) continue;
    if (std::find(names.begin(), names.end(), a) == names.end()) {
      const std::string n = nearest(a, names);
      return fmt::format("unknown subcommand '{}'{} (subcommands: {}; detaudit --help)", a,
                         n.empty() ? "" : fmt::format(" (did you mean '{}'?)", n), fmt::join(names, ", "));
    }
    chosen = app.get_subcommand(a);
    break;
  }
  if (!chosen) return cli11_message;
  std::string path = chosen->get_name();
  // A nested subcommand (baseline save) takes the options.
  for (int j = i + 1; j < argc; ++j)
    for (auto* sub : chosen->get_subcommands([](const CLI::App*) { return true; }))
      if (sub->get_name() == argv[j]) {
        chosen = sub;
        path += " " + sub->get_name();
        break;
      }
  std::vector<std::string> options;
  for (const CLI::Option* o : chosen->get_options())
    for (auto& l : o->get_lnames()) options.push_back("--" + l);
  for (int j = i + 1; j < argc; ++j) {
    std::string a = argv[j];
    if (a.rfind("--", 0) != 0 || a == "--") continue;
    a = a.substr(0, a.find('='));
    if (std::find(options.begin(), options.end(), a) != options.end()) continue;
    const std::string n = nearest(a, options);
    return fmt::format("unknown option '{}' for {}{} (detaudit {} --help)", a, path,
                       n.empty() ? "" : fmt::format(" (did you mean '{}'?)", n), path);
  }
  return cli11_message;
}

const CLI::Validator kFinite(
    [](std::string& v) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      return std::isfinite(x) ? std::string() : "must be a finite number (got " + v + ")";
    },
    "FINITE");

const CLI::Validator kUnsignedText(
    [](std::string& v) {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        return "must be a whole number of 0 or more (got " + v + ")";
      // Past 64 bits the value would be capped without a word (18446744073709551616 read as 2^64 - 1).
      errno = 0;
      (void)std::strtoull(v.c_str(), nullptr, 10);
      return errno == ERANGE ? "must be at most 18446744073709551615 (got " + v + ")" : std::string();
    },
    "UNSIGNED");

void require_plain_integers(CLI::App& app) {
  static const CLI::Validator plain(
      [](std::string& v) {
        const size_t digits = v.rfind('-', 0) == 0 ? 1 : 0;
        const bool ok = v.size() > digits && v.find_first_not_of("0123456789", digits) == std::string::npos &&
                        (v[digits] != '0' || v.size() == digits + 1);
        return ok ? std::string() : "must be a whole number in decimal digits (got '" + v + "')";
      },
      "");  // no description: the help text keeps its type
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) o->check(plain);
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) require_plain_integers(*sub);
}

const CLI::Validator kNonEmpty(
    [](std::string& v) { return v.find_first_not_of(", ") == std::string::npos ? std::string("must not be empty") : ""; },
    "NONEMPTY");

// The command line again, shell-quoted, with `--out DIR` in place of any --out/--fresh/--resume:
// what resumes an interrupted run.
std::string resume_command(int argc, char** argv, const std::string& out_dir) {
  return resume_command(std::vector<std::string>(argv, argv + argc), out_dir);
}

std::string resume_command(const std::vector<std::string>& args, const std::string& out_dir) {
  std::string cmd;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--fresh" || a == "--resume") continue;
    if (a == "--out") {
      ++i;
      continue;
    }
    if (a.rfind("--out=", 0) == 0) continue;
    cmd += (cmd.empty() ? "" : " ") + shell_word(a);
  }
  return cmd + " --out " + shell_word(out_dir);
}

}  // namespace detaudit::cli
