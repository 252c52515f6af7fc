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
# The extension links the system's libsqlite3.so.0 (the one Python's sqlite3 module uses; see
# pyproject.toml). A zig build is a cross build, where libsqlite3-sys asks no pkg-config and
# zig searches only its own glibc: it is shown a directory holding that one library, nothing
# else of the system's (so every other symbol still resolves against glibc 2.28).
sqlite_so=$(ldconfig -p | awk '/libsqlite3\.so\.0 .*x86-64/ {print $NF; exit}')
if [[ -z "$sqlite_so" ]]; then
  echo "build-wheel.sh: libsqlite3.so.0 not found (install libsqlite3-dev)" >&2
  exit 1
fi
libdir=$(mktemp -d)
trap 'rm -rf "$libdir"' EXIT
ln -s "$sqlite_so" "$libdir/libsqlite3.so"
export SQLITE3_LIB_DIR="$libdir"
cd "$here"
# maturin's own check would judge libsqlite3.so.0 by the copy on this machine (built for its
# glibc), but the wheel uses the copy of the machine it is installed on: the check is skipped
# and done here instead, on what the wheel itself carries.
maturin build --release --zig --compatibility manylinux_2_28 --auditwheel skip -o "$out"
for w in "$out"/patchbox-*manylinux_2_28*.whl; do
  x=$(mktemp -d)
  python3 -m zipfile -e "$w" "$x"
  so=$(find "$x" -name '_native*.so')
  newest=$(objdump -T "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
  needed=$(objdump -p "$so" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
  echo "$(basename "$w"): newest glibc symbol $newest; needs: $needed"
  rm -rf "$x"
  if [[ "$(printf '%s\n' "$newest" GLIBC_2.28 | sort -V | tail -1)" != GLIBC_2.28 ]]; then
    echo "build-wheel.sh: $newest is newer than manylinux_2_28 allows" >&2
    exit 1
  fi
  # Everything else it links is in the manylinux_2_28 policy; auditwheel names libsqlite3.so.0
  # as the one external library (deliberately not copied in).
  auditwheel show "$w" || true
done
