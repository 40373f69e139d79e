#include "batch_decode_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>

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

// Long enough for the host to enqueue an eager step of up to 256 tokens.
constexpr double kSpinMicroseconds = 50000;

// Milliseconds of fn(): CUDA events on the backend stream for device runs, else a wall clock.
double time_once_ms(Device device, const std::function<void()>& fn) {
  if (device == Device::Cuda) return cuda::time_ms(fn, 0, 1);
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// B sequences in one executor's caches (decode graphs when `graphs`).
class DecodeRig {
 public:
  DecodeRig(model::NemotronHModel& m, Device device, int64_t batch, int64_t max_tokens,
            bool graphs)
      : m_(m), ex_(m, bench_executor(m, device, batch, max_tokens, graphs)) {
    for (int64_t b = 0; b < batch; ++b)
      seqs_.push_back(std::make_unique<engine::ExecutorSequence>(ex_, max_tokens));
    greedy_.rows.assign(static_cast<size_t>(batch), ops::SamplingRow{});
  }

  // The eager forward of `len` tokens per sequence (synthetic ids; no sampling), its ops
  // profiled when `profiler` is given.
  void forward(int64_t len, OpProfiler* profiler = nullptr) {
    const int64_t V = m_.config().vocab_size;
    std::vector<engine::SequenceChunk> chunks;
    for (size_t b = 0; b < seqs_.size(); ++b) {
      std::vector<int32_t> tokens;
      for (int64_t i = 0; i < len; ++i)
        tokens.push_back(static_cast<int32_t>(
            (1000 + 7919 * (seqs_[b]->computed() + i) + 104729 * static_cast<int64_t>(b)) % V));
      chunks.push_back(seqs_[b]->chunk(std::move(tokens)));
    }
    const engine::StepInput in = ex_.prepare(chunks);  // uploaded before any op runs
    const auto run = [&] { last_logits_ = ex_.forward(in, engine::LogitRows::LastPerSequence); };
    if (profiler)
      profiler->step(run);
    else
      run();
    for (auto& q : seqs_) q->advance(len);
  }

  // The engine's decode step: Executor::step over the ids sampled last (a graph replay on CUDA
  // once the bucket is captured), greedy.
  void engine_step() {
    if (ids_.empty()) ids_ = ex_.sample(last_logits_, greedy_).ids;  // after the prefill
    std::vector<engine::SequenceChunk> chunks;
    for (size_t b = 0; b < seqs_.size(); ++b)
      chunks.push_back(seqs_[b]->chunk({std::max<int32_t>(ids_[b], 0)}));
    ids_ = ex_.step(chunks, greedy_).ids;
    for (auto& q : seqs_) q->advance(1);
  }

  engine::Executor& executor() { return ex_; }

 private:
  model::NemotronHModel& m_;
  engine::Executor ex_;
  std::vector<std::unique_ptr<engine::ExecutorSequence>> seqs_;
  engine::SamplingBatch greedy_;
  Tensor last_logits_;
  std::vector<int32_t> ids_;
};

// Median ms per step of `repeats` runs of `steps` calls of one_step.
double time_steps(Device device, int64_t steps, int64_t repeats,
                  const std::function<void()>& one_step, std::vector<double>* per_repeat) {
  for (int64_t r = 0; r < repeats; ++r) {
    const double ms = time_once_ms(device, [&] {
      for (int64_t i = 0; i < steps; ++i)
        one_step();
    });
    per_repeat->push_back(ms / static_cast<double>(steps));
  }
  return median(*per_repeat);
}

}  // namespace

std::vector<BatchDecodeRow> run_batch_decode_bench(model::NemotronHModel& m, Device device,
                                                   const BatchDecodeOptions& o) {
  if (o.prompt_len < 1 || o.steps < 1 || o.repeats < 1 || o.warmup < 0 || o.batches.empty() ||
      o.profile_steps < 0)
    fail("bench --batch: prompt length, steps and repeats must be >= 1");
  if (o.profile_steps > 0 && device != Device::Cuda)
    fail("bench --profile-ops needs --device cuda (it times CUDA events)");
  std::vector<BatchDecodeRow> out;
  for (int64_t B : o.batches) {
    if (B < 1) fail("bench --batch: batch {} must be >= 1", B);
    const int64_t total = o.prompt_len + o.warmup + 1 + o.steps * o.repeats + o.profile_steps + 2;
    BatchDecodeRow row;
    row.batch = B;
    {  // the eager forward (one rig at a time: each holds B sequences' caches)
      DecodeRig rig(m, device, B, total, /*graphs=*/false);
      rig.forward(o.prompt_len);
      for (int64_t i = 0; i < o.warmup; ++i)
        rig.forward(1);
      row.eager_ms =
          time_steps(device, o.steps, o.repeats, [&] { rig.forward(1); }, &row.eager_repeat_ms);
      if (o.profile_steps > 0) {
        OpProfiler profiler(rig.executor().context(), kSpinMicroseconds);
        for (int64_t i = 0; i < o.profile_steps; ++i)
          rig.forward(1, &profiler);
        row.profile = profiler.result();
      }
    }
    if (!o.eager_only) {
      DecodeRig rig(m, device, B, total, /*graphs=*/device == Device::Cuda);
      rig.forward(o.prompt_len);
      // Warm-up engine steps; on CUDA the first captures the bucket's graph.
      for (int64_t i = 0; i < o.warmup + 1; ++i)
        rig.engine_step();
      const std::vector<int64_t> captured = rig.executor().captured_buckets();
      const bool graph = std::find(captured.begin(), captured.end(),
                                   engine::Executor::bucket_for(B)) != captured.end();
      row.step_mode = graph ? "graph" : "eager";
      if (!graph)
        row.step_note = device == Device::Cuda
                            ? "the decode step could not be captured (see the warning above)"
                            : "no CUDA graphs on the host: Executor::step runs eagerly";
      row.step_ms =
          time_steps(device, o.steps, o.repeats, [&] { rig.engine_step(); }, &row.step_repeat_ms);
    }
    row.ms_per_step = o.eager_only ? row.eager_ms : row.step_ms;
    row.roofline_of = o.eager_only ? "eager forward"
                                   : (row.step_mode == "graph" ? "graph" : "eager step");
    row.tokens_per_s = static_cast<double>(B) * 1000.0 / row.ms_per_step;
    const double ctx0 = static_cast<double>(o.prompt_len + o.warmup);
    const StepCost cost =
        step_cost(m.config(), m.weights_on(device), static_cast<double>(B),
                  ctx0 + static_cast<double>(o.steps * o.repeats) / 2);
    row.bytes = cost.bytes;
    row.bytes_ms = cost.bytes / o.ceiling_bytes_per_s * 1000.0;
    row.flops_ms =
        (cost.fp8_flops / o.fp8_flops_per_s + cost.other_flops / o.bf16_flops_per_s) * 1000.0;
    const double roofline_ms = std::max(row.bytes_ms, row.flops_ms);
    row.fraction = roofline_ms / row.ms_per_step;
    row.eager_fraction = roofline_ms / row.eager_ms;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace strata::bench
