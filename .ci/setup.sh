#!/usr/bin/env bash
# Installs what tessera's build, tests, examples and benchmarks need, where it is missing
# (Debian packages). Safe to run again: it does nothing when everything is present.
set -euo pipefail
packages=(
  cmake g++ clang clang-tools llvm python3
  libboost-dev libboost-context-dev doctest-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin libopenblas-dev
  libsentencepiece-dev sentencepiece libtomlplusplus-dev fortunes-min fortunes
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tessera setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
