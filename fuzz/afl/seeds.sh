#!/usr/bin/env bash
# Refreshes fuzz/afl/in/ from the patch part of every case in fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p in
for f in ../corpus/*.case; do
  awk 'f{print} /^==== fuzz-case: patch ====$/{f=1}' "$f" > "in/$(basename "$f" .case).patch"
done
