#!/usr/bin/env bash
# Installs the Debian packages strata needs to build and test (names only; nothing else is
# downloaded). nvcc is optional: when /usr/local/cuda/bin/nvcc exists the CUDA backend builds.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends \
  cmake ninja-build g++ clang libclang-rt-dev pkg-config \
  libgtest-dev libgmock-dev libbenchmark-dev \
  nlohmann-json3-dev libcli11-dev libfmt-dev libpcre2-dev libicu-dev \
  python3 python3-jinja2 \
  libboost-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc >/dev/null
# Node.js and npm for the OpenAI SDK test (tests/server/node): the machine's, or Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
# The pinned OpenAI Node SDK (package-lock.json), from the npm registry.
(cd "$(dirname "$0")/../tests/server/node" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
