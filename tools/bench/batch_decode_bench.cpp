#include "batch_decode_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "cache/cache_plan.h"
#include "core/check.h"
#include "engine/device.h"
#include "decode_bench.h"
#include "engine/executor.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::bench {

namespace {

// What one decode step of B tokens must touch and compute (see the header).
struct StepCost {
  double bytes = 0, fp8_flops = 0, other_flops = 0;
};

StepCost step_cost(const model::ModelConfig& c, const model::ModelWeights& w, double B,
                   double context) {
  StepCost s;
  const double act = static_cast<double>(dtype_size(w.act_dtype));
  // A linear over B tokens: its bytes once, 2 B params FLOPs at its dtype's rate.
  auto lin = [&](const model::LinearWeight& l, double share, double tokens) {
    s.bytes += static_cast<double>(l.weight.nbytes()) * share;
    const double flops = 2.0 * tokens * static_cast<double>(l.weight.numel());
    (l.weight.dtype() == DType::F8E4M3 ? s.fp8_flops : s.other_flops) += flops;
  };
  for (const model::LayerWeights& L : w.layers) {
    s.bytes += static_cast<double>(L.norm.nbytes());
    switch (L.kind) {
      case model::LayerKind::Mamba: {
        lin(L.mamba.in_proj, 1, B);
        lin(L.mamba.out_proj, 1, B);
        const double ssm =
            static_cast<double>(c.mamba_num_heads * c.mamba_head_dim * c.ssm_state_size) *
            static_cast<double>(dtype_size(c.mamba_ssm_cache_dtype));
        const double conv = static_cast<double>((c.conv_kernel - 1) * c.conv_dim) * act;
        s.bytes += B * 2 * (ssm + conv);
        break;
      }
      case model::LayerKind::Attention:
        lin(L.attention.q_proj, 1, B);
        lin(L.attention.k_proj, 1, B);
        lin(L.attention.v_proj, 1, B);
        lin(L.attention.o_proj, 1, B);
        s.bytes += B * 2.0 * static_cast<double>(c.kv_size) * act * (context + 1);
        break;
      case model::LayerKind::Mlp:
        lin(L.mlp.up, 1, B);
        lin(L.mlp.down, 1, B);
        break;
      case model::LayerKind::Moe: {
        const auto& e = L.moe;
        lin(e.router, 1, B);
        const double E = static_cast<double>(e.up.size()),
                     k = static_cast<double>(c.num_experts_per_tok);
        const double distinct = E * (1.0 - std::pow(1.0 - k / E, B));
        // Each expert: bytes when routed to (distinct / E of them), FLOPs for the k B pairs.
        for (size_t i = 0; i < e.up.size(); ++i) {
          lin(e.up[i], distinct / E, B * k / E);
          lin(e.down[i], distinct / E, B * k / E);
        }
        if (e.has_shared) {
          lin(e.shared.up, 1, B);
          lin(e.shared.down, 1, B);
        }
        break;
      }
    }
  }
  lin(w.lm_head, 1, B);
  return s;
}

// B sequences in one executor's caches; prefills them, then runs decode steps (eagerly: each
// step's forward is what is timed).
class DecodeRig {
 public:
  DecodeRig(model::NemotronHModel& m, Device device, int64_t batch, int64_t max_tokens)
      : m_(m), ex_(m, bench_executor(m, device, batch, max_tokens, /*graphs=*/false)) {
    for (int64_t b = 0; b < batch; ++b)
      seqs_.push_back(std::make_unique<engine::ExecutorSequence>(ex_, max_tokens));
  }

  // Every sequence adds `len` tokens (len 1: a decode step).
  void step(int64_t len) {
    const int64_t V = m_.config().vocab_size;
    std::vector<engine::SequenceChunk> chunks;
    for (size_t b = 0; b < seqs_.size(); ++b) {
      std::vector<int32_t> tokens;
      for (int64_t i = 0; i < len; ++i)
        tokens.push_back(static_cast<int32_t>(
            (1000 + 7919 * (seqs_[b]->computed() + i) + 104729 * static_cast<int64_t>(b)) % V));
      chunks.push_back(seqs_[b]->chunk(std::move(tokens)));
    }
    const engine::StepInput in = ex_.prepare(chunks);
    (void)ex_.forward(in, engine::LogitRows::LastPerSequence);
    for (auto& q : seqs_) q->advance(len);
  }
  int64_t context() const { return seqs_.front()->computed(); }

 private:
  model::NemotronHModel& m_;
  engine::Executor ex_;
  std::vector<std::unique_ptr<engine::ExecutorSequence>> seqs_;
};

}  // namespace

std::vector<BatchDecodeRow> run_batch_decode_bench(model::NemotronHModel& m, Device device,
                                                   const BatchDecodeOptions& o) {
  if (o.prompt_len < 1 || o.steps < 1 || o.repeats < 1 || o.warmup < 0 || o.batches.empty())
    fail("bench --batch: prompt length, steps and repeats must be >= 1");
  std::vector<BatchDecodeRow> out;
  for (int64_t B : o.batches) {
    if (B < 1) fail("bench --batch: batch {} must be >= 1", B);
    const int64_t total = o.prompt_len + o.warmup + o.steps * o.repeats + 2;
    DecodeRig rig(m, device, B, total);
    rig.step(o.prompt_len);
    for (int64_t i = 0; i < o.warmup; ++i)
      rig.step(1);
    BatchDecodeRow row;
    row.batch = B;
    const double ctx0 = static_cast<double>(o.prompt_len + o.warmup);
    for (int64_t r = 0; r < o.repeats; ++r) {
      auto run = [&] {
        for (int64_t i = 0; i < o.steps; ++i)
          rig.step(1);
      };
      double ms = 0;
      if (device == Device::Cuda) {
        ms = cuda::time_ms(run, 0, 1);
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        run();
        ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                 .count();
      }
      row.repeat_ms.push_back(ms / static_cast<double>(o.steps));
    }
    row.ms_per_step = median(row.repeat_ms);
    row.tokens_per_s = static_cast<double>(B) * 1000.0 / row.ms_per_step;
    const StepCost cost =
        step_cost(m.config(), m.weights_on(device), static_cast<double>(B),
                  ctx0 + static_cast<double>(o.steps * o.repeats) / 2);
    row.bytes = cost.bytes;
    row.bytes_ms = cost.bytes / o.ceiling_bytes_per_s * 1000.0;
    row.flops_ms =
        (cost.fp8_flops / o.fp8_flops_per_s + cost.other_flops / o.bf16_flops_per_s) * 1000.0;
    row.fraction = std::max(row.bytes_ms, row.flops_ms) / row.ms_per_step;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace strata::bench
