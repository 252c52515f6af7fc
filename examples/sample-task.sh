#!/bin/sh
# A stand-in for a delegated tool run: it edits, adds, deletes and leaves a build output.
set -e
sed -i 's/hello, world/hello, patchbox/' src/greet.sh
printf 'written by the delegation\n' > src/added.txt
rm notes.txt
mkdir -p build && echo "ignored output" > build/out.o
echo "tool ran in $PWD" >&2
