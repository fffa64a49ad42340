#include "report/results.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

namespace detaudit {

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json to_json(const Results& r) {
  nlohmann::json obs = nlohmann::json::array();
  for (auto& o : r.observations) obs.push_back(to_json(o));
  return {{"schema", kResultsSchema}, {"tool_version", r.tool_version}, {"started_at", r.started_at},
          {"finished_at", r.finished_at}, {"command", r.command},        {"plan", r.plan},
          {"machine", r.machine},         {"observations", obs},         {"training", r.training},
          {"analysis", r.analysis}};
}

bool load_results(const std::string& path, Results* out, std::string* err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *err = path + ": cannot open (" + std::strerror(errno) + ")";
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    *err = path + ": not valid JSON (truncated or corrupt): " + e.what();
    return false;
  }
  if (!j.is_object() || j.value("schema", "") != kResultsSchema) {
    *err = path + ": not a detaudit results file (expected \"schema\": \"" + kResultsSchema + "\")";
    return false;
  }
  try {
    Results r;
    r.tool_version = j.value("tool_version", "");
    r.started_at = j.value("started_at", "");
    r.finished_at = j.value("finished_at", "");
    r.command = j.value("command", "");
    r.plan = j.value("plan", nlohmann::json::object());
    r.machine = j.value("machine", nlohmann::json::object());
    r.training = j.value("training", nlohmann::json::array());
    r.analysis = j.value("analysis", nlohmann::json::object());
    const auto& obs = j.at("observations");
    if (!obs.is_array()) {
      *err = path + ": \"observations\" is not an array";
      return false;
    }
    for (size_t i = 0; i < obs.size(); ++i) {
      Observation o;
      std::string e;
      if (!from_json(obs[i], &o, &e)) {
        *err = path + ": observation " + std::to_string(i) + ": " + e;
        return false;
      }
      r.observations.push_back(std::move(o));
    }
    *out = std::move(r);
  } catch (const std::exception& e) {
    *err = path + ": malformed results: " + e.what();
    return false;
  }
  return true;
}

bool write_file_atomic(const std::string& path, const std::string& content, std::string* err) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = tmp + ": " + std::strerror(errno);
    return false;
  }
  size_t off = 0;
  while (off < content.size()) {
    ssize_t w = ::write(fd, content.data() + off, content.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      *err = tmp + ": " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    off += size_t(w);
  }
  ::fsync(fd);
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *err = path + ": rename failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

bool save_results(const std::string& path, const Results& r, std::string* err) {
  return write_file_atomic(path, to_json(r).dump(1) + "\n", err);
}

}  // namespace detaudit
