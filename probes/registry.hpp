// The backend registry: everything detaudit knows about one backend, in one entry (after ggml's
// ggml_backend_reg). Per backend: its spec keys and defaults, the environment its worker needs, the
// factory, the workloads it supports, how `key=all` enumerates algorithms, its deterministic and
// nondeterministic training variants, and its promises (what the library or detaudit's own code
// claims), which gates/verdict.cpp judges observations against, its suites' and training designs' default
// targets and the library versions it writes into the machine fingerprint. Each entry is made in the
// backend's own file, probes/backends/<name>.cpp; adding a backend is that file, its kernels and one line
// of registry.cpp's list (DETAUDIT_BACKENDS). Nothing outside those files names a backend (tests/test_layering.cpp
// checks).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/backend.hpp"
#include "probes/spec.hpp"
#include "contract/observation.hpp"
#include "contract/target_facts.hpp"

namespace detaudit {

// What a target promises for one workload. Built from the registry entry, the target's settings, the
// workload and (where the claim comes from the library at run time, as cuDNN's per-algorithm
// `determinism`) the observation's details.
struct Promise {
  enum class RunToRun {
    kDeterministic,     // every repeat must give the same bits
    kNondeterministic,  // variation is promised (atomics, completion order): seeing it is EXPECTED
    kNone,              // nothing is promised either way
  };
  RunToRun run_to_run = RunToRun::kNone;
  std::string run_to_run_source;  // who promises it, in words: "cuDNN claims CUDNN_NON_DETERMINISTIC for ..."
  // Non-empty: two claims for what ran disagree (cuDNN's Find against the marks of cudnn_ops.h), in
  // words. run_to_run follows Find; the disagreement is a WARN whatever was observed (gates/verdict.cpp).
  std::string claims_disagree;

  // Targets with the same non-empty class must give identical bits on a workload: e.g.
  // "cpu?order=sequential" for every thread count and isa. Empty: no equality promised.
  std::string equality_class;

  bool batch_invariance_claimed = false;  // a batchinv workload must show invariance

  // Requirements the machine must meet to run the target ("AVX-512F", "a CUDA device"). When one is
  // unmet, a crash (SIGILL) or a skip is EXPECTED, not a failure.
  std::vector<std::string> requirements;
  std::vector<std::string> unmet;  // those of `requirements` this machine does not meet

  // Unit roundoff of the inputs as the target consumes them, beyond the workload's own format:
  // 0 for full precision; 2^-11 for TF32 (10 stored mantissa bits). The error budget of the oracle
  // check widens by it (gates/verdict.cpp).
  double input_unit_roundoff = 0;

