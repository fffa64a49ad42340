// `detaudit env`: this machine's fingerprint (CPU topology, libraries, GPUs), as every results file records it.
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "cli/output.hpp"
#include "probes/env.hpp"
#include "probes/registry.hpp"
#include "report/document.hpp"

namespace detaudit::cli {
namespace {

std::string env_text(const nlohmann::json& m) {
  auto s = [&](const char* k) -> std::string {
    if (!m.contains(k)) return "unknown";
    return m[k].is_string() ? m[k].get<std::string>() : m[k].dump();
  };
  std::string t = fmt::format("host       {}\nos         {}\ncpu        {}\n", s("hostname"), s("os"), s("cpu_model"));
  t += fmt::format("topology   packages {}, cores {}, PUs {}, NUMA nodes {}\n", s("packages"), s("cores"), s("pus"),
                   s("numa_nodes"));
  if (m.contains("topology_error")) t += fmt::format("           ({})\n", s("topology_error"));
  if (m.contains("caches"))
    for (auto& c : m["caches"])
      t += fmt::format("cache      L{} {} KiB x {}\n", c.value("level", 0), c.value("size_bytes", uint64_t(0)) / 1024,
                       c.value("count", 0));
  t += fmt::format("features   {}\ncompiler   {}\n", s("cpu_features"), s("compiler"));
  for (auto& [k, v] : m["libraries"].items())
    t += fmt::format("{:<10} {}\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  for (auto& kind : device_kinds())
    for (auto& key : kind.machine_keys) t += fmt::format("{:<10} {}\n", key, s(key.c_str()));
  for (auto& g : m["gpus"])
    t += fmt::format("gpu {}      {} ({}), CC {}, {} SMs, {:.1f} GiB, L2 {} MiB, ECC {}, PCI {}, local CPUs {}\n",
                     g.value("index", 0), g.value("name", ""), g.value("uuid", ""), g.value("compute_capability", ""),
                     g.value("sm_count", 0), g.value("memory_bytes", uint64_t(0)) / 1073741824.0,
                     g.value("l2_bytes", 0) / 1048576, g.value("ecc", false) ? "on" : "off", g.value("pci_bus_id", ""),
                     g.value("local_cpuset", "unknown"));
  return t;
}

// The fingerprint as markdown: one table of fields and values.
std::string env_markdown(const nlohmann::json& m, const std::string& text) {
  Document d;
  d.title = "detaudit env: " + m.value("hostname", std::string("?"));
  std::vector<std::vector<Cell>> rows;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    const size_t gap = line.find(' ');
    if (gap == std::string::npos || gap == 0) continue;
    const size_t value = line.find_first_not_of(' ', gap);
    rows.push_back(
        {{inline_text(line.substr(0, gap))}, {inline_text(value == std::string::npos ? "" : line.substr(value))}});
  }
  d.add("").table({"field", "value"}, std::move(rows));
  return render_markdown(d);
}

Command add_env_command(CLI::App& app, int, char**) {
  auto* env = app.add_subcommand("env", "Print this machine's fingerprint: CPU topology, libraries, GPUs.");
  auto output = std::make_shared<OutputFlags>();
  add_output_flags(env, output.get(), false);
  return {env,
          [output] {
            const nlohmann::json m = machine_fingerprint();
            Outcome o;
            o.text = env_text(m);
            o.markdown = env_markdown(m, o.text);
            o.data = {{"machine", m}};
            return emit(o);
          },
          output.get(), false, false};
}

const CommandRegistration reg(1, add_env_command);

}  // namespace
}  // namespace detaudit::cli
