// Every op of the engine, declared once. An op is an argument struct; kernels for it are
// registered per backend (src/ops/host/*.cpp, src/ops/cuda/*.cu) and chosen at run time by
// ops::run (registry.h). Shapes use T = tokens in the step, B = sequences, H = hidden size,
// S = state slots in the pool. Tensors hold their own dtype; "act" means the model's
// activation dtype (f32 or bf16), rounded at the points where vLLM stores it.
//
// Conventions every kernel honours:
// - 2-D activation tensors may have a row stride larger than their width (views into a wider
//   projection output); the innermost stride is 1.
// - Index tensors (ids, slots, block tables, cu_seqlens) are i32 and live on the same device
//   as the data, so a device step needs no host reads.
// - Each Args has visit(f), which calls f(Tensor&, Role) for every tensor it holds; the host
//   bounce (registry.h) and the op harness (tests/ops) rely on it.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/registry.h"

namespace strata::ops {

enum class Role { In, Out, InOut };

// A linear layer's weight in any stored form. y[t, n] = sum_k x[t, k] * W[n, k].
// - bf16 / f32 weight: plain product, f32 accumulation.
// - f8e4m3 weight (ModelOpt FP8): W_real = W * weight_scale. When input_scale > 0 the device
//   computes W8A8 (x quantized to e4m3 as sat(x / input_scale), product scaled by
//   input_scale * weight_scale); the host reference computes W8A16 (dequantized weight times
//   unquantized x) and tests separate the two.
struct LinearWeight {
  Tensor weight;             // [N, K] bf16 | f32 | f8e4m3
  float weight_scale = 1.f;  // f8e4m3 only
  float input_scale = 0.f;   // f8e4m3 only; 0 = no static activation scale
  int64_t out_features() const { return weight.dim(0); }
  int64_t in_features() const { return weight.dim(1); }
};

// out[t, :] = table[ids[t], :]
struct EmbeddingArgs {
  static constexpr const char* kName = "embedding";
  Tensor table;  // [V, H] act
  Tensor ids;    // [T] i32
  Tensor out;    // [T, H] act
  template <class F>
  void visit(F&& f) {
    f(table, Role::In);
    f(ids, Role::In);
    f(out, Role::Out);
  }
};

// RMSNorm with an optional fused residual add (vLLM fused_add_rms_norm):
//   residual given:  residual = act(f32(x) + f32(residual)); out = norm(residual)
//   no residual:     out = norm(x)
// norm(v) = act(act(f32(v) * rsqrt(mean(f32(v)^2) + eps)) * weight)  (weight applied after
// the cast, as vLLM does; for f32 models both casts are identities).
// With x2 given, x above is act(f32(x) + f32(x2)) first: the add op fused in (the MoE block's
// routed and shared experts), the same roundings.
// With out_q given, the norm also writes the input of the W8A8 linear that consumes it
// (out_q_scale = that linear's input_scale), quantized here instead of in a separate pass:
//   out_q = e4m3_sat(f32(act(out value)) / out_q_scale)     (division, saturating at +-448)
// byte for byte what the linear's own quantization makes of `out` (QuantizedOut, below). `out`
// may then be undefined when nobody else reads it (1 byte written per value instead of 2).
struct QuantizedOut {
  Tensor out_q;             // [T, N] f8e4m3, optional; undefined = none
  float out_q_scale = 0.f;  // > 0 when out_q is given
};
struct RmsNormArgs : QuantizedOut {
  static constexpr const char* kName = "rms_norm";
  Tensor x;         // [T, H] act
  Tensor x2;        // [T, H] act, optional second addend of x; undefined = none
  Tensor residual;  // [T, H] act, in/out; undefined = no residual
  Tensor weight;    // [H] act
  float eps = 1e-5f;
  Tensor out;  // [T, H] act (may alias x); undefined = only out_q (then required)
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    if (x2.defined()) f(x2, Role::In);
    if (residual.defined()) f(residual, Role::InOut);
    f(weight, Role::In);
    if (out.defined()) f(out, Role::Out);
    if (out_q.defined()) f(out_q, Role::Out);
  }
};

// out[T, N] = x[T, K] * W^T (f32 accumulation, stored in out's dtype: act, or f32 for the
// router and logits).
// x may be f8e4m3 when the weight is W8A8 (e4m3 with input_scale > 0): x is then already
// quantized with that input_scale by its producer (QuantizedOut), and the product is
// input_scale * weight_scale * sum_k x[t, k] * W[n, k] on every backend (the host too).
struct LinearArgs {
  static constexpr const char* kName = "linear";
  Tensor x;  // [T, K] act, or f8e4m3 (W8A8 weights only)
  LinearWeight w;
  Tensor out;  // [T, N] act | f32
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(w.weight, Role::In);
    f(out, Role::Out);
  }
};

