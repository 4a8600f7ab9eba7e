#!/usr/bin/env bash
# The fuzz job (docs/architecture.md, "Fuzzing"): bad bytes never crash the core.
#   1. tools/fuzz/fuzz.rs for SECONDS: mutation fuzzing of every native reader (in
#      memory and windowed), of the scans over what they read and of the engine's
#      entry points (plan, replay, resume, retention, chat counts), on stable Rust,
#      built with overflow checks (cargo profile `fuzz`). Prints the inputs tried
#      and the panics per target; each panicking input is kept in target/fuzz-crashes/.
#   2. tests/test_fuzz.py (pytest -m fuzz), EXAMPLES examples per test: hypothesis
#      over raw bytes at the Python boundary (needs ctxcompact importable).
# Seeds: tests/fixtures, and ../shared/data when it is beside the checkout.
# Use: tools/fuzz/run.sh [SECONDS [EXAMPLES]]   (defaults 60 and 100; 0 skips a part).
# Exits non-zero on any panic or failing example.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
examples="${2:-100}"
if [ "$seconds" != 0 ]; then
    seeds=(tests/fixtures)
    if [ -d ../shared/data ]; then
        seeds+=(../shared/data)
    else
        echo "   (../shared/data is not beside this checkout: seeds from tests/fixtures only)"
    fi
    cargo build -q --profile fuzz --example fuzz
    target/fuzz/examples/fuzz --seconds "$seconds" --out target/fuzz-crashes "${seeds[@]}"
fi
if [ "$examples" != 0 ]; then
    CTXCOMPACT_FUZZ_EXAMPLES="$examples" python -m pytest tests/test_fuzz.py -m fuzz -q \
        -p no:cacheprovider
fi
