// Host causal depthwise conv1d + SiLU of the Mamba2 mixer (spec 3.2 step 2), for prefill over
// packed sequences and for one-token decode. The conv state holds the last K-1 RAW inputs
// (pre-bias, pre-activation), oldest first, in its own dtype (act).
//
// Both kernels build, per (sequence, block of channels), the window
//   [K-1 state rows (or zeros for a fresh sequence)] ++ [new input rows]      (f32)
// compute out[i, c] = act(silu(bias[c] + sum_k w[c, k] * window[i + k, c])) in f32, then write
// the window's last K-1 rows back as the new state. Loading the window first makes out
// aliasing x safe and handles sequences shorter than K-1 (the new state is then a mix of old
// state rows and new rows).
#include <algorithm>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

constexpr int64_t kChannelBlock = 64;

// Shapes shared by prefill and update: x [rows, C], weight [C, K], bias [C] (optional),
// conv_states [S, K-1, C], out [rows, C].
bool conv_common_supports(ArgCheck& c, const Tensor& x, const Tensor& weight, const Tensor& bias,
                          const Tensor& conv_states, const Tensor& out) {
  if (!(c.host(x, "x") && c.host(weight, "weight") && c.host(conv_states, "conv_states") &&
        c.host(out, "out")))
    return false;
  if (bias.defined() && !c.host(bias, "bias")) return false;
  if (!(c.that(x.rank() == 2, "x must be 2-D [T, C]") &&
        c.that(weight.rank() == 2, "weight must be 2-D [C, K]") &&
        c.that(conv_states.rank() == 3, "conv_states must be 3-D [S, K-1, C]")))
    return false;
  const int64_t T = x.dim(0), C = x.dim(1), K = weight.dim(1), S = conv_states.dim(0);
  if (!c.that(K >= 1, "the kernel width K must be >= 1")) return false;
  if (!(c.float_act(x, "x") && c.rows(x, "x", T, C) && c.float_act(weight, "weight") &&
        c.rows(weight, "weight", C, K) && c.float_act(conv_states, "conv_states") &&
        c.inner_contiguous(conv_states, "conv_states", {S, K - 1, C}) && c.float_act(out, "out") &&
        c.rows(out, "out", T, C)))
    return false;
  return !bias.defined() || (c.float_act(bias, "bias") && c.vec(bias, "bias", C));
}

struct ConvParams {
  int64_t C = 0, K = 0;
  std::vector<float> w;     // [C, K]
  std::vector<float> bias;  // [C] (zeros when the layer has none)
};

ConvParams load_params(const Tensor& weight, const Tensor& bias) {
  ConvParams p;
  p.C = weight.dim(0);
  p.K = weight.dim(1);
  p.w.resize(static_cast<size_t>(p.C * p.K));
  const RowsView wv(weight);
  for (int64_t c = 0; c < p.C; ++c)
    wv.load(c, p.w.data() + c * p.K);
  p.bias = bias.defined() ? load_vector(bias) : std::vector<float>(static_cast<size_t>(p.C), 0.f);
  return p;
}

// The window of one sequence and channel block: rows [K-1 + L, cw], f32.
struct Window {
  int64_t c0 = 0, cw = 0, rows = 0;
  std::vector<float> v;
  float* row(int64_t r) { return v.data() + r * cw; }
};

void load_state_rows(const Tensor& states, int64_t slot, bool has_initial, Window& win, int64_t K) {
  for (int64_t k = 0; k + 1 < K; ++k) {
    if (has_initial)
      load_f32(element_ptr(states, {slot, k, win.c0}), states.dtype(), win.cw, win.row(k));
    else
      std::fill(win.row(k), win.row(k) + win.cw, 0.f);
  }
}

void store_state_rows(const Tensor& states, int64_t slot, Window& win, int64_t K) {
  for (int64_t k = 0; k + 1 < K; ++k)
    store_f32(element_ptr(states, {slot, k, win.c0}), states.dtype(), win.cw,
              win.row(win.rows - (K - 1) + k));
}

// out rows i = 0 .. L-1 of the window (row i of the output uses window rows i .. i+K-1).
void convolve(const ConvParams& p, Window& win, const RowsView& out, int64_t out_row0) {
  const int64_t L = win.rows - (p.K - 1);
  std::vector<float> y(static_cast<size_t>(win.cw));
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t j = 0; j < win.cw; ++j) {
      const int64_t c = win.c0 + j;
      const float* wc = p.w.data() + c * p.K;
      float acc = p.bias[static_cast<size_t>(c)];
      for (int64_t k = 0; k < p.K; ++k)
        acc += wc[k] * win.v[static_cast<size_t>((i + k) * win.cw + j)];
      y[static_cast<size_t>(j)] = silu(acc);
    }
    out.store(out_row0 + i, win.c0, win.cw, y.data());
  }
}

