#include "suites/fleet_comm.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#ifdef DETAUDIT_HAVE_MPI
// The C API only: Open MPI's mpi.h otherwise declares its deprecated C++ bindings, which libmpi.so lacks.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "contract/observation.hpp"  // check_key
#include "contract/results.hpp"      // shown_safely
#include "detaudit_build_config.hpp"
#include "kernels/cuda/nccl.hpp"
#include "kernels/fingerprint.hpp"
#include "kernels/generator.hpp"

namespace detaudit {

namespace {

// A non-negative integer of an environment variable; -1 when unset or not one.
long env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  // Beyond an int is no rank and no count of ranks (4294967297 would have become rank 1).
  return (*end || errno || x < 0 || x > long(std::numeric_limits<int>::max())) ? -2 : x;
}

}  // namespace

nlohmann::json CollectiveCell::to_json() const {
  return {{"workload", workload}, {"library", library},           {"algorithm", algorithm}, {"ranks", ranks},
          {"status", status},     {"fingerprints", fingerprints}, {"seconds", seconds}};
}

Status CollectiveCell::from_json(const nlohmann::json& j, CollectiveCell* out, const std::string& where) {
  CollectiveCell c;
  if (!j.is_object()) return Status::invalid(where + " must be an object");
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "workload", JsonType::kString, true, where));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "library", JsonType::kString, false, where));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "algorithm", JsonType::kString, true, where));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "ranks", JsonType::kCount, true, where));
  DETAUDIT_RETURN_IF_ERROR(check_key(j, "status", JsonType::kString, true, where));
  DETAUDIT_RETURN_IF_ERROR(check_array_key(j, "fingerprints", JsonType::kString, true, where));
  DETAUDIT_RETURN_IF_ERROR(check_array_key(j, "seconds", JsonType::kNumber, true, where));
  c.workload = j["workload"], c.algorithm = j["algorithm"], c.ranks = j["ranks"], c.status = j["status"];
  c.library = j.value("library", std::string("mpi"));  // nodes written before NCCL had MPI cells only
  if (c.library != "mpi" && c.library != "nccl")
    return Status::invalid(fmt::format("{}: library '{}' is neither mpi nor nccl", where, c.library));
  c.fingerprints = j["fingerprints"].get<std::vector<std::string>>();
  c.seconds = j["seconds"].get<std::vector<double>>();
  // What fleet writes: an all-reduce of its own workload spelling, under an algorithm it asks the library for, on
  // one rank at least; each repeat's output fingerprinted and timed; a cell that ran has both.
  {
    const std::string& w = c.workload;
    const size_t n_at = 12, amp = w.find("&dist=mixed&seed=");
    auto digits = [](const std::string& t) {
      return !t.empty() && t.size() <= 20 && t.find_first_not_of("0123456789") == std::string::npos &&
             (t.size() == 1 || t[0] != '0');
    };
    if (!w.starts_with("allreduce?n=") || amp == std::string::npos || !digits(w.substr(n_at, amp - n_at)) ||
        w.substr(n_at, amp - n_at) == "0" || !digits(w.substr(amp + 17)))
      return Status::invalid(fmt::format("{}: workload '{}' is not an all-reduce fleet runs (allreduce?n=N&dist=mixed&"
                                         "seed=S)",
                                         where, shown_safely(w.substr(0, 60))));
  }
  bool known = c.library == "mpi" && c.algorithm == "default";  // (Open MPI without the tuned component's control)
  for (auto& [value, name] : allreduce_algorithms()) known = known || (c.library == "mpi" && c.algorithm == name);
  for (auto& name : nccl_algorithms()) known = known || (c.library == "nccl" && c.algorithm == name);
  if (!known)
    return Status::invalid(fmt::format("{}: algorithm '{}' is not one fleet asks {} for", where,
                                       shown_safely(c.algorithm.substr(0, 40)), c.library));
  if (c.ranks < 1) return Status::invalid(fmt::format("{}: ranks 0 (a collective runs on one rank at least)", where));
  if (c.status.empty()) return Status::invalid(fmt::format("{}: status is empty (ok, or why the cell could not run)", where));
  for (size_t i = 0; i < c.fingerprints.size(); ++i)
    if (Fingerprint f; !Fingerprint::from_hex(c.fingerprints[i], &f))
      return Status::invalid(fmt::format("{}: fingerprints[{}] '{}' is not 32 hex digits", where, i,
                                         shown_safely(c.fingerprints[i].substr(0, 40))));
  for (size_t i = 0; i < c.seconds.size(); ++i)
    if (!plausible_seconds(c.seconds[i]))
      return Status::invalid(fmt::format("{}: seconds[{}] is {} (a time is 0, or from a nanosecond, a clock's tick, to a "
                                         "year)",
                                         where, i, c.seconds[i]));
  if (c.status == "ok" && (c.fingerprints.empty() || c.seconds.size() != c.fingerprints.size()))
    return Status::invalid(fmt::format("{}: status ok with {} fingerprints and {} times (a cell that ran gives one of "
                                       "each per repeat)",
                                       where, c.fingerprints.size(), c.seconds.size()));
  *out = std::move(c);
  return Status::ok();
}

