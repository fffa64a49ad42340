#!/usr/bin/env bash
# Installs the Debian packages detaudit needs, only those missing. Run as root or with sudo available.
# Each package and why it is here is listed in README.md ("Dependencies").
#   scripts/setup-debian.sh           install what is missing
#   scripts/setup-debian.sh --check   list what is missing, install nothing; exit 1 if anything is
#
# Packages are installed with --no-install-recommends, so every package configure or the build needs
# is listed here by name, recommended ones included: Debian's libdnnl-dev only *recommends*
# ocl-icd-opencl-dev, but its CMake config (dnnl-config.cmake) stops without OpenCL's library and headers.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config      # build
  libopenblas-dev                       # openblas target (sgemm/dgemm, OPENBLAS_CORETYPE)
  libdnnl-dev ocl-icd-opencl-dev        # onednn target (conv2d, matmul; ONEDNN_MAX_CPU_ISA); OpenCL for dnnl-config.cmake
  libhwloc-dev                          # machine fingerprint: topology, caches, GPU-local CPUs
  libfmt-dev nlohmann-json3-dev libcli11-dev   # formatting, results.json, command line
  libxxhash-dev                         # 128-bit XXH3 fingerprints
  libsqlite3-dev zlib1g-dev             # result history; gzip'd IDX datasets
  googletest libgtest-dev libbenchmark-dev     # tests and benchmarks
  clang libclang-rt-14-dev              # the sanitizer and libFuzzer build that .ci/run runs (scripts/ci-extra.sh)
  chromium                              # headless browser: the report rendering tests (tests/test_browser.cpp)
  python3 procps                        # scripts/gpu-check.sh's figures and its dry-run test (pkill)
  python3-jsonschema                    # the output contract's test: every document against schemas/
  dataset-fashion-mnist                 # training data (IDX files in /usr/share/datasets/fashion-mnist)
  openmpi-bin libopenmpi-dev            # fleet: mpirun, MPI gathering and the allreduce workload
  slurm-wlm munge                       # fleet's tests: a local two-node Slurm cluster (tests/fleet/slurm-cluster.sh)
  prometheus                            # promtool: the --metrics files checked as Prometheus reads them
)

check_only=0
case "${1:-}" in
  --check) check_only=1 ;;
  "") ;;
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "setup: unknown option '$1' (use --check or nothing)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} Debian packages present"
  exit 0
fi

if [ "$check_only" -eq 1 ]; then
  echo "setup: missing ${#missing[@]} of ${#packages[@]} Debian packages:"
  printf '  %s\n' "${missing[@]}"
  echo "setup: install them with: scripts/setup-debian.sh (as root or with sudo)"
  exit 1
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
