#!/usr/bin/env bash
# Builds the release wheel other Linux machines install: abi3 (CPython >= 3.9), tagged
# manylinux_2_28, linked by zig against glibc 2.28 (a plain build on a newer glibc uses that
# glibc's symbols, and maturin refuses it the manylinux tag). Then checks the tag with
# auditwheel. Output: build/wheels/. Takes a cold release build (about 10 minutes on 2 cores).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv=${PATCHBOX_WHEEL_VENV:-$here/../build/wheel-venv}
out=${1:-$here/../build/wheels}
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" ziglang auditwheel
# maturin finds zig through the `ziglang` package of the Python on PATH.
export PATH="$venv/bin:$PATH" VIRTUAL_ENV="$venv"
cd "$here"
maturin build --release --zig --compatibility manylinux_2_28 -o "$out"
for w in "$out"/patchbox-*manylinux_2_28*.whl; do
  auditwheel show "$w"
done
