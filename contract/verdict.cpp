#include "contract/verdict.hpp"

namespace detaudit {

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kExpected: return "EXPECTED";
    case Verdict::kWarn: return "WARN";
    case Verdict::kSkip: return "SKIP";
  }
  return "FAIL";
}

bool parse_verdict(const std::string& s, Verdict* out) {
  for (Verdict v : kAllVerdicts)
    if (s == to_string(v)) {
      *out = v;
      return true;
    }
  return false;
}

void VerdictTally::add(Verdict v, int n) {
  switch (v) {
    case Verdict::kPass: pass += n; break;
    case Verdict::kFail: fail += n; break;
    case Verdict::kExpected: expected += n; break;
    case Verdict::kWarn: warn += n; break;
    case Verdict::kSkip: skip += n; break;
  }
}

nlohmann::json VerdictTally::to_json() const {
  return {{"pass", pass}, {"fail", fail}, {"expected", expected}, {"warn", warn}, {"skip", skip}};
}

int severity(Verdict v) {
  switch (v) {
    case Verdict::kFail: return 4;
    case Verdict::kWarn: return 3;
    case Verdict::kExpected: return 2;
    case Verdict::kPass: return 1;
    case Verdict::kSkip: return 0;
  }
  return 4;
}

int exit_code_of(Decision d) {
  switch (d) {
    case Decision::kPass: return 0;
    case Decision::kFail: return 1;
    case Decision::kNotJudged: return 2;
  }
  return 2;
}

const char* to_string(Decision d) {
  switch (d) {
    case Decision::kPass: return "PASS";
    case Decision::kFail: return "FAIL";
    case Decision::kNotJudged: return "ERROR";
  }
  return "ERROR";
}

const char* to_string(Action a) {
  switch (a) {
    case Action::kIsolate: return "ISOLATE";
    case Action::kConfigure: return "CONFIGURE";
    case Action::kRetest: return "RETEST";
    case Action::kMonitor: return "MONITOR";
  }
  return "RETEST";
}

}  // namespace detaudit
