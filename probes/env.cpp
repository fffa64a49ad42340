#include "probes/env.hpp"

#include <fmt/format.h>
#include <gnu/libc-version.h>
#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifdef DETAUDIT_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "detaudit_build_config.hpp"
#include "probes/registry.hpp"

namespace detaudit {

namespace {

std::string cpu_model_from_proc() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      // The text after "model name\t: ", without the blanks a brand string may be padded with (one CPU, one name).
      const size_t c = line.find(':');
      std::string m = c == std::string::npos ? line : line.substr(c + 1);
      const size_t b = m.find_first_not_of(" \t"), e = m.find_last_not_of(" \t");
      return b == std::string::npos ? "unknown" : m.substr(b, e - b + 1);
    }
  return "unknown";
}

nlohmann::json cpu_features() {
  nlohmann::json f = nlohmann::json::array();
#if defined(__x86_64__)
  __builtin_cpu_init();
  // The instruction sets the backend registry's requirements name (probes/registry.cpp: OpenBLAS core
  // types, cpu?isa=); a requirement whose feature is missing here is unmet. In the order of
  // kCpuFeatureOrder (contract/results.hpp), which a results file is checked against.
  if (__builtin_cpu_supports("sse2")) f.push_back("sse2");
  if (__builtin_cpu_supports("sse3")) f.push_back("sse3");
  if (__builtin_cpu_supports("ssse3")) f.push_back("ssse3");
  if (__builtin_cpu_supports("sse4.1")) f.push_back("sse4.1");
  if (__builtin_cpu_supports("sse4.2")) f.push_back("sse4.2");
  if (__builtin_cpu_supports("sse4a")) f.push_back("sse4a");
  if (__builtin_cpu_supports("fma4")) f.push_back("fma4");
  if (__builtin_cpu_supports("xop")) f.push_back("xop");
  if (__builtin_cpu_supports("avx")) f.push_back("avx");
  if (__builtin_cpu_supports("avx2")) f.push_back("avx2");
  if (__builtin_cpu_supports("fma")) f.push_back("fma");
  if (__builtin_cpu_supports("avx512f")) f.push_back("avx512f");
  if (__builtin_cpu_supports("avx512bw")) f.push_back("avx512bw");
  if (__builtin_cpu_supports("avx512vnni")) f.push_back("avx512vnni");
  if (__builtin_cpu_supports("avx512bf16")) f.push_back("avx512bf16");
#endif
  return f;
}

