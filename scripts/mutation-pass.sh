#!/usr/bin/env bash
# The mutation pass: applies named defects to the kernels one at a time, rebuilds only the test
# binaries that matter, runs the suites that guard that code, and prints which tests caught each
# defect. A defect that no test catches is a hole in the tests. docs/MUTATIONS.md holds the table
# of the last full run.
#
#   scripts/mutation-pass.sh              host (CPU) mutations on a scratch copy of this tree
#   scripts/mutation-pass.sh --device     device (CUDA) mutations, on the GPU machine: the op
#                                         harness filtered to the op, and the per-block gate
#   --only NAME[,NAME]                    just these mutations
#   --list                                print the mutations and exit
#   --check                               check that every mutation's text occurs exactly once
#                                         in this tree (no build; run it after editing kernels)
#   --in-place                            mutate this tree and build in its own build directory
#                                         (every edited file is restored on exit; do not edit
#                                         the tree while it runs)
#   --all-suites                          run every suite of a mutation (default: stop at the
#                                         first suite that catches it, building only what that
#                                         suite needs)
#   --device --build-only DIR             build every device mutant here (no GPU needed): the
#                                         binaries its suites use, stripped, packed with the
#                                         unmutated baseline and the mutation list into one
#                                         DIR/mutants.tar.xz (xz -9e; near-identical binaries
#                                         compress together)
#   --device --prebuilt DIR               on the GPU machine: unpack DIR/mutants.tar.xz, run the
#                                         baseline and every mutant's suites with those binaries
#                                         (shared libraries through LD_LIBRARY_PATH, e.g. from a
#                                         stage's go.sh), print the table; nothing is built
#
# The tree itself is never modified. Host mode copies the working tree (tracked and untracked,
# not ignored) to a scratch directory beside it ($MUTATION_SCRATCH, default <root>-mutants: at
# the same depth, so ccache's base_dir gives hits for every unchanged file), builds there with
# the cpu preset, first checks that the unmutated suites pass, then per mutation restores the
# pristine file, applies the edit, rebuilds and runs. Device mode does the same with the ci
# preset (CUDA) in <root>-mutants-cuda, or in place with --in-place (the GPU machine's copy of
# the tree is itself a scratch copy; every edited file is restored from the pristine copy on
# exit). Exit status: 0 when every mutation was caught, 1 otherwise, 2 for a setup error.
#
# Environment: MUTATION_SCRATCH, JOBS (build parallelism, default nproc), MUTATION_LOG (default
# <scratch>/build/mutation-logs).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODE=host
ONLY=""
LIST=0
CHECK=0
IN_PLACE=0
ALL_SUITES=0
BUILD_ONLY=""
PREBUILT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) MODE=device; shift ;;
    --only) ONLY=$2; shift 2 ;;
    --list) LIST=1; shift ;;
    --check) CHECK=1; shift ;;
    --in-place) IN_PLACE=1; shift ;;
    --all-suites) ALL_SUITES=1; shift ;;
    --build-only) BUILD_ONLY=$2; shift 2 ;;
    --prebuilt) PREBUILT=$2; shift 2 ;;
    *) echo "mutation-pass: unknown argument $1" >&2; exit 2 ;;
  esac
done

