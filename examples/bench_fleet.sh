#!/usr/bin/env bash
# The fleet benchmark of docs/fleet.md: 100 pending patches of 100 files each, written by 8
# writers at once to an S3-compatible store (a local `weed server -s3`), then listed, shown
# and applied; against `git push` of the same 100 changes to a bare repository on the same
# machine; and the bytes the store holds with and without pre-image sharing.
#
#   PATCHBOX_WEED=/path/to/weed examples/bench_fleet.sh        (builds target/release/patchbox)
#
# Everything runs on 127.0.0.1 in a temporary directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
weed=${PATCHBOX_WEED:-$(command -v weed || true)}
[[ -x $weed ]] || { echo "set PATCHBOX_WEED to SeaweedFS's weed binary" >&2; exit 2; }
cargo build --release -q
pb=$PWD/target/release/patchbox
PATCHES=${PATCHES:-100} FILES=${FILES:-100} WRITERS=${WRITERS:-8}

work=$(mktemp -d)
weed_pid=
cleanup() { [[ -n $weed_pid ]] && kill -9 "$weed_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

now() { date +%s.%N; }
jobs_=()
wait_jobs() { # waits for the jobs started since the last call (not the server); fails if one did
  local j
  for j in "${jobs_[@]}"; do wait "$j"; done
  jobs_=()
}
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$2"; }
per() { python3 -c "import sys; print(f'{1000 * float(sys.argv[1]) / int(sys.argv[2]):.1f}')" "$1" "$2"; }

# --- the server
read -r -a ports < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(8)]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
mkdir -p "$work/weed"
"$weed" server -s3 -dir="$work/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
  -s3.port="${ports[0]}" -s3.port.grpc="${ports[1]}" -master.port="${ports[2]}" \
  -master.port.grpc="${ports[3]}" -volume.port="${ports[4]}" -volume.port.grpc="${ports[5]}" \
  -filer.port="${ports[6]}" -filer.port.grpc="${ports[7]}" -s3.port.iceberg=0 -s3.port.lance=0 \
  -master.volumeSizeLimitMB=256 -volume.max=100 >"$work/weed.log" 2>&1 &
weed_pid=$!
disown "$weed_pid"  # killed by cleanup; no job notice
http() { # METHOD PATH -> status code (or nothing)
  { exec 3<>"/dev/tcp/127.0.0.1/${ports[0]}"; } 2>/dev/null || return 0
  printf '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n' "$1" "$2" >&3
  head -c 12 <&3 | cut -c10-12
  exec 3<&-
}
for _ in $(seq 600); do [[ $(http PUT /bench) == 200 ]] && [[ $(http PUT /bench/.probe) == 200 ]] && break; sleep 0.2; done
export AWS_ENDPOINT_URL=http://127.0.0.1:${ports[0]} AWS_ALLOW_HTTP=true AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench
store=s3://bench/fleet

# --- the project: FILES files of 2 x PATCHES + 10 lines; patch k changes line 2k+5 of
# every file, so the patches are disjoint (one unchanged line between two patches' lines) but
# each one's context overlaps its neighbours'.
src=$work/project
mkdir -p "$src"
for f in $(seq "$FILES"); do seq -f "file $f line %g" $((2 * PATCHES + 10)) >"$src/f$f.txt"; done
git -C "$src" init -q && git -C "$src" add . && git -C "$src" -c user.name=b -c user.email=b@b commit -qm base
change() { # K DIR: patch K's change in DIR
  local line=$(( 2 * $1 + 5 ))
  for f in "$2"/f*.txt; do sed -i "${line}s/\$/ changed by patch $1/" "$f"; done
}
export -f change

# --- patchbox: each writer makes its patches into its own local pending store (untimed),
# then all eight push to the bucket at once (timed: pre-images, patch, record).
for w in $(seq 0 $((WRITERS - 1))); do
  (
    for k in $(seq "$w" "$WRITERS" $((PATCHES - 1))); do
      "$pb" run --project "$src" --root "$work/root$w" --id "p$k" --pending --no-confine \
        -- bash -c "change $k ." 2>/dev/null
    done
  ) &
  jobs_+=($!)
done
wait_jobs
t0=$(now)
for w in $(seq 0 $((WRITERS - 1))); do
  "$pb" pending push --store "$store" --root "$work/root$w" 2>/dev/null &
  jobs_+=($!)
done
wait_jobs
t1=$(now)
push_s=$(elapsed "$t0" "$t1")
n=$("$pb" pending list --store "$store" | wc -l)
[[ $n == "$PATCHES" ]] || { echo "expected $PATCHES stored patches, found $n" >&2; exit 1; }

t0=$(now); "$pb" pending list --store "$store" >/dev/null; t1=$(now); list_s=$(elapsed "$t0" "$t1")
ids=$("$pb" pending list --store "$store" | cut -f1)
t0=$(now); for id in $ids; do "$pb" pending show --store "$store" "$id" >/dev/null; done; t1=$(now)
show_s=$(elapsed "$t0" "$t1")
usage=$("$pb" pending usage --store "$store")

# Applied one after another onto a reviewer's copy: from the second on, each patch's context
# has moved (its neighbour changed the lines around it), so each is merged 3-way against its
# stored pre-images.
cp -r "$src" "$work/review"
t0=$(now)
for id in $ids; do
  "$pb" pending apply --store "$store" --root "$work/review-root" --project "$work/review" "$id" >/dev/null 2>&1 \
    || { echo "apply of $id failed" >&2; exit 1; }
done
t1=$(now)
apply_s=$(elapsed "$t0" "$t1")

# --- git: the same changes as commits on one branch each in eight clones (untimed), then
# pushed to a bare repository by the eight writers at once (timed).
git clone -q --bare "$src" "$work/bare.git"
for w in $(seq 0 $((WRITERS - 1))); do
  git clone -q "$work/bare.git" "$work/clone$w"
  (
    cd "$work/clone$w"
    for k in $(seq "$w" "$WRITERS" $((PATCHES - 1))); do
      git checkout -q -b "p$k" origin/HEAD 2>/dev/null || git checkout -q -b "p$k" origin/master 2>/dev/null || git checkout -q -b "p$k" origin/main
      change "$k" .
      git -c user.name=b -c user.email=b@b commit -qam "patch $k"
    done
  )
done
t0=$(now)
for w in $(seq 0 $((WRITERS - 1))); do
  (
    cd "$work/clone$w"
    for k in $(seq "$w" "$WRITERS" $((PATCHES - 1))); do git push -q origin "p$k" 2>/dev/null; done
  ) &
  jobs_+=($!)
done
wait_jobs
t1=$(now)
git_s=$(elapsed "$t0" "$t1")
git_bytes=$(du -sb "$work/bare.git/objects" | cut -f1)

echo "patches: $PATCHES of $FILES files each, $WRITERS writers at once"
echo "store (weed server -s3 on 127.0.0.1):"
echo "  push to the bucket   ${push_s}s wall, $(per "$push_s" "$PATCHES") ms per patch"
echo "  list                 ${list_s}s"
echo "  show each            ${show_s}s, $(per "$show_s" "$PATCHES") ms per patch"
echo "  apply each (3-way)   ${apply_s}s, $(per "$apply_s" "$PATCHES") ms per patch"
echo "git push to a bare repository:"
echo "  push each branch     ${git_s}s wall, $(per "$git_s" "$PATCHES") ms per patch"
echo "  objects              $git_bytes bytes"
echo "bytes in the bucket:"
echo "$usage" | sed 's/^/  /'
