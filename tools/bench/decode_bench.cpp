#include "decode_bench.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/log.h"
#include "engine/executor.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::bench {

DecodeBytes decode_bytes_per_token(const model::ModelConfig& c, const model::ModelWeights& w,
                                   double context) {
  DecodeBytes b;
  const double act = static_cast<double>(dtype_size(w.act_dtype));
  auto lin = [](const model::LinearWeight& l) { return static_cast<double>(l.weight.nbytes()); };
  b.weights += static_cast<double>(c.hidden_size) * act;  // one embedding row
  for (const model::LayerWeights& L : w.layers) {
    b.weights += static_cast<double>(L.norm.nbytes());
    switch (L.kind) {
      case model::LayerKind::Mamba: {
        const auto& m = L.mamba;
        b.weights += lin(m.in_proj) + lin(m.out_proj) + m.conv_weight.nbytes() +
                     m.conv_bias.nbytes() + m.dt_bias.nbytes() + m.A.nbytes() + m.D.nbytes() +
                     m.norm.nbytes();
        const double ssm =
            static_cast<double>(c.mamba_num_heads * c.mamba_head_dim * c.ssm_state_size) *
            static_cast<double>(dtype_size(c.mamba_ssm_cache_dtype));
        const double conv = static_cast<double>((c.conv_kernel - 1) * c.conv_dim) * act;
        b.state += 2 * (ssm + conv);  // read and written back
        break;
      }
      case model::LayerKind::Attention: {
        const auto& a = L.attention;
        b.weights += lin(a.q_proj) + lin(a.k_proj) + lin(a.v_proj) + lin(a.o_proj);
        b.kv += 2.0 * static_cast<double>(c.kv_size) * act *
                (context + 1);  // K and V read, one row written
        break;
      }
      case model::LayerKind::Mlp:
        b.weights += lin(L.mlp.up) + lin(L.mlp.down);
        break;
      case model::LayerKind::Moe: {
        const auto& e = L.moe;
        b.weights += lin(e.router) + static_cast<double>(e.correction_bias.nbytes());
        double experts = 0;
        for (size_t i = 0; i < e.up.size(); ++i)
          experts += lin(e.up[i]) + lin(e.down[i]);
        // One token reads top_k of the E experts.
        b.weights += experts * static_cast<double>(c.num_experts_per_tok) /
                     static_cast<double>(c.n_routed_experts);
        if (e.has_shared) b.weights += lin(e.shared.up) + lin(e.shared.down);
        break;
      }
    }
  }
  b.weights += static_cast<double>(w.norm_f.nbytes()) + lin(w.lm_head);
  return b;
}

namespace {

// Milliseconds of fn(): CUDA events on the backend stream for device runs, else a wall clock.
double time_once_ms(Device device, const std::function<void()>& fn) {
  if (device == Device::Cuda) return cuda::time_ms(fn, 0, 1);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}


std::vector<int32_t> bench_prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> p;
  for (int64_t i = 0; i < n; ++i)
    p.push_back(static_cast<int32_t>((1000 + 7919 * i) % vocab));
  return p;
}

// A single-sequence executor sized for the whole run (graphs for decode steps when `graph`).


BenchRow run_mode(model::NemotronHModel& m, Device device, const BenchOptions& o, bool graph,
                  std::vector<int32_t>* tokens) {
  BenchRow row;
  row.mode = graph ? "graph" : "eager";
  const int64_t context = o.prompt_len + o.warmup + 1 + o.steps * o.repeats + 8;
  engine::Executor ex(m, bench_executor(m, device, 1, context, graph));
  engine::ExecutorSequence s(ex, context);
  const ops::SamplingRow greedy;  // temperature 0
  engine::SamplingBatch batch;
  batch.rows = {greedy};
  Tensor logits =
      s.forward(bench_prompt(o.prompt_len, m.config().vocab_size), engine::LogitRows::LastPerSequence);
  int32_t id = ex.sample(logits, batch).ids[0];
  // Warm-up decode steps; in graph mode the first one captures the bucket's graph.
  for (int64_t i = 0; i < o.warmup + 1; ++i)
    id = s.step({id}, greedy).ids[0];
  if (graph && ex.captured_buckets().empty()) {
    row.note = "no graph: the decode step could not be captured (see the warning above)";
    return row;
  }
  for (int64_t r = 0; r < o.repeats; ++r) {
    const double ms = time_once_ms(device, [&] {
      for (int64_t i = 0; i < o.steps; ++i) {
        id = s.step({id}, greedy).ids[0];
        if (r == 0) tokens->push_back(id);
      }
    });
    row.repeat_ms.push_back(ms / static_cast<double>(o.steps));
  }
  row.ms_per_token = median(row.repeat_ms);
  row.tokens_per_s = 1000.0 / row.ms_per_token;
  return row;
}

}  // namespace

engine::ExecutorConfig bench_executor(model::NemotronHModel& m, Device device, int64_t seqs,
                                      int64_t tokens, bool graphs) {
  engine::ExecutorConfig ec;
  ec.device = device;
  ec.max_num_seqs = seqs;
  ec.max_model_len = tokens;
  ec.block_size = 16;
  ec.cache_plan = cache::plan_cache_for_tokens(m.config(), seqs, tokens, 16, m.act_dtype());
  ec.cuda_graphs = graphs;
  return ec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

BenchResult run_decode_bench(model::NemotronHModel& m, Device device, const BenchOptions& o) {
  if (o.prompt_len < 1 || o.steps < 1 || o.repeats < 1 || o.warmup < 0)
    fail("bench: --prompt-len, --steps and --repeats must be >= 1 (got {}, {}, {})", o.prompt_len,
         o.steps, o.repeats);
  BenchResult res;
  const double mean_context =
      static_cast<double>(o.prompt_len + o.warmup) + static_cast<double>(o.steps * o.repeats) / 2;
  res.bytes = decode_bytes_per_token(m.config(), m.weights_on(device), mean_context);
  res.rows.push_back(run_mode(m, device, o, false, &res.tokens_eager));
  if (o.graph && device == Device::Cuda)
    res.rows.push_back(run_mode(m, device, o, true, &res.tokens_graph));
  for (BenchRow& r : res.rows)
    if (r.tokens_per_s > 0) r.fraction = res.bytes.total() * r.tokens_per_s / o.ceiling_bytes_per_s;
  return res;
}

}  // namespace strata::bench