# ---- the mutations ----
# One line per edit: name | file | text | replacement | suites. Several lines with one name are
# one mutation (applied together). Suites: binary:gtest-filter, comma-separated; for device
# A replacement starting with "ALL:" replaces every occurrence (there must be two or more).
# mutations also "ops:<op>" (the op harness filtered to that op, STRATA_OPS_FILTER) and
# "gate:<preset>:<dtype>" (strata gate on a dummy model). The separator is " ||| ".
host_mutations() {
  cat <<'EOF'
conv-window-off-by-one ||| src/ops/host/conv1d.cpp ||| acc += wc[k] * win.v[ ||| acc += wc[(k + 1) % p.K] * win.v[ ||| test_reference:HostConv1d*,test_model:*Golden*
conv-state-off-by-one ||| src/ops/host/conv1d.cpp ||| win.row(win.rows - (K - 1) + k)); ||| win.row(std::max<int64_t>(win.rows - K + k, 0))); ||| test_reference:HostConv1d*,test_model:*Golden*
ssm-D-skip-dropped-prefill ||| src/ops/host/ssm_scan.cpp ||| sc.y[p] = (diag + off) + D * sc.x[l * P + p]; ||| sc.y[p] = (diag + off) + 0.f * D * sc.x[l * P + p]; ||| test_reference:HostSsm*,test_model:*Golden*
ssm-D-skip-dropped-decode ||| src/ops/host/ssm_update.cpp ||| + prm.D[static_cast<size_t>(h)] * xs[p]; ||| + 0.f * prm.D[static_cast<size_t>(h)] * xs[p]; ||| test_reference:HostSsm*,test_model:*Golden*
dt-floor-prefill ||| src/ops/host/ssm_scan.cpp ||| sc.dt[l] = softplus(raw + bias); ||| sc.dt[l] = std::max(softplus(raw + bias), 1e-3f); ||| test_reference:HostSsm*,test_model:*Golden*
dt-floor-decode ||| src/ops/host/ssm_update.cpp ||| const float dt = softplus(raw + prm.dt_bias[static_cast<size_t>(h)]); ||| const float dt = std::fmax(softplus(raw + prm.dt_bias[static_cast<size_t>(h)]), 1e-3f); ||| test_reference:HostSsm*,test_model:*Golden*
ssm-group-index ||| src/ops/host/ssm_common.h ||| return h / (heads / groups); ||| return h % groups; ||| test_reference:HostSsm*,test_model:*Golden*
moe-renorm-biased-scores ||| src/ops/host/moe.cpp ||| sum += s[e]; ||| sum += sel[e]; ||| test_reference:HostMoe*,test_model:*Golden*
moe-renorm-biased-scores ||| src/ops/host/moe.cpp ||| const float w = a.norm_topk_prob ? s[e] / sum : s[e]; ||| const float w = a.norm_topk_prob ? sel[e] / sum : s[e]; ||| -
moe-routed-scaling-dropped ||| src/ops/host/moe.cpp ||| weights[t * K + j] = w * a.routed_scaling_factor; ||| weights[t * K + j] = w; ||| test_reference:HostMoe*,test_model:*Golden*
gated-norm-epsilon ||| src/ops/host/norm.cpp ||| / static_cast<float>(group) + a.eps); ||| / static_cast<float>(group) + 0.1f * a.eps); ||| test_reference:HostGatedRmsNorm*,test_model:*Golden*
rms-norm-epsilon ||| src/ops/host/norm.cpp ||| / static_cast<float>(H) + a.eps); ||| / static_cast<float>(H) + 0.1f * a.eps); ||| test_reference:HostRmsNorm*,test_model:*Golden*
kv-block-index-off-by-one ||| src/ops/host/attention.cpp ||| load_cache_row(element_ptr(a.k_cache, {table[j / bs], ||| load_cache_row(element_ptr(a.k_cache, {table[std::max<int64_t>(j / bs - 1, 0)], ||| test_reference:HostAttention*,test_model:*Golden*
causal-mask-off-by-one ||| src/ops/host/attention.cpp ||| pos = ctx_lens[b] - q_len + (t - cu[b]); ||| pos = std::min<int64_t>(ctx_lens[b] - q_len + (t - cu[b]) + 1, ctx_lens[b] - 1); ||| test_reference:HostAttention*,test_model:*Golden*
mamba-state-not-written-at-chunk-boundary ||| src/ops/host/ssm_scan.cpp ||| store_head_state(a.ssm_states, slots[b], h, sc.S); ||| if ((cu[b + 1] - cu[b]) % Q != 0) store_head_state(a.ssm_states, slots[b], h, sc.S); ||| test_reference:HostSsm*,test_model:*Golden*
ssm-chunk-state-decay-dropped ||| src/ops/host/ssm_scan.cpp ||| Sv = decay_all * Sv + acc; ||| Sv = (decay_all > 0.f ? 1.f : 1.f) * Sv + acc; ||| test_reference:HostSsm*,test_model:*Golden*
fp8-scale-inverted ||| src/ops/host/weight_rows.h ||| ? w.weight_scale : 1.0f; ||| ? 1.0f / w.weight_scale : 1.0f; ||| test_reference:HostLinear*:HostMoe*,test_model:Quantize*:Fp8*
top-p-boundary ||| src/ops/host/sample.cpp ||| if (cum >= need) { ||| if (cum > need) { ||| test_reference:HostSample*
relu2-not-squared ||| src/ops/host/elementwise.cpp ||| e = e > 0.f ? e * e : 0.f; ||| e = e > 0.f ? e : 0.f; ||| test_reference:HostRelu2*:HostElementwise*,test_model:*Golden*
EOF
}

device_mutations() {
  cat <<'EOF'
cuda-conv-window-off-by-one-prefill ||| src/ops/cuda/conv1d.cu ||| acc += to_f32(w[c * K + k]) * v; ||| acc += to_f32(w[c * K + (k + 1) % K]) * v; ||| ops:conv1d_prefill
cuda-conv-window-off-by-one-decode ||| src/ops/cuda/conv1d.cu ||| acc += to_f32(w[c * K + k]) * win[k]; ||| acc += to_f32(w[c * K + (k + 1) % K]) * win[k]; ||| ops:conv1d_update
cuda-ssm-D-skip-dropped-decode ||| src/ops/cuda/ssm_update.cu ||| const float Dh = load_param(p.D.p, param_bf16, h); ||| const float Dh = 0.f * load_param(p.D.p, param_bf16, h); ||| ops:ssm_update,gate:nemotron-nano-9b-v2:bf16
cuda-ssm-D-skip-dropped-prefill-mma ||| src/ops/cuda/ssm_scan_mma_tiles.cuh ||| const float Dh = load_param(p.D.p, p.D.dt == DType::BF16, h); ||| const float Dh = 0.f * load_param(p.D.p, p.D.dt == DType::BF16, h); ||| ops:ssm_scan,gate:nemotron-nano-9b-v2:bf16
cuda-ssm-D-skip-dropped-prefill-simt ||| src/ops/cuda/ssm_scan.cu ||| const float Dh = load_param(p.D.p, p.D.dt == DType::BF16, h); ||| const float Dh = 0.f * load_param(p.D.p, p.D.dt == DType::BF16, h); ||| ops:ssm_scan
cuda-dt-floor-prefill ||| src/ops/cuda/ssm_scan_common.cuh ||| sh[l] = dt * p.A[h]; ||| dt = l < len ? fmaxf(dt, 1e-3f) : 0.f; sh[l] = dt * p.A[h]; ||| ops:ssm_scan,gate:nemotron-nano-9b-v2:bf16
cuda-dt-floor-decode ||| src/ops/cuda/ssm_update.cu ||| const float dt = softplusf_( ||| const float dt = fmaxf(1e-3f, softplusf_( ||| ops:ssm_update
cuda-dt-floor-decode ||| src/ops/cuda/ssm_update.cu ||| load_param(p.dt_bias.p, p.dt_bias.dt == DType::BF16, h)); ||| load_param(p.dt_bias.p, p.dt_bias.dt == DType::BF16, h))); ||| -
cuda-moe-renorm-biased-scores ||| src/ops/cuda/moe_route.cu ||| sum += s[picked[j]]; ||| sum += s[picked[j]] + p.bias[picked[j]]; ||| ops:moe_route
cuda-moe-renorm-biased-scores ||| src/ops/cuda/moe_route.cu ||| float v = s[picked[j]]; ||| float v = s[picked[j]] + p.bias[picked[j]]; ||| -
cuda-moe-routed-scaling-dropped ||| src/ops/cuda/moe_route.cu ||| w[j] = v * p.routed_scaling_factor; ||| w[j] = v; ||| ops:moe_route,gate:nemotron-3-nano-30b-a3b:fp8
cuda-gated-norm-epsilon ||| src/ops/cuda/norms.cu ||| sqrtf(ss / static_cast<float>(group_size) + eps) ||| ALL:sqrtf(ss / static_cast<float>(group_size) + 0.1f * eps) ||| ops:gated_rms_norm,gate:nemotron-nano-9b-v2:bf16
cuda-rms-norm-epsilon ||| src/ops/cuda/norms.cu ||| sqrtf(ss / static_cast<float>(H) + eps) ||| ALL:sqrtf(ss / static_cast<float>(H) + 0.1f * eps) ||| ops:rms_norm
cuda-kv-block-index-off-by-one-prefill ||| src/ops/cuda/attention.cu ||| page = table[key / p.block_size]; ||| page = table[key / p.block_size > 0 ? key / p.block_size - 1 : 0]; ||| ops:attention
cuda-kv-block-index-off-by-one-decode ||| src/ops/cuda/attention_decode.cu ||| int32_t pg = table[first_page + i]; ||| int32_t pg = table[first_page + (i > 0 ? i - 1 : 0)]; ||| ops:attention
cuda-causal-mask-off-by-one ||| src/ops/cuda/attention.cu ||| const bool valid = key < k_end && key <= pos; ||| const bool valid = key < k_end && key <= pos + 1; ||| ops:attention
cuda-fp8-scale-inverted ||| src/ops/cuda/linear_kernels.cpp ||| p.scale = a.w.input_scale * a.w.weight_scale; ||| ALL:p.scale = a.w.input_scale / a.w.weight_scale; ||| ops:linear,gate:nemotron-3-nano-30b-a3b:fp8
cuda-fp8-scale-inverted ||| src/ops/cuda/linear_kernels.cpp ||| p.scale = p.wt == DType::F8E4M3 ? a.w.weight_scale : 1.f; ||| p.scale = p.wt == DType::F8E4M3 ? 1.f / a.w.weight_scale : 1.f; ||| -
cuda-top-p-boundary ||| src/ops/cuda/sample.cu ||| if (cum >= need) { ||| if (cum > need) { ||| ops:sample
cuda-ssd-score-rounded-before-dt ||| src/ops/cuda/ssm_scan_mma_tiles.cuh ||| v0 = cbv.x * __expf(cum_l - cum[s]) * dts[s]; ||| v0 = __bfloat162float(__float2bfloat16_rn(cbv.x * __expf(cum_l - cum[s]))) * dts[s]; ||| ops:ssm_scan_mma_exact,ops:ssm_scan
cuda-ssd-state-weight-rounded ||| src/ops/cuda/ssm_scan_mma.cu ||| [=](int s) { return expf(last - cum[s]) * dtv[s]; }); ||| [=](int s) { return __bfloat162float(__float2bfloat16_rn(expf(last - cum[s]) * dtv[s])); }); ||| ops:ssm_scan_mma_exact,ops:ssm_scan
cuda-ssd-wg-next-sequence-B-kept ||| src/ops/cuda/ssm_scan_wg.cu ||| if (len < kQ) {             // B rows past the chunk ||| if (false && len < kQ) {    // B rows past the chunk ||| ops:isolation
cuda-ssd-wg-score-rounded-before-dt ||| src/ops/cuda/ssm_scan_wg_tiles.cuh ||| const float v = cbv * exp_ftz(cum_l - cum_s) * dt_s; ||| const float v = __bfloat162float(__float2bfloat16_rn(cbv * exp_ftz(cum_l - cum_s))) * dt_s; ||| ops:ssm_scan_mma_exact,ops:ssm_scan
cuda-ssd-seq-early-row-off-by-one ||| src/ops/cuda/ssm_scan_seq.cu ||| t0 = seq_start + k * kQ; ||| t0 = seq_start + k * kQ + 1; ||| ops:ssm_scan_mma_exact
cuda-ssd-seq-y-tile-rows-swapped ||| src/ops/cuda/ssm_scan_wg_tiles.cuh ||| return reinterpret_cast<bf16*>(tile + tma::sw128_piece(r, j) + 4 * ln.tig); ||| return reinterpret_cast<bf16*>(tile + tma::sw128_piece(r ^ 8, j) + 4 * ln.tig); ||| ops:ssm_scan_mma_exact
cuda-ssd-seq-handover-halves-swapped ||| src/ops/cuda/ssm_scan_wg_tiles.cuh ||| n_row0 + 8 * (m & 1), ||| n_row0 + 8 * ((m & 1) ^ 1), ||| ops:ssm_scan_mma_exact
cuda-ssd-ws-early-row-off-by-one ||| src/ops/cuda/ssm_scan_ws.cu ||| t0 = seq_start + k * kQ; ||| t0 = seq_start + k * kQ + 1; ||| ops:ssm_scan_mma_exact
cuda-ssd-ws-state-not-kept ||| src/ops/cuda/ssm_scan_ws.cu ||| inbox[j * kThreads + l] = o; ||| (void)o; ||| ops:ssm_scan_mma_exact
cuda-ssd-ws-x-rows-not-cleared ||| src/ops/cuda/ssm_scan_ws.cu ||| clear_x_rows_past(xs, len); ||| (void)xs; ||| ops:isolation
cuda-ssd-ws-final-state-by-block-1-only ||| src/ops/cuda/ssm_scan_ws.cu ||| } else if (slot_ok) { ||| } else if (slot_ok && (cs == 1 || rank == 1)) { ||| ops:ssm_scan_mma_exact
cuda-ssd-ws-x-swizzle-dropped ||| src/ops/cuda/ssm_scan_wg_tiles.cuh ||| tma::sw128_piece(r, p >> 3) ||| static_cast<uint32_t>(r * 128 + ((p >> 3) << 4)) ||| ops:ssm_scan_mma_exact
cuda-ssd-ws-x-desc-row-late ||| src/ops/cuda/tma_sm90.cuh ||| row0 * 128; ||| row0 * 128 + 128; ||| ops:ssm_scan_mma_exact
EOF
}

if { [ -n "$BUILD_ONLY" ] || [ -n "$PREBUILT" ]; } && [ "$MODE" != device ]; then
  echo "mutation-pass: --build-only and --prebuilt go with --device" >&2; exit 2
fi
# With --prebuilt the mutations are the ones packed with the binaries (the tree may have moved on).
MANIFEST=""
if [ -n "$PREBUILT" ]; then
  [ -f "$PREBUILT/mutants.tar.xz" ] || { echo "mutation-pass: no $PREBUILT/mutants.tar.xz" >&2; exit 2; }
  UNPACKED=$(mktemp -d /tmp/mutants.XXXXXX)
  if command -v xz > /dev/null; then xz -dc "$PREBUILT/mutants.tar.xz" | tar -xf - -C "$UNPACKED"
  else python3 -c "import lzma,sys;sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$PREBUILT/mutants.tar.xz" | tar -xf - -C "$UNPACKED"
  fi || { echo "mutation-pass: cannot unpack $PREBUILT/mutants.tar.xz" >&2; exit 2; }
  MANIFEST=$UNPACKED/mutations.txt
fi

mutations() {
  if [ -n "$MANIFEST" ]; then cat "$MANIFEST"
  elif [ "$MODE" = device ]; then device_mutations
  else host_mutations; fi
}
names() { mutations | awk -F' \\|\\|\\| ' '{print $1}' | awk '!seen[$0]++'; }

if [ "$LIST" = 1 ]; then
  mutations | awk -F' \\|\\|\\| ' '$5 != "-" {printf "%-44s %-34s %s\n", $1, $2, $5}'
  exit 0
fi

# Applies (or checks, with DRY=1) every edit of mutation $1 inside tree $2. Prints errors.
apply_mutation() {
  local name=$1 tree=$2
  mutations | DRY=${DRY:-0} NAME="$name" TREE="$tree" python3 -c '
import os, sys
name, tree, dry = os.environ["NAME"], os.environ["TREE"], os.environ["DRY"] == "1"
ok = True
for line in sys.stdin:
    parts = line.rstrip("\n").split(" ||| ")
    if len(parts) != 5 or parts[0] != name:
        continue
    _, path, old, new, _ = parts
    full = os.path.join(tree, path)
    try:
        text = open(full).read()
    except OSError as e:
        print(f"{name}: cannot read {path}: {e}"); ok = False; continue
    n = text.count(old)
    every = new.startswith("ALL:")  # replace every occurrence (at least two)
    if every:
        new = new[4:]
    if (every and n < 2) or (not every and n != 1):
        want = "at least twice" if every else "once"
        print(f"{name}: the text occurs {n} times in {path} (must be {want}): {old}"); ok = False; continue
    if not dry:
        open(full, "w").write(text.replace(old, new))
sys.exit(0 if ok else 1)
'
}

files_of() { mutations | NAME="$1" python3 -c '
import os, sys
for line in sys.stdin:
    p = line.rstrip("\n").split(" ||| ")
    if len(p) == 5 and p[0] == os.environ["NAME"]: print(p[1])' | sort -u; }
suites_of() { mutations | awk -F' \\|\\|\\| ' -v n="$1" '$1 == n && $5 != "-" {print $5}' | head -1; }

SELECTED=$(names)
if [ -n "$ONLY" ]; then
  SELECTED=$(echo "$ONLY" | tr ',' '\n')
  for n in $SELECTED; do names | grep -qx "$n" || { echo "mutation-pass: no mutation $n" >&2; exit 2; }; done
fi

if [ "$CHECK" = 1 ]; then
  bad=0
  for n in $SELECTED; do DRY=1 apply_mutation "$n" "$ROOT" || bad=1; done
  echo "mutation-pass: $(echo "$SELECTED" | wc -w) mutations checked, $([ $bad = 0 ] && echo "every text found once" || echo "SOME TEXTS NOT FOUND")"
  exit $bad
fi

# ---- the scratch tree ----
JOBS=${JOBS:-$(nproc)}
# What the scratch copy is taken from (recorded in a --build-only archive).
FROM_COMMIT="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null)$(cd "$ROOT" && git diff --quiet HEAD 2>/dev/null || echo +local-edits)"
if [ -n "$PREBUILT" ]; then
  # Nothing to build or mutate: each mutant's binaries are in $UNPACKED/<name>/. The tests find
  # committed fixtures through the source path baked in at build time: point it at this tree.
  SRC_BAKED=$(cat "$UNPACKED/SRC_ROOT")
  [ -e "$SRC_BAKED" ] || { mkdir -p "$(dirname "$SRC_BAKED")" && ln -sfn "$ROOT" "$SRC_BAKED"; }
  SCRATCH=$UNPACKED
  LOG=${MUTATION_LOG:-$UNPACKED/logs}
  mkdir -p "$LOG"
  BUILD=""
  restore_all() { :; }
  trap 'rm -rf "$UNPACKED"' EXIT
  trap 'exit 130' INT TERM
  echo "mutation-pass: prebuilt mutants of $(cat "$UNPACKED/COMMIT") ($(ls "$UNPACKED" | wc -l) entries)"
else
  if [ "$IN_PLACE" = 1 ]; then
    SCRATCH=$ROOT
  else
    SCRATCH=${MUTATION_SCRATCH:-$ROOT-mutants$([ "$MODE" = device ] && echo -cuda)}
    mkdir -p "$SCRATCH" || exit 2
    # Tracked and untracked (not ignored) files; fixtures and models included.
    (cd "$ROOT" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | (cd "$SCRATCH" && tar -xf -) || exit 2
  fi
  PRISTINE=$(mktemp -d)
  LOG=${MUTATION_LOG:-$SCRATCH/build/mutation-logs}
  mkdir -p "$LOG"
  for n in $SELECTED; do
    for f in $(files_of "$n"); do mkdir -p "$PRISTINE/$(dirname "$f")"; cp "$ROOT/$f" "$PRISTINE/$f"; done
  done
  restore_all() {
    (cd "$PRISTINE" && find . -type f) | while read -r f; do cp "$PRISTINE/$f" "$SCRATCH/$f"; done
  }
  trap 'restore_all; rm -rf "$PRISTINE"' EXIT
  trap 'exit 130' INT TERM

  if [ "$MODE" = device ]; then PRESET=ci; BUILD=$SCRATCH/build/ci; else PRESET=cpu; BUILD=$SCRATCH/build/cpu; fi
  LAUNCH="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  [ "$MODE" = device ] && LAUNCH="$LAUNCH -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
  command -v ccache > /dev/null || LAUNCH=""
  if [ ! -f "$BUILD/build.ninja" ]; then
    (cd "$SCRATCH" && cmake --preset "$PRESET" $LAUNCH > "$LOG/configure.log" 2>&1) ||
      { echo "mutation-pass: configure failed ($LOG/configure.log)"; exit 2; }
  fi
fi

# Binaries the selected mutations need.
targets() {
  local t=""
  for n in $SELECTED; do
    for s in $(suites_of "$n" | tr ',' ' '); do
      case "$s" in
        ops:*) t="$t test_ops" ;;
        gate:*) t="$t strata" ;;
        *) t="$t ${s%%:*}" ;;
      esac
    done
  done
  echo "$t" | tr ' ' '\n' | grep -v '^$' | sort -u | tr '\n' ' '
}
TARGETS=$(targets)
# build LOG [TARGET...]: the given targets, or all the selected mutations need.
build() {
  local log=$1; shift
  local t="$*"; [ -n "$t" ] || t=$TARGETS
  (cd "$SCRATCH" && nice cmake --build "$BUILD" --target $t -j"$JOBS") > "$log" 2>&1
}
target_of() {
  case "$1" in ops:*) echo test_ops ;; gate:*) echo strata ;; *) echo "${1%%:*}" ;; esac
}
# bin TARGET: the binary to run; with --prebuilt, the current mutant's ($BINS, set per mutant).
bin() {
  if [ -n "$PREBUILT" ]; then echo "$BINS/$1"
  elif [ "$1" = strata ]; then echo "$BUILD/strata"
  else echo "$BUILD/tests/$1"; fi
}

# Runs one suite; prints the tests that failed (or "crashed", "timeout").
run_suite() {
  local s=$1 log=$2 rc
  case "$s" in
    ops:*)
      STRATA_REQUIRE_GPU=1 STRATA_OPS_FILTER=${s#ops:} timeout 600 "$(bin test_ops)" --gtest_brief=1 > "$log" 2>&1
      rc=$? ;;
    gate:*)
      local rest=${s#gate:}
      timeout 600 "$(bin strata)" gate --load-format dummy --preset "${rest%%:*}" --dtype "${rest##*:}" \
        --device cuda --prompt-len 160 > "$log" 2>&1
      rc=$?
      [ "$rc" = 0 ] || { echo "strata gate ${rest}: $(grep -c 'OUT OF BAND' "$log") blocks out of band"; return; }
      return ;;
    *)
      local bin=${s%%:*} filter=${s#*:}
      timeout 900 "$(bin "$bin")" --gtest_filter="$filter" --gtest_brief=1 > "$log" 2>&1
      rc=$? ;;
  esac
  [ "$rc" = 124 ] && { echo "$s: timeout"; return; }
  local failed
  failed=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/.]*\).*/\1/p' "$log" | grep -v "^[0-9]" | sort -u | tr '\n' ' ')
  if [ -n "$failed" ]; then echo "$failed"
  elif [ "$rc" != 0 ]; then echo "$s: exit $rc (crash or abort)"
  fi
}

# Builds and runs the suites of mutation $1 in order (each build only its suite's binary);
# prints the tests that caught it, or "BUILD FAILED"; stops at the first catch unless
# --all-suites.
run_suites() {
  local n=$1 out="" f
  for s in $(suites_of "$n" | tr ',' ' '); do
    if [ -n "$PREBUILT" ]; then
      [ -x "$(bin "$(target_of "$s")")" ] || { echo "BUILD FAILED"; return; }
    elif ! build "$LOG/$n.build.log" "$(target_of "$s")"; then echo "BUILD FAILED"; return; fi
    f=$(run_suite "$s" "$LOG/$n.$(echo "$s" | tr -c 'A-Za-z0-9_\n' '_').log")
    out="$out$f"
    [ -n "$f" ] && [ "$ALL_SUITES" = 0 ] && break
  done
  echo "$out"
}

# ---- --build-only: every mutant's binaries, packed ----
if [ -n "$BUILD_ONLY" ]; then
  mkdir -p "$BUILD_ONLY" || exit 2
  BUILD_ONLY=$(cd "$BUILD_ONLY" && pwd)
  BINS_ALL=$BUILD/mutant-bins
  rm -rf "$BINS_ALL"; mkdir -p "$BINS_ALL"
  failed_builds=""
  for n in baseline $SELECTED; do
    t0=$(date +%s)
    restore_all
    if [ "$n" = baseline ]; then want=$TARGETS
    else
      apply_mutation "$n" "$SCRATCH" || { failed_builds="$failed_builds $n(not-applied)"; continue; }
      want=$(for s in $(suites_of "$n" | tr ',' ' '); do target_of "$s"; done | sort -u | tr '\n' ' ')
    fi
    if ! build "$LOG/$n.build.log" $want; then
      echo "$n: BUILD FAILED ($LOG/$n.build.log)"; failed_builds="$failed_builds $n"; continue
    fi
    mkdir -p "$BINS_ALL/$n"
    for t in $want; do strip -o "$BINS_ALL/$n/$t" "$(bin "$t")" || exit 2; done
    echo "$n: built $want($(( $(date +%s) - t0 )) s)"
  done
  restore_all
  build "$LOG/final.build.log" > /dev/null 2>&1
  for n in $SELECTED; do mutations | awk -F' \\|\\|\\| ' -v n="$n" '$1 == n'; done > "$BINS_ALL/mutations.txt"
  echo "$SCRATCH" > "$BINS_ALL/SRC_ROOT"
  echo "$FROM_COMMIT" > "$BINS_ALL/COMMIT"
  # One binary kind after another, baseline first, so each copy follows a near-identical one
  # within xz's window.
  list="mutations.txt SRC_ROOT COMMIT"
  for t in $TARGETS; do for n in baseline $SELECTED; do [ -f "$BINS_ALL/$n/$t" ] && list="$list $n/$t"; done; done
  echo "packing $(echo "$list" | wc -w) files ($(cd "$BINS_ALL" && du -ch $list | tail -1 | cut -f1)) with xz -9e..."
  (cd "$BINS_ALL" && tar -cf - $list) | nice xz -9e -T1 > "$BUILD_ONLY/mutants.tar.xz" || exit 2
  echo "mutation-pass: $BUILD_ONLY/mutants.tar.xz, $(stat -c %s "$BUILD_ONLY/mutants.tar.xz") bytes"
  [ -z "$failed_builds" ] || { echo "mutation-pass: could not build:$failed_builds"; exit 1; }
  exit 0
fi

t_start=$(date +%s)
echo "mutation-pass ($MODE): $(echo "$SELECTED" | wc -w) mutations, scratch $SCRATCH, targets: $TARGETS"
BINS=${UNPACKED:-}/baseline
echo "baseline: $([ -n "$PREBUILT" ] && echo "running the unmutated binaries" || echo "building")..."
[ -n "$PREBUILT" ] || build "$LOG/baseline.build.log" || { echo "mutation-pass: the unmutated tree does not build ($LOG/baseline.build.log)"; exit 2; }
base_fail=""
base_done=""
for n in $SELECTED; do
  for s in $(suites_of "$n" | tr ',' ' '); do
    case " $base_done " in *" $s "*) continue ;; esac
    base_done="${base_done:-} $s"
    f=$(run_suite "$s" "$LOG/baseline.$(echo "$s" | tr -c 'A-Za-z0-9_\n' '_').log")
    [ -n "$f" ] && base_fail="$base_fail $s: $f;"
  done
done
if [ -n "$base_fail" ]; then
  echo "mutation-pass: the unmutated suites fail, so nothing can be judged:$base_fail"; exit 2
fi
echo "baseline: every suite passes ($(( $(date +%s) - t_start )) s)"

RESULTS=()
missed=0
for n in $SELECTED; do
  t0=$(date +%s)
  restore_all
  BINS=${UNPACKED:-}/$n
  if [ -n "$PREBUILT" ]; then :
  elif ! apply_mutation "$n" "$SCRATCH"; then RESULTS+=("| $n | - | NOT APPLIED | |"); missed=1; continue; fi
  caught=$(run_suites "$n")
  if [ "$caught" = "BUILD FAILED" ]; then
    # A defect that does not compile proves nothing about the tests.
    RESULTS+=("| $n | $(files_of "$n" | tr '\n' ' ')| BUILD FAILED | see $LOG/$n.build.log |")
    missed=1
    restore_all
    continue
  fi
  restore_all
  secs=$(( $(date +%s) - t0 ))
  if [ -n "$caught" ]; then
    verdict="caught"
  else
    verdict="**MISSED**"; missed=1
  fi
  line="| $n | $(files_of "$n" | tr '\n' ' ')| $verdict | $(echo "$caught" | sed 's/ *$//') |"
  RESULTS+=("$line")
  echo "$line ($secs s)"
done
# Leave the scratch binaries unmutated for the next run.
[ -n "$PREBUILT" ] || build "$LOG/final.build.log" > /dev/null 2>&1

echo
echo "==== mutation pass ($MODE), $(( $(date +%s) - t_start )) s ===="
echo "| mutation | file | result | caught by |"
echo "|---|---|---|---|"
printf '%s\n' "${RESULTS[@]}"
[ "$missed" = 0 ] && echo "EVERY MUTATION CAUGHT" || echo "SOME MUTATIONS NOT CAUGHT"
exit "$missed"
