#!/usr/bin/env bash
# The GPU check (run on the GPU machine; DESIGN "The GPU machine"): builds strata with CUDA
# (or takes a build made elsewhere), runs every test binary (the GPU tests included: the op
# harness, and in test_model the golden fixtures on CUDA, decode-step transfer counts, FP8 and
# graph tests), the kernel table (bench-kernels), the per-block numeric gate and the batch-1
# decode benchmark with its per-op profile on synthetic models
# of the real shapes (Nemotron-3-Nano-30B-A3B in the official selective FP8 layout,
# Nemotron-Nano-9B-v2 in BF16), writes logs under $OUT (default ./gpu-check-out) and prints a
# short summary last. Exits non-zero when anything failed.
#
#   scripts/gpu-check.sh                 build here (cmake --preset release, all cores)
#   scripts/gpu-check.sh --prebuilt DIR  DIR holds strata, test_* and baked_paths (the paths
#                                        compiled into the tests: SOURCE=..., BINARY=...),
#                                        and optionally lib/ with shared libraries to preload
#   --quick                              shorter gate and benchmark (smaller prompt, fewer steps)
# Environment: STRATA_ROOT (repository root, default: this script's parent), OUT, COMMIT,
# DEADLINE (seconds the whole check may take, default 540: later steps shrink or are skipped,
# and the summary is always written). Order: benchmark first (nothing else running on the
# machine), then the test suite (all binaries at once), then the gates.
set -uo pipefail
# A GPU test that cannot run fails instead of skipping (tests/common/require_gpu.h).
export STRATA_REQUIRE_GPU=1

ROOT=${STRATA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
OUT=${OUT:-$ROOT/gpu-check-out}
PREBUILT=""
QUICK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) PREBUILT=$2; shift 2 ;;
    --quick) QUICK=1; shift ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT/logs"
