#!/usr/bin/env bash
# Installs the Debian packages detaudit needs, only those missing. Run as root or with sudo available.
# Each package and why it is here is listed in README.md ("Dependencies").
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config      # build
  libopenblas-dev                       # openblas target (sgemm/dgemm, OPENBLAS_CORETYPE)
  libdnnl-dev                           # onednn target (conv2d, matmul; ONEDNN_MAX_CPU_ISA)
  libhwloc-dev                          # machine fingerprint: topology, caches, GPU-local CPUs
  libfmt-dev nlohmann-json3-dev libcli11-dev   # formatting, results.json, command line
  libxxhash-dev                         # 128-bit XXH3 fingerprints
  libsqlite3-dev zlib1g-dev             # result history; gzip'd IDX datasets
  googletest libgtest-dev libbenchmark-dev     # tests and benchmarks
  dataset-fashion-mnist                 # training data (IDX files in /usr/share/datasets/fashion-mnist)
)

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

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