std::vector<int32_t> load_flags(const char* op, const Tensor& t) {
  std::vector<int32_t> f = load_indices(t);
  for (size_t b = 0; b < f.size(); ++b)
    if (f[b] != 0 && f[b] != 1) fail("{}: has_initial[{}] = {}, expected 0 or 1", op, b, f[b]);
  return f;
}

bool conv1d_prefill_supports(const Conv1dPrefillArgs& a, std::string* why) {
  ArgCheck c("conv1d_prefill", why);
  if (!conv_common_supports(c, a.x, a.weight, a.bias, a.conv_states, a.out)) return false;
  if (!(c.host(a.cu_seqlens, "cu_seqlens") && c.host(a.slots, "slots") &&
        c.host(a.has_initial, "has_initial")))
    return false;
  const int64_t B = a.slots.rank() == 1 ? a.slots.dim(0) : -1;
  return c.index_vec(a.slots, "slots", B) && c.index_vec(a.cu_seqlens, "cu_seqlens", B + 1) &&
         c.index_vec(a.has_initial, "has_initial", B);
}

void conv1d_prefill_run(const Conv1dPrefillArgs& a, OpContext&) {
  const char* op = "conv1d_prefill";
  const std::vector<int32_t> cu = load_indices(a.cu_seqlens), slots = load_indices(a.slots);
  const std::vector<int32_t> init = load_flags(op, a.has_initial);
  check_cu_seqlens(op, "cu_seqlens", cu, a.x.dim(0));
  check_slots(op, slots, a.conv_states.dim(0));
  const ConvParams p = load_params(a.weight, a.bias);
  const RowsView x(a.x), out(a.out);
  const int64_t blocks = (p.C + kChannelBlock - 1) / kChannelBlock;
  const int64_t B = static_cast<int64_t>(slots.size());
  parallel_for(B * blocks, [&](int64_t i0, int64_t i1) {
    Window win;
    for (int64_t item = i0; item < i1; ++item) {
      const size_t b = static_cast<size_t>(item / blocks);
      const int64_t start = cu[b], L = cu[b + 1] - cu[b];
      win.c0 = (item % blocks) * kChannelBlock;
      win.cw = std::min(kChannelBlock, p.C - win.c0);
      win.rows = p.K - 1 + L;
      win.v.resize(static_cast<size_t>(win.rows * win.cw));
      load_state_rows(a.conv_states, slots[b], init[b] != 0, win, p.K);
      for (int64_t i = 0; i < L; ++i)
        x.load(start + i, win.c0, win.cw, win.row(p.K - 1 + i));
      convolve(p, win, out, start);
      store_state_rows(a.conv_states, slots[b], win, p.K);
    }
  });
}

bool conv1d_update_supports(const Conv1dUpdateArgs& a, std::string* why) {
  ArgCheck c("conv1d_update", why);
  if (!conv_common_supports(c, a.x, a.weight, a.bias, a.conv_states, a.out)) return false;
  return c.host(a.slots, "slots") && c.index_vec(a.slots, "slots", a.x.dim(0));
}

void conv1d_update_run(const Conv1dUpdateArgs& a, OpContext&) {
  const std::vector<int32_t> slots = load_indices(a.slots);
  check_slots("conv1d_update", slots, a.conv_states.dim(0));
  const ConvParams p = load_params(a.weight, a.bias);
  const RowsView x(a.x), out(a.out);
  const int64_t blocks = (p.C + kChannelBlock - 1) / kChannelBlock;
  const int64_t B = static_cast<int64_t>(slots.size());
  parallel_for(B * blocks, [&](int64_t i0, int64_t i1) {
    Window win;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t b = item / blocks;
      const int32_t slot = slots[static_cast<size_t>(b)];
      win.c0 = (item % blocks) * kChannelBlock;
      win.cw = std::min(kChannelBlock, p.C - win.c0);
      win.rows = p.K;
      win.v.resize(static_cast<size_t>(win.rows * win.cw));
      load_state_rows(a.conv_states, slot, true, win, p.K);
      x.load(b, win.c0, win.cw, win.row(p.K - 1));
      convolve(p, win, out, b);
      store_state_rows(a.conv_states, slot, win, p.K);
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(Conv1dPrefillArgs, "host", Device::Host, conv1d_prefill_supports,
                       conv1d_prefill_run);
STRATA_REGISTER_KERNEL(Conv1dUpdateArgs, "host", Device::Host, conv1d_update_supports,
                       conv1d_update_run);

}  // namespace strata::ops::host
