#!/usr/bin/env bash
# A cold build of the extension module, as `pip install` runs it on a fresh machine: empty
# cargo home (crates downloaded) and an empty target folder, in a scratch folder that is kept
# for reading. Prints the download and the build's wall and CPU time; cargo's per-crate
# timings are in the scratch folder's cargo-timing.html (docs/building.md reads them).
# Usage: benches/build/cold.sh [PROFILE] [SCRATCH]   (defaults: editable, a new temp folder)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
profile=${1:-editable}
scratch=${2:-$(mktemp -d)}
mkdir -p "$scratch"
export CARGO_HOME="$scratch/cargo" CARGO_TARGET_DIR="$scratch/target"
# the toolchain stays where rustup put it; only cargo's caches start empty
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
export PATH="$HOME/.cargo/bin:$PATH"
cd "$root"
uptime > "$scratch/load-before"
/usr/bin/time -f "%e %U %S" -o "$scratch/fetch.time" cargo fetch --locked -q
/usr/bin/time -f "%e %U %S" -o "$scratch/build.time" \
  cargo build --locked --profile "$profile" --features python --timings -q
uptime > "$scratch/load-after"
cp "$CARGO_TARGET_DIR/cargo-timings/cargo-timing.html" "$scratch/"
for step in fetch build; do
  read -r wall user sys < "$scratch/$step.time"
  echo "$step: wall $wall s, CPU $(echo "$user $sys" | awk '{print $1 + $2}') s (user $user, sys $sys)"
done
echo "load average: $(sed "s/.*average: //" "$scratch/load-before") -> $(sed "s/.*average: //" "$scratch/load-after")"
echo "timings: $scratch/cargo-timing.html"
