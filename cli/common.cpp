#include "cli/common.hpp"

#include <algorithm>

#include "cli/output.hpp"

namespace detaudit::cli {

void put(FILE* f, const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), f) != s.size()) std::clearerr(f);
  if (std::fflush(f) != 0) std::clearerr(f);
}

int fail(const std::string& msg) {
  say(stderr, "detaudit: error: {}\n", msg);
  emit_failure(msg);
  return 2;
}

int fail(const Status& st) { return fail(st.message()); }

std::string command_line(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
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

const CLI::Validator kNonEmpty(
    [](std::string& v) { return v.find_first_not_of(", ") == std::string::npos ? std::string("must not be empty") : ""; },
    "NONEMPTY");

}  // namespace detaudit::cli
