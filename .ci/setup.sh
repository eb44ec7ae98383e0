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

# The cuDNN frontend's headers (NVIDIA's header-only C++ graph API over cuDNN, MIT licence)
# for tessera::cudnn -- cuDNN's fused attention as cuda_bf16_kernels' other attention
# (kernels/cuda/cudnn_attention.hpp) -- where the CUDA toolkit and cuDNN 9 are installed:
# Debian does not package them, so they come from PyPI's wheel (nvidia-cudnn-frontend; its
# include/ folder only) into build/deps, where CMake looks. Optional: without them the
# component is absent and the rest builds as before.
cudnn_frontend_version=1.32.0
root=$(cd "$(dirname "$0")/.." && pwd)
frontend="$root/build/deps/cudnn-frontend-$cudnn_frontend_version"
if [ -f /usr/local/cuda/include/cudnn.h ] && [ ! -f "$frontend/include/cudnn_frontend.h" ]; then
  wheels=$(mktemp -d)
  # the headers are the same in every wheel: name one platform and Python, whatever this one runs
  if python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
       --python-version 3.11 -d "$wheels" "nvidia-cudnn-frontend==$cudnn_frontend_version" > "$wheels/log" 2>&1 &&
     python3 - "$wheels" "$frontend" <<'PY'
import pathlib, shutil, sys, zipfile
wheels, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(wheels.glob("*.whl"))
tmp = dest.with_name(dest.name + ".tmp")
shutil.rmtree(tmp, ignore_errors=True)
with zipfile.ZipFile(wheel) as z:
    z.extractall(tmp, [n for n in z.namelist() if n.startswith("include/")])
tmp.rename(dest)  # whole or absent: written aside, then renamed
PY
  then
    echo "tessera setup: the cuDNN frontend $cudnn_frontend_version's headers in $frontend"
  else
    echo "tessera setup: could not fetch the cuDNN frontend's headers (pip download nvidia-cudnn-frontend==$cudnn_frontend_version: $(tail -1 "$wheels/log")); tessera::cudnn is not built" >&2
  fi
  rm -rf "$wheels"
fi