bool fleet_mpi_built() {
#ifdef DETAUDIT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string fleet_mpi_off_reason() { return fleet_mpi_built() ? "" : DETAUDIT_MPI_OFF_REASON; }

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

Status fleet_resolve_rank(int rank, int ranks, FleetRank* out) {
  FleetRank r;
  auto check = [&](const std::string& where) {
    if (r.ranks < 1 || r.rank < 0 || r.rank >= r.ranks)
      return Status::invalid(fmt::format("{}: rank {} of {} ranks: a rank is 0..ranks-1", where, r.rank, r.ranks));
    return Status::ok();
  };
  // --ranks alone is the Kubernetes Indexed Job form: the rank comes from JOB_COMPLETION_INDEX (below).
  const bool indexed_job = rank < 0 && ranks > 0 && env_int("JOB_COMPLETION_INDEX") != -1;
  if ((rank >= 0 || ranks > 0) && !indexed_job) {
    if (rank < 0 || ranks < 1)
      return Status::invalid("--rank and --ranks go together (or --ranks alone in a Kubernetes Indexed Job, the rank "
                             "from JOB_COMPLETION_INDEX)");
    r.rank = rank, r.ranks = ranks, r.source = "--rank";
    DETAUDIT_RETURN_IF_ERROR(check("--rank/--ranks"));
    *out = r;
    return Status::ok();
  }
  if (launched_by_mpirun()) {
#ifdef DETAUDIT_HAVE_MPI
    // The collective workload picks Open MPI's all-reduce algorithm at run time; that needs the tuned
    // component's dynamic rules on before MPI starts.
    setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
    int provided = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
      return Status::unavailable("MPI_T_init_thread failed");
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) return Status::unavailable("MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.ranks);
    r.mpi = true;
    r.source = "MPI";
    *out = r;
    return Status::ok();
#else
    return Status::unavailable(fmt::format(
        "launched by mpirun, but this detaudit was built without MPI ({}): rebuild with it, or run each rank "
        "with --rank K --ranks N and merge with `detaudit fleet report`",
        DETAUDIT_MPI_OFF_REASON));
#endif
  }
  const long sp = env_int("SLURM_PROCID"), sn = env_int("SLURM_NTASKS");
  if (sp != -1 || sn != -1) {
    if (sp < 0 || sn < 1)
      return Status::invalid("SLURM_PROCID and SLURM_NTASKS must both be set to whole numbers a rank can be (0 to "
                             "2147483647)");
    r.rank = int(sp), r.ranks = int(sn), r.source = "SLURM_PROCID";
    DETAUDIT_RETURN_IF_ERROR(check("SLURM_PROCID/SLURM_NTASKS"));
    *out = r;
    return Status::ok();
  }
  const long ji = env_int("JOB_COMPLETION_INDEX");
  if (ji != -1) {
    if (ji < 0) return Status::invalid("JOB_COMPLETION_INDEX must be a whole number a rank can be (0 to 2147483647)");
    if (ranks < 1)
      return Status::invalid(
          "JOB_COMPLETION_INDEX gives the rank but not their number: add --ranks N (the Job's completions)");
    r.rank = int(ji), r.ranks = ranks, r.source = "JOB_COMPLETION_INDEX";
    DETAUDIT_RETURN_IF_ERROR(check("JOB_COMPLETION_INDEX/--ranks"));
    *out = r;
    return Status::ok();
  }
  return Status::invalid(
      "fleet needs a rank: run it under mpirun or srun, in a Kubernetes Indexed Job (with --ranks N), or give "
      "--rank K --ranks N");
}

std::vector<float> allreduce_terms(int n, uint64_t seed, int rank) {
  // Magnitudes 1 and 2^24 mixed, so that a different order of the sum rounds otherwise.
  std::vector<float> x(static_cast<size_t>(std::max(n, 0)));
  uint64_t s = mix64(seed * 1000003u + uint64_t(rank) + 1);
  for (auto& v : x) {
    s = mix64(s);
    const double u = double(s >> 11) * (1.0 / 9007199254740992.0) - 0.5;
    v = float(((s & 1) ? 16777216.0 : 1.0) * u);
  }
  return x;
}

const std::vector<std::string>& nccl_algorithms() {
  static const std::vector<std::string> a = {"Ring", "Tree"};
  return a;
}

const std::vector<std::pair<int, std::string>>& allreduce_algorithms() {
  // coll_tuned_allreduce_algorithm's values in Open MPI 4.1 (ompi_info --param coll tuned --level 9).
  static const std::vector<std::pair<int, std::string>> a = {{1, "basic_linear"},       {2, "nonoverlapping"},
                                                             {3, "recursive_doubling"}, {4, "ring"},
                                                             {5, "segmented_ring"},     {6, "rabenseifner"}};
  return a;
}

#ifdef DETAUDIT_HAVE_MPI

Status fleet_gather(const std::vector<std::string>& mine, double wait_s, std::vector<std::vector<std::string>>* all,
                    std::vector<bool>* answered) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int parts = int(mine.size());
  if (rank != 0) {
    // The sizes, then the texts one after the other.
    std::vector<long long> sizes;
    std::string joined;
    for (auto& m : mine) sizes.push_back((long long)m.size()), joined += m;
    MPI_Send(sizes.data(), parts, MPI_LONG_LONG, 0, 1, MPI_COMM_WORLD);
    // In chunks under 2^31 bytes (MPI counts are ints).
    for (size_t at = 0; at < joined.size(); at += size_t(1) << 30) {
      const int n = int(std::min(joined.size() - at, size_t(1) << 30));
      MPI_Send(joined.data() + at, n, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    }
    return Status::ok();
  }
  all->assign(size_t(ranks), {});
  answered->assign(size_t(ranks), false);
  (*all)[0] = mine;
  (*answered)[0] = true;
  std::vector<std::vector<long long>> sizes(static_cast<size_t>(ranks), std::vector<long long>(mine.size()));
  std::vector<MPI_Request> req(size_t(ranks), MPI_REQUEST_NULL);
  for (int r = 1; r < ranks; ++r)
    MPI_Irecv(sizes[size_t(r)].data(), parts, MPI_LONG_LONG, r, 1, MPI_COMM_WORLD, &req[size_t(r)]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  int pending = ranks - 1;
  while (pending > 0 && std::chrono::steady_clock::now() < deadline) {
    for (int r = 1; r < ranks; ++r) {
      if (req[size_t(r)] == MPI_REQUEST_NULL || (*answered)[size_t(r)]) continue;
      int done = 0;
      MPI_Test(&req[size_t(r)], &done, MPI_STATUS_IGNORE);
      if (!done) continue;
      long long total = 0;
      for (auto s : sizes[size_t(r)]) {
        if (s < 0) return Status::invalid(fmt::format("rank {} sent a negative size", r));
        total += s;
      }
      std::string joined(size_t(total), '\0');
      for (size_t at = 0; at < joined.size(); at += size_t(1) << 30) {
        const int n = int(std::min(joined.size() - at, size_t(1) << 30));
        MPI_Recv(joined.data() + at, n, MPI_CHAR, r, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      size_t at = 0;
      for (auto s : sizes[size_t(r)]) (*all)[size_t(r)].push_back(joined.substr(at, size_t(s))), at += size_t(s);
      (*answered)[size_t(r)] = true;
      --pending;
    }
    if (pending > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Ranks that never answered keep their receive posted: MPI_Abort ends them (fleet_mpi_end).
  return Status::ok();
}

Status fleet_exchange_identities(const std::string& mine, std::vector<std::string>* all) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::string me = mine.substr(0, kIdentityBytes);
  me.resize(kIdentityBytes, '\0');
  std::string got(kIdentityBytes * size_t(ranks), '\0');
  if (MPI_Allgather(me.data(), int(kIdentityBytes), MPI_CHAR, got.data(), int(kIdentityBytes), MPI_CHAR,
                    MPI_COMM_WORLD) != MPI_SUCCESS)
    return Status::error("MPI_Allgather of the ranks' identities failed");
  all->clear();
  for (int r = 0; r < ranks; ++r) {
    std::string id = got.substr(size_t(r) * kIdentityBytes, kIdentityBytes);
    id.resize(std::min(id.find('\0'), id.size()));
    all->push_back(std::move(id));
  }
  return Status::ok();
}

bool fleet_all_ready(bool mine, double wait_s) {
  int v = mine ? 1 : 0, all = 0, done = 0;
  MPI_Request req;
  MPI_Iallreduce(&v, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (!done && std::chrono::steady_clock::now() < deadline) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done && all == 1;
}

int fleet_share_exit_code(int code, const std::vector<bool>& answered) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (rank == 0) {
    for (int r = 1; r < ranks; ++r)
      if (answered[size_t(r)]) MPI_Send(&code, 1, MPI_INT, r, 3, MPI_COMM_WORLD);
    return code;
  }
  int got = 2;
  MPI_Recv(&got, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  return got;
}

void fleet_mpi_end(bool abort, int code) {
  MPI_T_finalize();  // before MPI_Finalize: after it, Open MPI 4.1 crashes in MPI_T_finalize
  if (abort) MPI_Abort(MPI_COMM_WORLD, code);
  MPI_Finalize();
}

Status run_allreduce_cells(int n, uint64_t seed, int repeats, std::vector<CollectiveCell>* out) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<float> x = allreduce_terms(n, seed, rank), y(static_cast<size_t>(n));
  int index = -1, count = 0;
  MPI_T_cvar_get_num(&count);
  for (int i = 0; i < count && index < 0; ++i) {
    char name[256];
    int name_len = sizeof name, verbosity = 0, bind = 0, scope = 0;
    MPI_Datatype dt;
    MPI_T_enum en;
    if (MPI_T_cvar_get_info(i, name, &name_len, &verbosity, &dt, &en, nullptr, nullptr, &bind, &scope) != MPI_SUCCESS)
      continue;
    if (std::strcmp(name, "coll_tuned_allreduce_algorithm") == 0) index = i;
  }
  const std::string workload = fmt::format("allreduce?n={}&dist=mixed&seed={}", n, seed);
  out->clear();
  MPI_T_cvar_handle handle = nullptr;
  int elements = 0;
  if (index < 0 || MPI_T_cvar_handle_alloc(index, nullptr, &handle, &elements) != MPI_SUCCESS) {
    CollectiveCell c;
    c.workload = workload, c.algorithm = "default", c.ranks = ranks;
    c.status =
        "Open MPI's coll_tuned_allreduce_algorithm control variable is not available (another MPI?): "
        "the algorithms cannot be chosen";
    out->push_back(c);
    return Status::ok();
  }
  for (auto& [value, name] : allreduce_algorithms()) {
    CollectiveCell c;
    c.workload = workload, c.algorithm = name, c.ranks = ranks;
    int v = value;
    // The tuned component reads the forced algorithm when a communicator is created: a new one per algorithm.
    if (MPI_T_cvar_write(handle, &v) != MPI_SUCCESS) {
      c.status = "MPI_T_cvar_write(coll_tuned_allreduce_algorithm) failed";
      out->push_back(c);
      continue;
    }
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    for (int r = 0; r < repeats; ++r) {
      MPI_Barrier(comm);
      const auto t0 = std::chrono::steady_clock::now();
      const int rc = MPI_Allreduce(x.data(), y.data(), n, MPI_FLOAT, MPI_SUM, comm);
      const auto t1 = std::chrono::steady_clock::now();
      if (rc != MPI_SUCCESS) {
        c.status = fmt::format("MPI_Allreduce returned {}", rc);
        break;
      }
      c.seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
      c.fingerprints.push_back(fingerprint_bytes(y.data(), y.size() * sizeof(float)).hex());
    }
    MPI_Comm_free(&comm);
    out->push_back(std::move(c));
  }
  int zero = 0;
  MPI_T_cvar_write(handle, &zero);
  MPI_T_cvar_handle_free(&handle);
  return Status::ok();
}

Status run_nccl_allreduce_cells(int n, uint64_t seed, int repeats, std::vector<CollectiveCell>* out,
                                std::string* not_run) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  out->clear();
  not_run->clear();
  // NCCL's communicator is collective: every rank takes part, or none does.
  const std::string reason = nccl_unavailable_reason();
  int mine = reason.empty() ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all) {
    *not_run = reason.empty() ? "another rank has no CUDA device or no NCCL" : reason;
    return Status::ok();
  }
  // Rank 0 makes the unique id; its first byte says whether it could.
  std::string id(kNcclIdBytes + 1, '\0');
  if (rank == 0) {
    std::string made;
    Status st = nccl_make_id(&made);
    if (st && made.size() == kNcclIdBytes)
      id[0] = 1, std::memcpy(&id[1], made.data(), kNcclIdBytes);
    else
      *not_run = "rank 0: " + st.message();
  }
  MPI_Bcast(id.data(), int(id.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (id[0] != 1) {
    if (not_run->empty()) *not_run = "rank 0 could not make NCCL's unique id";
    return Status::ok();
  }
  const long local = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  const std::vector<float> x = allreduce_terms(n, seed, rank);
  const std::string workload = fmt::format("allreduce?n={}&dist=mixed&seed={}", n, seed);
  for (auto& algo : nccl_algorithms()) {
    CollectiveCell c;
    c.workload = workload, c.library = "nccl", c.algorithm = algo, c.ranks = ranks;
    std::vector<std::vector<float>> results;
    MPI_Barrier(MPI_COMM_WORLD);
    Status st =
        nccl_allreduce(id.substr(1), rank, ranks, int(std::max(local, 0L)), algo, x, repeats, &results, &c.seconds);
    if (!st) {
      c.status = st.message();
    } else {
      for (auto& y : results) c.fingerprints.push_back(fingerprint_bytes(y.data(), y.size() * sizeof(float)).hex());
    }
    out->push_back(std::move(c));
  }
  return Status::ok();
}

#else

Status run_nccl_allreduce_cells(int, uint64_t, int, std::vector<CollectiveCell>*, std::string*) {
  return Status::unavailable(std::string("built without MPI: ") + DETAUDIT_MPI_OFF_REASON);
}

Status fleet_gather(const std::vector<std::string>&, double, std::vector<std::vector<std::string>>*,
                    std::vector<bool>*) {
  return Status::unavailable(std::string("built without MPI: ") + DETAUDIT_MPI_OFF_REASON);
}
Status fleet_exchange_identities(const std::string&, std::vector<std::string>*) {
  return Status::unavailable(std::string("built without MPI: ") + DETAUDIT_MPI_OFF_REASON);
}
bool fleet_all_ready(bool, double) { return false; }
int fleet_share_exit_code(int code, const std::vector<bool>&) { return code; }
void fleet_mpi_end(bool, int) {}
Status run_allreduce_cells(int, uint64_t, int, std::vector<CollectiveCell>*) {
  return Status::unavailable(std::string("built without MPI: ") + DETAUDIT_MPI_OFF_REASON);
}

#endif

}  // namespace detaudit