// Causal depthwise conv1d + SiLU over packed sequences (prefill, chunked prefill).
// For sequence b (tokens cu_seqlens[b] .. cu_seqlens[b+1]) with state slot slots[b]:
//   window = [conv_states[slot] (K-1 rows, oldest first) if has_initial[b] else zeros] ++ x rows
//   out[t, c] = act(silu(bias[c] + sum_k w[c, k] * window[t + k, c]))   (f32 math)
// and the last K-1 raw window rows are written back to conv_states[slot].
struct Conv1dPrefillArgs {
  static constexpr const char* kName = "conv1d_prefill";
  Tensor x;            // [T, C] act (raw xBC)
  Tensor weight;       // [C, K] act (checkpoint [C, 1, K] viewed)
  Tensor bias;         // [C] act
  Tensor conv_states;  // [S, K-1, C] act, in/out
  Tensor cu_seqlens;   // [B+1] i32
  Tensor slots;        // [B] i32
  Tensor has_initial;  // [B] i32 (0/1)
  Tensor out;          // [T, C] act
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(weight, Role::In);
    f(bias, Role::In);
    f(conv_states, Role::InOut);
    f(cu_seqlens, Role::In);
    f(slots, Role::In);
    f(has_initial, Role::In);
    f(out, Role::Out);
  }
};

// One new token per sequence (decode): shift conv_states[slots[b]] left by one, append x[b],
// out[b] = act(silu(bias + sum_k w[:, k] * window[k])).
struct Conv1dUpdateArgs {
  static constexpr const char* kName = "conv1d_update";
  Tensor x;            // [B, C] act
  Tensor weight;       // [C, K] act
  Tensor bias;         // [C] act
  Tensor conv_states;  // [S, K-1, C] act, in/out
  Tensor slots;        // [B] i32
  Tensor out;          // [B, C] act
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(weight, Role::In);
    f(bias, Role::In);
    f(conv_states, Role::InOut);
    f(slots, Role::In);
    f(out, Role::Out);
  }
};

// Mamba2 SSM over packed sequences (spec section 3.2 step 6). Per token t of sequence b,
// head h, group g = h / (Hm / G):
//   dt = softplus(f32(dt_raw[t, h]) + f32(dt_bias[h]))        (no clamp)
//   S_h = exp(dt * A[h]) * S_h + dt * x[t, h, :]^T (x) B[t, g, :]
//   y[t, h, :] = act(S_h * C[t, g, :] + D[h] * x[t, h, :])
// S starts from ssm_states[slots[b]] when has_initial[b], else zeros; the final state is
// written back to ssm_states[slots[b]]. The prefill op computes this chunked (SSD, chunk
// length `chunk_size`); the result must equal the sequential recurrence up to f32
// reassociation. x, B, C and dt_raw are row views into wider tensors (row stride >= width).
// The fields both SSM ops share (one Mamba argument struct: the mixer fills it once and the
// step's decode rows and prefill rows each take a copy with their own row views and slots).
struct SsmArgs {
  Tensor x;           // [T, Hm*P] act
  Tensor dt_raw;      // [T, Hm] act
  Tensor A;           // [Hm] f32 (= -exp(A_log))
  Tensor B;           // [T, G*N] act
  Tensor C;           // [T, G*N] act
  Tensor D;           // [Hm] f32 or act
  Tensor dt_bias;     // [Hm] f32 or act
  Tensor ssm_states;  // [S, Hm, P, N] f32 (mamba_ssm_cache_dtype), in/out
  Tensor slots;       // [B] i32
  int64_t heads = 0, head_dim = 0, groups = 0, state_size = 0;
  Tensor out;  // [T, Hm*P] act
};

struct SsmScanArgs : SsmArgs {
  static constexpr const char* kName = "ssm_scan";
  Tensor cu_seqlens;   // [B+1] i32
  Tensor has_initial;  // [B] i32 (0/1)
  int64_t chunk_size = 128;
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(dt_raw, Role::In);
    f(A, Role::In);
    f(B, Role::In);
    f(C, Role::In);
    f(D, Role::In);
    f(dt_bias, Role::In);
    f(ssm_states, Role::InOut);
    f(cu_seqlens, Role::In);
    f(slots, Role::In);
    f(has_initial, Role::In);
    f(out, Role::Out);
  }
};