#ifdef DETAUDIT_HAVE_HWLOC
void describe_topology(nlohmann::json& m) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    m["topology_error"] = "hwloc_topology_init failed";
    return;
  }
  // PCI devices are read only to place GPUs; without a GPU the I/O discovery (hwloc's pci plugin, which
  // loads libpciaccess and leaks its scan on unload) is not run at all.
  const bool want_io = m.contains("gpus") && m["gpus"].is_array() && !m["gpus"].empty();
  hwloc_topology_set_io_types_filter(topo, want_io ? HWLOC_TYPE_FILTER_KEEP_IMPORTANT : HWLOC_TYPE_FILTER_KEEP_NONE);
  if (hwloc_topology_load(topo) != 0) {
    m["topology_error"] = "hwloc_topology_load failed";
    hwloc_topology_destroy(topo);
    return;
  }
  m["packages"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  m["cores"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  m["pus"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  m["numa_nodes"] = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
  if (pkg) {
    const char* model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
    if (model) m["cpu_model"] = model;
    const char* vendor = hwloc_obj_get_info_by_name(pkg, "CPUVendor");
    if (vendor) m["cpu_vendor"] = vendor;
  }
  nlohmann::json caches = nlohmann::json::array();
  for (hwloc_obj_type_t t : {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE}) {
    int n = hwloc_get_nbobjs_by_type(topo, t);
    if (n <= 0) continue;
    hwloc_obj_t c = hwloc_get_obj_by_type(topo, t, 0);
    caches.push_back({{"level", c->attr->cache.depth},
                      {"size_bytes", c->attr->cache.size},
                      {"line_bytes", c->attr->cache.linesize},
                      {"count", n}});
  }
  m["caches"] = caches;
  // Each GPU's local CPU set, through its PCI device's non-I/O ancestor.
  for (auto& g : m["gpus"]) {
    std::string bus = g.value("pci_bus_id", std::string());
    for (auto& ch : bus) ch = char(std::tolower(ch));
    hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(topo, bus.c_str());
    if (!pci) {
      g["local_cpuset"] = "unknown (PCI device not in the hwloc topology)";
      continue;
    }
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(topo, pci);
    char* s = nullptr;
    hwloc_bitmap_list_asprintf(&s, anc->cpuset);
    g["local_cpuset"] = s ? s : "unknown";
    std::free(s);
  }
  hwloc_topology_destroy(topo);
}
#endif

}  // namespace

std::string compiler_string() {
#if defined(__clang__)
  return fmt::format("clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("gcc {}", __VERSION__);
#else
  return "unknown";
#endif
}

nlohmann::json machine_fingerprint() {
  nlohmann::json m;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  m["hostname"] = host;
  utsname u{};
  if (uname(&u) == 0) m["os"] = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  m["cpu_model"] = cpu_model_from_proc();
  m["cores"] = std::thread::hardware_concurrency();
  m["cpu_features"] = cpu_features();
  m["compiler"] = compiler_string();

  nlohmann::json libs;
  // The build's parts that select code for detaudit's own kernels (BackendEntry::libraries names them).
  libs["compiler"] = compiler_string();
  libs["glibc"] = gnu_get_libc_version();
  libs["xxhash"] = fmt::format("{}.{}.{}", XXH_VERSION_MAJOR, XXH_VERSION_MINOR, XXH_VERSION_RELEASE);
  m["libraries"] = libs;
  // Each device kind describes its devices and stack (cuda: "gpus", its libraries and its line), each
  // backend its own libraries' versions (probes/backends/).
  for (auto& kind : device_kinds())
    if (kind.describe_machine) kind.describe_machine(&m);
  for (auto& e : backend_registry())
    if (e.describe_machine) e.describe_machine(&m["libraries"]);
  if (!m.contains("gpus")) m["gpus"] = nlohmann::json::array();
  // Test hook (tests/test_fleet.cpp, set per rank by fleet's DETAUDIT_FLEET_TEST_KEY): one field of this
  // fingerprint set ("libraries.openblas=0.0.1"), as a misconfigured node's would be, everywhere it is read.
  if (const char* hook = std::getenv("DETAUDIT_TEST_MACHINE_FIELD"); hook && *hook) {
    const std::string kv = hook;
    const size_t eq = kv.find('='), dot = kv.find('.');
    if (eq != std::string::npos) {
      if (dot != std::string::npos && dot < eq)
        m[kv.substr(0, dot)][kv.substr(dot + 1, eq - dot - 1)] = kv.substr(eq + 1);
      else
        m[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
#ifdef DETAUDIT_HAVE_HWLOC
  describe_topology(m);
  m["hwloc"] = fmt::format("{}.{}.{}", HWLOC_API_VERSION >> 16, (HWLOC_API_VERSION >> 8) & 0xff, HWLOC_API_VERSION & 0xff);
#else
  m["topology_error"] = std::string("detaudit was built without hwloc: ") + DETAUDIT_HWLOC_OFF_REASON;
#endif
  return m;
}

namespace {
int sys_topology_number(int cpu, const char* what) {
  std::ifstream f(fmt::format("/sys/devices/system/cpu/cpu{}/topology/{}", cpu, what));
  int v = -1;
  return (f >> v) ? v : -1;
}
}  // namespace

std::vector<CpuPlace> allowed_cpus() {
  std::vector<CpuPlace> out;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    for (int c = 0; c < int(std::thread::hardware_concurrency()); ++c) CPU_SET(c, &set);
  }
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back({c, -1, -1});
  if (out.empty()) out.push_back({0, -1, -1});
#ifdef DETAUDIT_HAVE_HWLOC
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) == 0) {
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo) == 0) {
      for (auto& p : out) {
        hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, unsigned(p.cpu));
        if (!pu) continue;
        if (hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu)) p.core = int(core->logical_index);
        if (hwloc_obj_t pkg = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pu))
          p.package = pkg->os_index == HWLOC_UNKNOWN_INDEX ? int(pkg->logical_index) : int(pkg->os_index);
      }
    }
    hwloc_topology_destroy(topo);
  }
#endif
  for (auto& p : out) {
    if (p.package < 0) p.package = sys_topology_number(p.cpu, "physical_package_id");
    if (p.core < 0) p.core = sys_topology_number(p.cpu, "core_id");
  }
  return out;
}

Status bind_thread_to_cpu(int cpu) {
  if (cpu < 0 || cpu >= CPU_SETSIZE) return Status::invalid(fmt::format("no logical CPU {}", cpu));
  // What hwloc's thread binding does on Linux, without loading a topology per thread.
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0)
    return Status::error(fmt::format("cannot bind to logical CPU {}: {}", cpu, std::strerror(errno)));
  return Status::ok();
}

}  // namespace detaudit