  // Non-empty: why the summation error bound does not apply to this target's algorithm (cuDNN's FFT and
  // Winograd convolutions transform the inputs and do not form the sum of products the bound is for).
  // The oracle error is then reported, not judged; NaN against a number still fails.
  std::string error_bound_exempt;
};

// Where a backend's targets run: the host CPU, or an accelerator of one kind (device index :N).
enum class DeviceKind { kHost, kCuda };
// "host", "cuda": the name its device kind entry gives (TargetFacts::device_kind).
std::string to_string(DeviceKind kind);

// One kind of device: what the machine fingerprint says of it, and how the other layers read that.
struct DeviceKindEntry {
  DeviceKind kind = DeviceKind::kHost;
  std::string name;
  // Writes its part of machine_fingerprint() (probes/env.cpp): for cuda, the CUDA stack's libraries, the
  // machine's availability line and "gpus".
  void (*describe_machine)(nlohmann::json* machine) = nullptr;
  // The top-level keys of the machine JSON it writes beyond "gpus" and "libraries" (compare diffs them,
  // `detaudit env` prints them), in print order.
  std::vector<std::string> machine_keys;
  // Ok when this kind's devices can run on the machine `machine` describes (machine_fingerprint()), else
  // unavailable saying why in one line ("no CUDA device: ...").
  Status (*availability)(const nlohmann::json& machine) = nullptr;
  // The machine part of a baseline entry's key for a target on device `device` (gates/baseline.cpp).
  void (*baseline_key)(const nlohmann::json& machine, int device, nlohmann::json* key) = nullptr;
};
// Every device kind, host first.
const std::vector<DeviceKindEntry>& device_kinds();
const DeviceKindEntry& device_kind_entry(DeviceKind kind);

// A default target of a suite (suites/probe_suite.cpp): `late` ones are listed after every other target of
// their device kind (the long runs last).
struct SuiteTarget {
  std::string target;
  bool late = false;
};

// One backend.
struct BackendEntry {
  std::string name;        // "cpu", "openblas", ...
  DeviceKind device = DeviceKind::kHost;  // kCuda: takes :N and needs a CUDA device
  // The library picks among algorithms itself when the target leaves the choice open (cudnn's auto
  // algorithms, cublaslt's heuristic): another process may pick another one.
  bool picks_algorithms = false;
  // The oracle: every other target's outputs are compared with its own (cpu-ref).
  bool oracle = false;
  std::string summary;     // one line for --help
  bool hidden = false;     // test-only (testing?fault=...)
  // Its observations come from `detaudit import` (a framework's outputs), never from a worker: it has no
  // factory, and probe refuses it as a target (external?name=...).
  bool imported = false;
  // Keys of machine_fingerprint()["libraries"] whose versions this backend's bits depend on (openblas:
  // {"openblas", "openblas_core"}; cublas: {"cublas", "cuda_runtime", "cuda_driver"}; cudnn adds "cudnn").
  // The baselines key their entries by these (gates/baseline.cpp), with the CPU or the GPU.
  std::vector<std::string> libraries;
  // Keys of machine_fingerprint()["libraries"] that say how this build and this CPU select its code: the
  // compiler and C library detaudit was built with, the instruction set isa=auto resolves to, oneDNN's
  // dispatched ISA, OpenBLAS's core. Baselines key by them as by `libraries`; the training analysis calls
  // a difference in them alone "hardware or build", never hardware.
  std::vector<std::string> build;
  // Its spec keys in canonical order, with defaults, validators and --help values (probes/spec.hpp).
  std::vector<KeyRule> keys;
  // Keys that are valid one by one but not together (cpu: order=portable with conv=winograd): invalid,
  // saying why, for a target it refuses; parse_target reports it as a bad spec.
  Status (*check)(const Spec& target) = nullptr;
  // Environment variables its worker needs beyond the pinned thread counts every target gets (set by
  // the parent before exec, since libraries read them when they load); an empty value unsets one.
  void (*environment)(const Spec& target, std::map<std::string, std::string>* env) = nullptr;
  // Creates the backend in this process (make_target_backend).
  BackendOr (*make)(const Spec& target) = nullptr;
  // The workloads (workload names, and for conv2d the passes) it implements; others are not run.
  bool (*applicable)(const Spec& target, const Spec& workload) = nullptr;
  // Its promise for a workload, without `unmet` (promise_for fills that from the machine).
  Promise (*promise)(const Spec& target, const Spec& workload,
                     const std::map<std::string, std::string>& details) = nullptr;
  // `key=all` enumerates 0..N-1 for these keys (cudnn: fwd_algo 8, bwd_data_algo 6, bwd_filter_algo 7).
  std::map<std::string, int> all_counts;
  // Training: turns copies of a base target into its deterministic and nondeterministic variant;
  // nullptr when the backend has no nondeterministic variant.
  // Invalid, saying why, when this base has no nondeterministic variant that can vary.
  Status (*variants)(Spec* deterministic, Spec* nondeterministic) = nullptr;
  // It runs every op the training models use (bias add, the activations' backward passes, the optimisers,
  // convolution's three passes): the autoencoder, PredNet and diverge can train on it. A trace or training run
  // of a backend without them was made by no run (tests/test_registry.cpp holds this against the host's
  // backends as they are made).
  bool trains = false;
  // Whether this target's bits are one implementation on every device (order=portable): nullptr for never.
  bool (*portable)(const Spec& target) = nullptr;
  // Its default targets in a probe suite ("quick", "full"), in suite order; nullptr for none.
  std::vector<SuiteTarget> (*suite_targets)(const std::string& suite) = nullptr;
  // Its default targets of a training design or qualify level: "sony2021" (the autoencoder design),
  // "prednet" (the PredNet design), "qualify" (qualify's level 2); nullptr or empty for none.
  std::vector<std::string> (*training_targets)(const std::string& use) = nullptr;
  // What a record of a run says of its backend (a cell's describe and details, a trace header's backend), checked
  // against the target (backend_claims_contradiction below): `made_here`, its backend is made in any process at
  // no cost and without side effects (cpu, cpu-ref), so a record is compared with the one made here, but for the
  // instruction set "auto" resolves to; `claims`, the backend's own rule for a library backend: the spec it names
  // itself by (`spelled`), the remark in parentheses after it, and the settings its library reports under its own
  // names, each what the target and the machine that ran it give ("" or one clause; `machine` is the record's
  // machine description, null where the record has none).
  bool made_here = false;
  // Settings a made-here backend reports only when a test forces them (cpu: the forced order of its atomic sums),
  // which the one made here therefore lacks; any other setting it does not report is refused.
  std::vector<std::string> forced_details;
  std::string (*claims)(const Spec& target, const std::string& spelled, const std::string& remark,
                        const std::map<std::string, std::string>& details, const nlohmann::json& machine) = nullptr;
  // Writes its library versions into machine_fingerprint()["libraries"] (the keys `libraries` names).
  void (*describe_machine)(nlohmann::json* libraries) = nullptr;
  // Whether its kernels run this workload on this target wherever the machine meets its promise's requirements
  // (cpu: every workload but matmul in f64 outside order=portable): a cell of it is skipped only where they are
  // unmet or it does not. nullptr: it may skip for what no record keeps (a library left out of the build).
  bool (*provides)(const Spec& target, const Spec& workload) = nullptr;
};

// All entries, in --help order.
const std::vector<BackendEntry>& backend_registry();
const BackendEntry* find_backend(const std::string& name);
// The entry with `oracle` set (cpu-ref).
const BackendEntry& oracle_backend();
// The entry whose targets are imported (external).
const BackendEntry& imported_backend();
// Every backend's default targets of a probe suite: device kinds in order, within each the early targets
// of every backend in registry order, then the late ones.
std::vector<std::string> suite_default_targets(const std::string& suite);
// Every backend's default training targets for `use` (BackendEntry::training_targets), in registry order.
std::vector<std::string> default_training_targets(const std::string& use);
// Whether the library chooses the algorithm this target runs for this workload (cuDNN's auto algorithms).
bool picks_algorithm(const Spec& target, const Spec& workload);

// Environment variables for the worker of this target (empty value: unset it).
std::map<std::string, std::string> target_environment(const Spec& target);
// Creates the backend in this process; unavailable or unsupported when it cannot run here, invalid for a
// target that is not a backend's or whose outputs are imported.
BackendOr make_target_backend(const Spec& target);
// What a run recorded of the backend its target ran (a cell's describe and details, a diverge trace's backend and
// details) agrees with the target; "" when it does, else one clause saying what contradicts what. Each detail
// that is a key of the backend holds a value that key takes, the target's own unless the target left it to
// "auto" (or the library reports it "unavailable (...)"); a "(key value)" the description shows is that
// detail's. For the host's backends (not imported ones) the description is what their backends write: a spec of
// the target's backend, every key it names the target's, then at most one parenthesized remark; and a cell
// that ran reports its settings (`ran`: details not empty, but the test-only backend's).
// `field` names the description in the message ("describe" in a results file, "backend" in a trace);
// `machine` the machine that ran it (the record's machine description; null where the record has none).
std::string backend_claims_contradiction(const Spec& target, const std::string& describe,
                                         const std::map<std::string, std::string>& details, bool ran,
                                         const char* field = "describe",
                                         const nlohmann::json& machine = nlohmann::json());
// Why a record of this cell skipped on `machine` (a machine description, or a baseline key: its "cpu_features")
// cannot be true: "" where it may be, else one clause. The oracle backend runs every workload on every machine; a
// backend that says what it provides (BackendEntry::provides) skips only a workload it does not provide or where a
// requirement of its promise is unmet (a machine whose features are not described may lack any).
std::string skip_contradiction(const Spec& target, const Spec& workload, const nlohmann::json& machine);
// Whether the target runs this workload at all (inapplicable cells are not run).
bool applicable(const Spec& target, const Spec& workload);
// `key=all` expands to one target per algorithm index.
std::vector<Spec> expand_all(const Spec& target);

// The promise of a target for a workload. `machine` is machine_fingerprint() of the machine that ran
// it (cpu_features, gpus); `details` the observation's details (cuDNN's claimed_deterministic).
Promise promise_for(const Spec& target, const Spec& workload, const nlohmann::json& machine,
                    const std::map<std::string, std::string>& details);

// An observation's target and workload as specs: those it carries (Observation::target_spec, workload_spec), else
// its texts parsed (an observation made by hand). Invalid, naming the text, when either does not parse (a cell of a
// version whose registry differs).
Status specs_of(const Observation& o, Spec* target, Spec* workload);
// Sets o's specs from its texts, and the texts to their canonical form; invalid as specs_of, o unchanged then.
Status attach_specs(Observation* o);
// The observation's promise on `machine` (promise_for of its specs and details); nullopt where they do not parse.
std::optional<Promise> promise_of(const Observation& o, const nlohmann::json& machine);

// What the layers that do not see this registry need of a target (contract/target_facts.hpp); a target
// that does not parse is not `known`.
TargetFacts target_facts(const std::string& target);

// Training: a base target's deterministic and nondeterministic variants (what derive_variants of
// suites/train_design does today; invalid when the backend has none).
Status training_variants(const Spec& base, Spec* deterministic, Spec* nondeterministic);

// Whether the target's backend runs the training models (BackendEntry::trains); false for an unknown backend.
bool target_trains(const Spec& target);

}  // namespace detaudit
