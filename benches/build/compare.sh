#!/usr/bin/env bash
# Instructions spent in the native scans under two cargo profiles (callgrind counts
# instructions, so the result does not depend on what else the machine runs) and the
# build CPU of each profile from clean. Needs valgrind and the dev install's venv.
# Usage: benches/build/compare.sh [PROFILE ...]   (default: release dist)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
profiles=("$@")
[ ${#profiles[@]} -eq 0 ] && profiles=(release dist)
for p in "${profiles[@]}"; do
  target="$scratch/target-$p"
  cpu=$( { /usr/bin/time -f "%U %S" cargo build --manifest-path "$root/Cargo.toml" \
    --profile "$p" --features python --lib -q --target-dir "$target" ; } 2>&1 | tail -1 )
  pkg="$scratch/pkg-$p"
  mkdir -p "$pkg"
  cp -r "$root/python/ctxcompact" "$pkg/"
  cp "$target/$p/libctxcompact.so" "$pkg/ctxcompact/_core.abi3.so"
  count() {
    PYTHONPATH="$pkg" valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    python "$root/benches/build/work.py" "$1" 2>&1 | sed -n 's/.*Collected : //p'
  }
  base=$(count 0)
  three=$(count 3)
  echo "$p: build cpu $(echo "$cpu" | awk '{print $1 + $2}') s; scans $(( (three - base) / 3 )) instructions per round"
done
