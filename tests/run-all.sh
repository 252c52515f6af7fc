#!/usr/bin/env bash
# Runs every test: the Rust suite (unit, integration, doctests), then the C++ suite through
# CMake and CTest, then the Python package (python/run-tests.sh: pytest and mypy in a private
# venv). This is the README's test command, and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${PATCHBOX_BUILD_DIR:-build/ci}

echo "== cargo fmt / clippy"
cargo fmt --all -- --check
cargo clippy --all-targets --all-features -q -- -D warnings
cargo clippy -p patchbox-python --all-targets -q -- -D warnings

echo "== docs (docs.rs style: every public item documented, no broken links)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --all-features -q

echo "== Rust tests"
cargo test --all-features -q 2>&1 | tee "${TMPDIR:-/tmp}/patchbox-cargo-test.log"

# The session tests once more in the other isolation (copy <-> overlay: the same patches are
# expected byte for byte), and with fuse-overlayfs where it can run.
other=overlay
[[ "${PATCHBOX_ISOLATION:-auto}" != copy ]] && other=copy
echo "== Rust session tests, PATCHBOX_ISOLATION=$other"
PATCHBOX_ISOLATION=$other cargo test --all-features -q --test core --test crash --test cli \
  --test chokepoint --test isolation
if command -v fuse-overlayfs >/dev/null && [[ -c /dev/fuse ]]; then
  echo "== Rust session tests, fuse-overlayfs"
  PATCHBOX_ISOLATION=overlay PATCHBOX_OVERLAY_MODE=fuse cargo test --all-features -q \
    --test core --test chokepoint --test isolation
fi

# Overlay sessions and plan snapshots of git projects over a shared lower layer (normally
# from 2,000 tracked files on): every git project of these suites uses one here.
echo "== Rust session and plan tests, over shared lower layers"
PATCHBOX_ISOLATION=overlay PATCHBOX_SHARED_LOWER_MIN=1 cargo test --all-features -q \
  --test core --test cli --test isolation --test session_git_view
PATCHBOX_ISOLATION=overlay PATCHBOX_SHARED_LOWER_MIN=1 cargo test --all-features -q \
  --test plan_overlay --test plan_snapshot --test plan_own_snapshot --test plan_core \
  --test shared_lower

# The SQLite strategy once more against the system's libsqlite3 (what the Python extension and
# PATCHBOX_SYSTEM_SQLITE link) instead of the bundled SQLite.
echo "== Rust SQLite tests, system libsqlite3"
cargo test --no-default-features -q --test plan_sqlite --test plan_sqlite_unkeyed
# The triggers that record tables without a PRIMARY KEY, on this older SQLite, and the
# changeset encoding and undo they use (the raw-session tests of ffi_changeset need 3.44).
cargo test --no-default-features -q --lib -- plan::strategy::sqlite::row plan::strategy::sqlite::encode

if [[ -f CMakeLists.txt ]]; then
  echo "== C++ tests"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPATCHBOX_BUILD_TESTS=ON >/dev/null
  cmake --build "$build"
  ctest --test-dir "$build" --output-on-failure
fi

echo "== Python tests"
python/run-tests.sh