// Decode: one token per sequence, same math as SsmScanArgs with every sequence length 1 and
// has_initial = 1 (the selective state update). x, B, C, dt_raw and out are [B, ...].
struct SsmUpdateArgs : SsmArgs {
  static constexpr const char* kName = "ssm_update";
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(dt_raw, Role::In);
    f(A, Role::In);
    f(B, Role::In);
    f(C, Role::In);
    f(D, Role::In);
    f(dt_bias, Role::In);
    f(ssm_states, Role::InOut);
    f(slots, Role::In);
    f(out, Role::Out);
  }
};

// Gated grouped RMSNorm (Mamba2 output norm, gate first):
//   v = f32(y) * silu(f32(z)); per group of D/groups channels v *= rsqrt(mean(v^2) + eps);
//   out = act(act(v) * weight)
// out_q (optional, QuantizedOut): the e4m3 input of a W8A8 out_proj, as for RmsNormArgs.
struct GatedRmsNormArgs : QuantizedOut {
  static constexpr const char* kName = "gated_rms_norm";
  Tensor y;       // [T, D] act
  Tensor z;       // [T, D] act (row view into in_proj output)
  Tensor weight;  // [D] act
  int64_t groups = 1;
  float eps = 1e-5f;
  Tensor out;  // [T, D] act; undefined = only out_q (then required)
  template <class F>
  void visit(F&& f) {
    f(y, Role::In);
    f(z, Role::In);
    f(weight, Role::In);
    if (out.defined()) f(out, Role::Out);
    if (out_q.defined()) f(out_q, Role::Out);
  }
};

// Writes new K/V rows into the paged cache: row t goes to block slot_mapping[t] / block_size,
// offset slot_mapping[t] % block_size. Negative slot = skip (padding).
// An FP8 cache (k_cache / v_cache e4m3, `--kv-cache-dtype fp8`) stores e4m3(k / k_scale) and
// e4m3(v / v_scale), saturated to +-448, with one float scale per layer (1 by default).
struct KvCacheWriteArgs {
  static constexpr const char* kName = "kv_cache_write";
  Tensor k;             // [T, n_kv*hd] act
  Tensor v;             // [T, n_kv*hd] act
  Tensor k_cache;       // [num_blocks, block_size, n_kv, hd] act or e4m3
  Tensor v_cache;       // [num_blocks, block_size, n_kv, hd] act or e4m3
  Tensor slot_mapping;  // [T] i32
  float k_scale = 1.f, v_scale = 1.f;  // e4m3 caches: the stored values' scales
  template <class F>
  void visit(F&& f) {
    f(k, Role::In);
    f(v, Role::In);
    f(k_cache, Role::InOut);
    f(v_cache, Role::InOut);
    f(slot_mapping, Role::In);
  }
};

// Causal GQA attention over the paged cache (no RoPE). Sequence b has queries
// q[cu_seqlens_q[b] .. cu_seqlens_q[b+1]) which are the last q_len tokens of its context of
// length context_lens[b] (already written to the cache). Query i (context position
// p = context_lens[b] - q_len + i) attends to positions 0..p; head h uses kv head
// h / (n_heads / n_kv_heads). softmax in f32 with `scale`; out stored act. An e4m3 cache is read
// as f32(code) * k_scale (v_scale), the scales kv_cache_write stored it with.
struct AttentionArgs {
  static constexpr const char* kName = "attention";
  Tensor q;             // [T, n_heads*hd] act
  Tensor k_cache;       // [num_blocks, block_size, n_kv, hd] act or e4m3
  Tensor v_cache;       // [num_blocks, block_size, n_kv, hd] act or e4m3
  Tensor block_tables;  // [B, max_blocks_per_seq] i32
  Tensor cu_seqlens_q;  // [B+1] i32
  Tensor context_lens;  // [B] i32
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  int64_t max_q_len = 0;  // host-known bound: 1 for pure decode steps
  float scale = 1.f;
  float k_scale = 1.f, v_scale = 1.f;  // e4m3 caches: the stored values' scales
  Tensor out;                          // [T, n_heads*hd] act
  template <class F>
  void visit(F&& f) {
    f(q, Role::In);
    f(k_cache, Role::In);
    f(v_cache, Role::In);
    f(block_tables, Role::In);
    f(cu_seqlens_q, Role::In);
    f(context_lens, Role::In);
    f(out, Role::Out);
  }
};

