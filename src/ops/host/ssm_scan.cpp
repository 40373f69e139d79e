// Host Mamba2 SSM prefill as the chunked SSD algorithm (spec 3.2, "Prefill (chunked SSD)").
// Each sequence is cut into chunks of `chunk_size` tokens starting at its first token (chunks
// never straddle sequences). For a chunk with local positions l = 0..Lc-1, per head h:
//   dt_l  = softplus(dt_raw + dt_bias[h]);  cum_l = sum_{j<=l} dt_j * A[h]          (f32)
//   Y_diag[l] = sum_{s<=l} (C_l . B_s) * exp(cum_l - cum_s) * dt_s * x_s           (intra-chunk)
//   Y_off[l]  = exp(cum_l) * (S_in . C_l)                                          (carried state)
//   y_l       = act(Y_diag[l] + Y_off[l] + D[h] * x_l)
//   S_in     <- exp(cum_last) * S_in + sum_s exp(cum_last - cum_s) * dt_s * x_s (x) B_s   (f32)
// S_in starts from ssm_states[slot] (has_initial) or zeros; the final S_in is written back.
// Work items are (sequence, head): each owns its outputs and its state, so any thread count
// gives the same bits. A chunk's inputs are read before its outputs are written, so out may
// alias x.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/ssm_common.h"