cd "$ROOT" || exit 2
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
FAILED=0
note() { echo "$*" | tee -a "$SUMMARY"; }
t0=$(date +%s)
DEADLINE=${DEADLINE:-540}
elapsed() { echo $(( $(date +%s) - t0 )); }
# A step's time limit: its cap, or what is left before the deadline (minus a margin for the summary).
limit() { local left=$(( DEADLINE - $(elapsed) - 25 )); [ "$left" -lt 1 ] && left=1; [ "$left" -lt "$1" ] && echo "$left" || echo "$1"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader > "$OUT/logs/gpu.txt" 2>&1
GPU=$(head -1 "$OUT/logs/gpu.txt")

# ---- the build ----
if [ -n "$PREBUILT" ]; then
  BIN=$PREBUILT
  TESTS=$PREBUILT
  [ -d "$PREBUILT/lib" ] && export LD_LIBRARY_PATH="$PREBUILT/lib:${LD_LIBRARY_PATH:-}"
  # The tests find fixtures and the strata binary through paths compiled in on the build
  # machine: make those paths resolve here.
  SRC_BAKED=$(sed -n 's/^SOURCE=//p' "$PREBUILT/baked_paths")
  BIN_BAKED=$(sed -n 's/^BINARY=//p' "$PREBUILT/baked_paths")
  if [ -n "$SRC_BAKED" ] && [ ! -e "$SRC_BAKED" ]; then mkdir -p "$(dirname "$SRC_BAKED")" && ln -s "$ROOT" "$SRC_BAKED"; fi
  if [ -n "$BIN_BAKED" ] && [ ! -e "$BIN_BAKED" ]; then mkdir -p "$(dirname "$BIN_BAKED")" && ln -s "$BIN/strata" "$BIN_BAKED"; fi
  note "build: prebuilt ($PREBUILT), commit $COMMIT"
else
  if ! { cmake --preset release > "$OUT/logs/configure.log" 2>&1 &&
         cmake --build --preset release -j"$(nproc)" > "$OUT/logs/build.log" 2>&1; }; then
    note "build: FAILED (logs/build.log)"; tail -30 "$OUT/logs/build.log"; exit 1
  fi
  BIN=$ROOT/build/release
  TESTS=$ROOT/build/release/tests
  note "build: cmake --preset release in $(elapsed) s, commit $COMMIT"
fi
missing=$(ldd "$BIN/strata" 2>/dev/null | grep "not found")
[ -n "$missing" ] && note "missing libraries: $missing"

# ---- decode benchmark on synthetic models of the real shapes (first: nothing else runs) ----
# The gate's prompt spans two scan chunks (128 tokens each) in a full check, so the prefill
# scan's chunk-to-chunk state passing is gated too.
if [ "$QUICK" = 1 ]; then GATE_T=8; STEPS=16; REPS=3; else GATE_T=160; STEPS=32; REPS=5; fi
MODELS="nemotron-3-nano-30b-a3b:fp8 nemotron-nano-9b-v2:bf16"
for md in $MODELS; do
  preset=${md%%:*}; dtype=${md##*:}; tag="${preset}_${dtype}"
  timeout "$(limit 120)" "$BIN/strata" bench --load-format dummy --preset "$preset" --dtype "$dtype" --device cuda \
    --prompt-len 16 --steps "$STEPS" --repeats "$REPS" --profile-ops 8 --label "commit $COMMIT" \
    --json "$OUT/logs/bench_$tag.json" > "$OUT/logs/bench_$tag.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || FAILED=1
  note "bench $preset $dtype: rc=$rc ($(elapsed) s)"
  grep -E "^(bytes/token|\| (eager|graph)|graph tokens|op profile)" "$OUT/logs/bench_$tag.log" | sed 's/^/  /' | tee -a "$SUMMARY"
  grep -A10 "^| op |" "$OUT/logs/bench_$tag.log" | sed 's/^/  /' | tee -a "$SUMMARY"  # the 8 costliest ops
  [ "$rc" = 0 ] || tail -3 "$OUT/logs/bench_$tag.log" | sed 's/^/  /' | tee -a "$SUMMARY"
done

# ---- the decode-critical kernels and the prefill scan on the real shapes (bench-kernels) ----
timeout "$(limit 150)" "$BIN/strata" bench-kernels --out "$OUT/logs/kernels.md" > "$OUT/logs/kernels.log" 2>&1
rc=$?
[ "$rc" = 0 ] || FAILED=1
note "bench-kernels: rc=$rc, $(grep -c '^| ' "$OUT/logs/kernels.md" 2>/dev/null || echo 0) table lines ($(elapsed) s)"

# ---- the test suite: every binary at once (the GPU ones share the device) ----
run_test() {  # name timeout
  local name=$1 limit=$2 log="$OUT/logs/$1.log"
  [ -x "$TESTS/$name" ] || { echo "$name: not built" > "$log.summary"; return; }
  timeout "$limit" "$TESTS/$name" --gtest_brief=1 > "$log" 2>&1
  local rc=$?
  local passed failed skipped
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
  local status=ok
  [ "$rc" = 124 ] && status="TIMEOUT after ${limit}s"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && status="FAILED rc=$rc"
  echo "$name: $status, passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}" > "$log.summary"
}
TEST_LIMIT=$(limit 180)
for t in test_unit test_reference test_text test_model test_ops test_engine test_scheduler; do run_test "$t" "$TEST_LIMIT" & done
wait
for f in "$OUT"/logs/*.log.summary; do
  line=$(cat "$f"); note "tests: $line"
  case "$line" in *": ok,"*|*"not built"*) ;; *) FAILED=1 ;; esac
done
grep -h "^\[golden cuda\]" "$OUT/logs/test_model.log" | tail -1 | sed 's/^/fixtures on cuda: /' | tee -a "$SUMMARY"
# The GPU tests must have run, not skipped: the op harness prints its device, the model GPU
# tests their fixtures on cuda.
if ! grep -q "^op harness on " "$OUT/logs/test_ops.log" 2>/dev/null; then
  note "tests: the op harness did not run on a GPU (skipped or not built)"; FAILED=1
fi
if ! grep -q "^\[golden cuda\]" "$OUT/logs/test_model.log" 2>/dev/null; then
  note "tests: the model GPU tests did not run on a GPU (skipped or not built)"; FAILED=1
fi
grep -h "^\[fp8\]" "$OUT/logs/test_model.log" | tee -a "$SUMMARY"
grep -h "summary" "$OUT/logs/test_ops.log" | tail -2 | sed 's/^/op harness: /' | tee -a "$SUMMARY"
note "tests done at $(elapsed) s"

# ---- load report of a fixture on the device ----
"$BIN/strata" inspect --load tests/fixtures/golden/moe_bf16 --device cuda > "$OUT/logs/load_report.log" 2>&1 ||
  { note "inspect --load: FAILED"; FAILED=1; }
sed 's/^/  /' "$OUT/logs/load_report.log" | grep "load:" >> "$SUMMARY"

# ---- the engine: batch-1 generate through the executor's graph, and offline throughput ----
for md in $MODELS; do
  preset=${md%%:*}; dtype=${md##*:}; tag="${preset}_${dtype}"
  lim=$(limit 120)
  if [ "$lim" -lt 30 ]; then note "engine $preset $dtype: SKIPPED (deadline)"; continue; fi
  timeout "$lim" "$BIN/strata" bench throughput --load-format dummy --preset "$preset" --dtype "$dtype" \
    --device cuda --max-model-len 2048 --max-num-seqs 64 --input-len 1024 --output-len 128 \
    --max-concurrency 1,64 --json "$OUT/logs/throughput_$tag.json" > "$OUT/logs/throughput_$tag.log" 2>&1
  rc=$?
  [ "$rc" = 0 ] || FAILED=1
  note "throughput $preset $dtype (1K in / 128 out, concurrency 1 and 64): rc=$rc ($(elapsed) s)"
  grep -E "output tokens/s|^\| TTFT|^\| TPOT" "$OUT/logs/throughput_$tag.log" | sed 's/^/  /' | tee -a "$SUMMARY"
done

# ---- the per-block gate on the same models ----
for md in $MODELS; do
  preset=${md%%:*}; dtype=${md##*:}; tag="${preset}_${dtype}"
  lim=$(limit 150)
  if [ "$lim" -lt 20 ]; then note "gate $preset $dtype: SKIPPED (deadline)"; FAILED=1; continue; fi
  timeout "$lim" "$BIN/strata" gate --load-format dummy --preset "$preset" --dtype "$dtype" --device cuda \
    --prompt-len "$GATE_T" --json "$OUT/logs/gate_$tag.json" > "$OUT/logs/gate_$tag.log" 2>&1
  rc=$?
  last=$(grep "^gate: .* block runs" "$OUT/logs/gate_$tag.log" | tail -1)
  [ "$rc" = 0 ] || FAILED=1
  note "gate $preset $dtype: rc=$rc ${last:-$(tail -1 "$OUT/logs/gate_$tag.log")} ($(elapsed) s)"
done

# ---- results: a few files (the device tool brings back at most 8) ----
cat "$OUT"/logs/gate_*.log > "$OUT/gate.log" 2>/dev/null
cat "$OUT"/logs/bench_*.log > "$OUT/bench.log" 2>/dev/null
cp "$OUT/logs/kernels.md" "$OUT/kernels.md" 2>/dev/null
tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs && rm -rf "$OUT/logs"
echo
echo "==== gpu-check summary ($GPU, commit $COMMIT, $(elapsed) s) ===="
cat "$SUMMARY"
if [ "$FAILED" = 0 ]; then echo "GPU CHECK: PASS"; else echo "GPU CHECK: FAIL"; fi
exit "$FAILED"