// out = act(relu(f32(x))^2)   (may run in place)
// out_q (optional, QuantizedOut): the e4m3 input of a W8A8 down projection, as for RmsNormArgs.
struct Relu2Args : QuantizedOut {
  static constexpr const char* kName = "relu2";
  Tensor x;    // [T, N] act
  Tensor out;  // [T, N] act; undefined = only out_q (then required)
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    if (out.defined()) f(out, Role::Out);
    if (out_q.defined()) f(out_q, Role::Out);
  }
};

// out = act(f32(a) + f32(b))
struct AddArgs {
  static constexpr const char* kName = "add";
  Tensor a, b;  // [T, N] act
  Tensor out;   // [T, N] act
  template <class F>
  void visit(F&& f) {
    f(a, Role::In);
    f(b, Role::In);
    f(out, Role::Out);
  }
};

// MoE routing (spec 3.5): s = sigmoid(logits); sel = s + correction_bias; when n_group > 1
// keep the topk_group groups with the largest sum of their top-2 sel; ids = top-k of sel
// (ties: lower index first); weights = s[ids], divided by their sum when norm_topk_prob, times
// routed_scaling_factor. All f32.
struct MoeRouteArgs {
  static constexpr const char* kName = "moe_route";
  Tensor logits;           // [T, E] f32
  Tensor correction_bias;  // [E] f32
  int64_t top_k = 1, n_group = 1, topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  Tensor ids;      // [T, top_k] i32
  Tensor weights;  // [T, top_k] f32
  template <class F>
  void visit(F&& f) {
    f(logits, Role::In);
    f(correction_bias, Role::In);
    f(ids, Role::Out);
    f(weights, Role::Out);
  }
};

// The routed experts as one grouped computation:
//   out[t] = act( sum_j weights[t, j] * f32(down_e(act(relu(up_e(x[t]))^2))) ),  e = ids[t, j]
// where up_e / down_e outputs are stored act (vLLM's rounding points). The shared expert is
// not part of this op (it is a plain MLP through linear + relu2 + linear, added after).
struct MoeExpertsArgs {
  static constexpr const char* kName = "moe_experts";
  Tensor x;                                         // [T, H] act
  const std::vector<LinearWeight>* up = nullptr;    // E weights [I, H]
  const std::vector<LinearWeight>* down = nullptr;  // E weights [H, I]
  Tensor ids;                                       // [T, top_k] i32
  Tensor weights;                                   // [T, top_k] f32
  Tensor out;                                       // [T, H] act
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(ids, Role::In);
    f(weights, Role::In);
    f(out, Role::Out);
  }
  // The expert weights, held by pointer outside visit (the host bounce copies them).
  template <class F>
  void visit_weight_lists(F&& f) {
    f(up);
    f(down);
  }
};

// Converts between float dtypes elementwise (contiguous, same shape), e.g. bf16 logits -> f32.
struct CastArgs {
  static constexpr const char* kName = "cast";
  Tensor x;
  Tensor out;
  template <class F>
  void visit(F&& f) {
    f(x, Role::In);
    f(out, Role::Out);
  }
};

// Token ids that are still on the device (overlapped scheduling: a decode row's token is the
// one the previous step sampled): ids[t] = prev[src[t]] where src[t] >= 0, else unchanged; a
// negative prev (a row flagged non-finite, whose sequence ends there) becomes 0.
// A src outside prev counts an index error and leaves ids[t] unchanged.
struct TakeIdsArgs {
  static constexpr const char* kName = "take_ids";
  Tensor ids;   // [T] i32, in/out
  Tensor src;   // [T] i32: a row of prev, or -1
  Tensor prev;  // [P] i32: the previous step's sampled ids
  template <class F>
  void visit(F&& f) {
    f(ids, Role::InOut);
    f(src, Role::In);
    f(prev, Role::In);
  }
};

// Sampling parameters of one row. Defaults are "off": greedy, no filters, no penalties, no
// logprobs. (The first five fields keep their order: callers brace-initialize them.)
struct SamplingRow {
  float temperature = 0.f;       // < 1e-5 (kGreedyTemperature) = greedy (argmax, lowest id on ties)
  int32_t top_k = 0;             // 0 = off
  float top_p = 1.f;             // 1 = off; in (0, 1]
  uint64_t seed = 0;             // with `step`, determines the random draw
  uint64_t step = 0;             // index of the token being sampled in its request
  float min_p = 0.f;             // 0 = off; in [0, 1]
  float presence_penalty = 0.f;  // subtracted once from tokens of the output (vLLM)
  float frequency_penalty = 0.f;   // subtracted per occurrence in the output
  float repetition_penalty = 1.f;  // > 0; divides positive / multiplies negative logits of
                                   // tokens seen in the prompt or the output
  int32_t num_logprobs = -1;       // -1 = none; k in [0, 20]: the sampled token's logprob and rank,
                                   // and the k most likely tokens with their logprobs
};