namespace strata::ops::host {
namespace {

bool ssm_scan_supports(const SsmScanArgs& a, std::string* why) {
  ArgCheck c("ssm_scan", why);
  const SsmDims d{a.heads, a.head_dim, a.groups, a.state_size};
  if (!c.defined(a.x, "x") || !c.that(a.x.rank() == 2, "x must be 2-D [T, Hm*P]")) return false;
  if (!ssm_common_supports(c, d, a.x.dim(0), a.x, a.dt_raw, a.A, a.B, a.C, a.D, a.dt_bias,
                           a.ssm_states, a.out))
    return false;
  if (a.chunk_size < 1) return c.fail("chunk_size {} must be >= 1", a.chunk_size);
  if (!(c.host(a.cu_seqlens, "cu_seqlens") && c.host(a.slots, "slots") &&
        c.host(a.has_initial, "has_initial")))
    return false;
  const int64_t B = a.slots.rank() == 1 ? a.slots.dim(0) : -1;
  return c.index_vec(a.slots, "slots", B) && c.index_vec(a.cu_seqlens, "cu_seqlens", B + 1) &&
         c.index_vec(a.has_initial, "has_initial", B);
}

// Scratch of one (sequence, head) work item, sized for one chunk.
struct ChunkScratch {
  std::vector<float> x, Bm, Cm;  // [Q, P], [Q, N], [Q, N]
  std::vector<float> dt, cum;    // [Q]
  std::vector<float> coef;       // [Q]: weights of x_s in Y_diag[l] or in the state update
  std::vector<float> y;          // [P]
  std::vector<float> S;          // [P, N] carried state
  ChunkScratch(int64_t Q, int64_t P, int64_t N)
      : x(static_cast<size_t>(Q * P)),
        Bm(static_cast<size_t>(Q * N)),
        Cm(static_cast<size_t>(Q * N)),
        dt(static_cast<size_t>(Q)),
        cum(static_cast<size_t>(Q)),
        coef(static_cast<size_t>(Q)),
        y(static_cast<size_t>(P)) {}
};

struct ScanInputs {
  RowsView x, dt_raw, B, C, out;
  SsmParams params;
  SsmDims d;
};

// Processes chunk rows [row0, row0 + Lc) of head h, updating sc.S.
void scan_chunk(const ScanInputs& in, int64_t h, int64_t row0, int64_t Lc, ChunkScratch& sc) {
  const int64_t P = in.d.head_dim, N = in.d.state, g = in.d.group_of(h);
  const float A = in.params.A[static_cast<size_t>(h)], D = in.params.D[static_cast<size_t>(h)];
  const float bias = in.params.dt_bias[static_cast<size_t>(h)];
  float running = 0.f;
  for (int64_t l = 0; l < Lc; ++l) {
    in.x.load(row0 + l, h * P, P, sc.x.data() + l * P);
    in.B.load(row0 + l, g * N, N, sc.Bm.data() + l * N);
    in.C.load(row0 + l, g * N, N, sc.Cm.data() + l * N);
    float raw;
    in.dt_raw.load(row0 + l, h, 1, &raw);
    sc.dt[l] = softplus(raw + bias);
    running += sc.dt[l] * A;
    sc.cum[l] = running;
  }
  for (int64_t l = 0; l < Lc; ++l) {
    const float* Cl = sc.Cm.data() + l * N;
    // Y_diag weights: (C_l . B_s) * exp(cum_l - cum_s) * dt_s for s <= l.
    for (int64_t s = 0; s <= l; ++s)
      sc.coef[s] =
          dot_f32(Cl, sc.Bm.data() + s * N, N) * std::exp(sc.cum[l] - sc.cum[s]) * sc.dt[s];
    const float decay_in = std::exp(sc.cum[l]);
    for (int64_t p = 0; p < P; ++p) {
      float diag = 0.f;
      for (int64_t s = 0; s <= l; ++s)
        diag += sc.coef[s] * sc.x[s * P + p];
      const float off = decay_in * dot_f32(sc.S.data() + p * N, Cl, N);
      sc.y[p] = (diag + off) + D * sc.x[l * P + p];
    }
    in.out.store(row0 + l, h * P, P, sc.y.data());
  }
  // State passing: S = exp(cum_last) * S + sum_s exp(cum_last - cum_s) * dt_s * x_s (x) B_s.
  const float last = sc.cum[Lc - 1], decay_all = std::exp(last);
  for (int64_t s = 0; s < Lc; ++s)
    sc.coef[s] = std::exp(last - sc.cum[s]) * sc.dt[s];
  for (int64_t p = 0; p < P; ++p)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.f;
      for (int64_t s = 0; s < Lc; ++s)
        acc += sc.coef[s] * sc.x[s * P + p] * sc.Bm[s * N + n];
      float& Sv = sc.S[p * N + n];
      Sv = decay_all * Sv + acc;
    }
}

void ssm_scan_run(const SsmScanArgs& a, OpContext&) {
  const char* op = "ssm_scan";
  const std::vector<int32_t> cu = load_indices(a.cu_seqlens), slots = load_indices(a.slots);
  const std::vector<int32_t> init = load_indices(a.has_initial);
  check_cu_seqlens(op, "cu_seqlens", cu, a.x.dim(0));
  check_slots(op, slots, a.ssm_states.dim(0));
  for (size_t b = 0; b < init.size(); ++b)
    if (init[b] != 0 && init[b] != 1)
      fail("{}: has_initial[{}] = {}, expected 0 or 1", op, b, init[b]);
  const ScanInputs in{RowsView(a.x),
                      RowsView(a.dt_raw),
                      RowsView(a.B),
                      RowsView(a.C),
                      RowsView(a.out),
                      SsmParams(a.A, a.D, a.dt_bias),
                      SsmDims{a.heads, a.head_dim, a.groups, a.state_size}};
  const int64_t Hm = a.heads, Q = a.chunk_size;
  const int64_t nseq = static_cast<int64_t>(slots.size());
  parallel_for(
      nseq * Hm,
      [&](int64_t i0, int64_t i1) {
        ChunkScratch sc(Q, a.head_dim, a.state_size);
        for (int64_t item = i0; item < i1; ++item) {
          const size_t b = static_cast<size_t>(item / Hm);
          const int64_t h = item % Hm;
          load_head_state(a.ssm_states, slots[b], h, init[b] != 0, sc.S);
          for (int64_t c0 = cu[b]; c0 < cu[b + 1]; c0 += Q)
            scan_chunk(in, h, c0, std::min<int64_t>(Q, cu[b + 1] - c0), sc);
          store_head_state(a.ssm_states, slots[b], h, sc.S);
        }
      },
      1);
}

}  // namespace

STRATA_REGISTER_KERNEL(SsmScanArgs, "host", Device::Host, ssm_scan_supports, ssm_scan_run);

}  // namespace strata::ops::host
