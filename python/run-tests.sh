#!/usr/bin/env bash
# Builds the Python package into a private virtualenv and runs its tests (pytest) and a type
# check of the stubs (mypy). The package's one runtime dependency (pydantic) is installed with
# the test tools, so the type check sees it whatever maturin installs. Called by
# tests/run-all.sh; runnable alone from anywhere.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv=${PATCHBOX_PY_VENV:-$here/../build/py-venv}
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.5,<2" "pytest>=7" "mypy>=1" "pydantic>=2,<3"
export VIRTUAL_ENV="$venv"
cd "$here"
"$venv/bin/maturin" develop -q
"$venv/bin/python" -m pytest -q "$@"
"$venv/bin/python" -m mypy --strict --no-error-summary -p patchbox
"$venv/bin/python" -m mypy --strict --no-error-summary tests/typecheck_example.py