// ids[b] sampled from logits[b] (f32) with rows[b]'s parameters, on host and device alike
// (ops/sampling_math.h has the exact arithmetic): logit bias -> penalties -> (greedy argmax) ->
// temperature -> min_p -> top_k -> top_p -> a draw by the Gumbel-max trick with a
// counter-based RNG of (seed, step, token id), so a row's token never depends on its batch
// neighbours and host and device pick the same token.
//
// Sparse per-row inputs: the tokens of a row that have a logit bias or a penalty to apply
// (tokens of the prompt or the output; banned stop ids for min_tokens as bias -inf), one CSR
// list built on the host each step (SamplingEntries below builds it). Rows without entries cost
// nothing. Within a row the token ids are strictly increasing.
//
// Logprobs (rows with num_logprobs >= 0) are vLLM's processed logprobs as strata defines them:
// log_softmax of the logits after bias, penalties and temperature (T = 1 for greedy rows),
// before the min_p / top_k / top_p masks. The rank is vLLM's: the number of tokens whose
// logprob is >= the sampled token's (1 = the most likely).
//
// A row whose raw logits hold a NaN or an infinity gets ids[b] = -1 and nonfinite[b] = 1; a row
// whose every processed logit is -inf (all banned) gets -1 and nonfinite[b] = 2; otherwise 0.
// Without a `nonfinite` tensor such a row is an error (the host throws; the device counts an
// index error).
struct SampleArgs {
  static constexpr const char* kName = "sample";
  Tensor logits;                  // [B, V] f32 (row views allowed)
  std::vector<SamplingRow> rows;  // [B], on the host: the kernels plan with them
  // Sparse entries (undefined = none), on the op's device.
  Tensor entry_offsets;    // [B + 1] i32: row b's entries are [offsets[b], offsets[b + 1])
  Tensor entry_tokens;     // [N] i32: token id, strictly increasing within a row
  Tensor entry_counts;     // [N] i32: occurrences of the token in the output so far (>= 0)
  Tensor entry_in_prompt;  // [N] i32: 1 when the token occurs in the prompt, else 0
  Tensor entry_bias;       // [N] f32: logit bias (0 = none, -inf = banned)
  Tensor ids;              // [B] i32 out
  Tensor nonfinite;        // [B] i32 out, optional
  // Logprob outputs: required when some row has num_logprobs >= 0 (the top ones when > 0).
  // Entries a row does not fill hold id -1 and value 0; rows without logprobs (or flagged
  // non-finite) hold sampled_logprob 0 and sampled_rank 0.
  Tensor sampled_logprob;  // [B] f32 out
  Tensor sampled_rank;     // [B] i32 out
  Tensor top_ids;          // [B, K] i32 out, K >= every row's num_logprobs
  Tensor top_logprobs;     // [B, K] f32 out
  template <class F>
  void visit(F&& f) {
    f(logits, Role::In);
    for (Tensor* t : {&entry_offsets, &entry_tokens, &entry_counts, &entry_in_prompt, &entry_bias})
      if (t->defined()) f(*t, Role::In);
    f(ids, Role::Out);
    for (Tensor* t : {&nonfinite, &sampled_logprob, &sampled_rank, &top_ids, &top_logprobs})
      if (t->defined()) f(*t, Role::Out);
  }
};

}  // namespace strata::ops

#include "ops/host_bounce.h"

namespace strata::ops {

// Runs `a` on the kernel registry.h selects for `ctx`. On a device run, an op listed in
// ctx.force_host_ops, or (with ctx.allow_host_bounce) one no device kernel supports, runs on
// its host kernel through the counted host bounce (host_bounce.h).
template <class Args>
void run(OpContext& ctx, Args& a) {
  if (ctx.observer) ctx.observer(Args::kName, &a);
  if (ctx.device != Device::Host) {
    if (ctx.force_host_ops.count(Args::kName) > 0) {
      if (!ctx.allow_host_bounce)
        fail("op {} is forced onto the host, but this run does not allow host bounces",
             Args::kName);
      run_host_bounce(ctx, a, "forced onto the host");
      return;
    }
    if (ctx.allow_host_bounce) {
      std::string reasons;
      if (const Kernel<Args>* k = find_kernel(a, ctx.device, &reasons)) {
        k->run(a, ctx);
      } else {
        run_host_bounce(ctx, a, "no device kernel:" + reasons);
      }
      return;
    }
  }
  select_kernel(a, ctx).run(a, ctx);
}

}  // namespace strata::ops
