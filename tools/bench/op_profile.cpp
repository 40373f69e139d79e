#include "op_profile.h"

#include "decode_bench.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "engine/executor.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/ops.h"

namespace strata::bench {

namespace {

// Long enough for the host to enqueue an eager step (~7 ms for Nano-3 when it was measured).
constexpr double kSpinMicroseconds = 30000;

std::string weight_tag(const ops::LinearWeight& w) {
  return fmt::format("{} N={} K={}", dtype_name(w.weight.dtype()), w.out_features(),
                     w.in_features());
}

}  // namespace

std::string op_profile_key(const char* op, const void* args) {
  const std::string name = op;
  if (name == ops::LinearArgs::kName) {
    const auto& a = *static_cast<const ops::LinearArgs*>(args);
    return fmt::format("linear {} M={}", weight_tag(a.w), a.x.dim(0));
  }
  if (name == ops::MoeExpertsArgs::kName) {
    const auto& a = *static_cast<const ops::MoeExpertsArgs*>(args);
    return fmt::format("moe_experts up {} top_k={}", weight_tag(a.up->front()), a.ids.dim(1));
  }
  return name;
}

void OpProfiler::step(const std::function<void()>& run_ops) {
  if (ctx_.device != Device::Cuda) fail("--profile-ops needs --device cuda (it times CUDA events)");
  cuda::StreamTimeline timeline;
  std::vector<std::string> keys;  // keys[i]: the op that runs from mark i to mark i + 1
  ctx_.observer = [&](const char* op, const void* args) {
    if (keys.empty()) cuda::spin(spin_us_);
    timeline.mark();
    keys.push_back(op_profile_key(op, args));
  };
  try {
    run_ops();
  } catch (...) {
    ctx_.observer = nullptr;
    throw;
  }
  timeline.mark();  // end of the last op
  ctx_.observer = nullptr;
  const std::vector<double> ms = timeline.intervals_ms();
  STRATA_CHECK_EQ(ms.size(), keys.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    OpProfileRow& r = rows_[keys[i]];
    r.op = keys[i];
    r.calls += 1;
    r.us += ms[i] * 1000.0;
  }
  ++steps_;
}

OpProfile OpProfiler::result() const {
  OpProfile p;
  p.steps = steps_;
  if (steps_ == 0) return p;
  for (const auto& [key, row] : rows_) {
    OpProfileRow r = row;
    r.calls /= static_cast<double>(steps_);
    r.us /= static_cast<double>(steps_);
    p.step_us += r.us;
    p.rows.push_back(r);
  }
  std::sort(p.rows.begin(), p.rows.end(),
            [](const OpProfileRow& a, const OpProfileRow& b) { return a.us > b.us; });
  return p;
}

std::string op_profile_table(const OpProfile& p) {
  std::string t = "| op | calls/step | us/step | us/call | of step |\n|---|---|---|---|---|\n";
  for (const OpProfileRow& r : p.rows)
    t += fmt::format("| {} | {:.0f} | {:.1f} | {:.2f} | {:.1f}% |\n", r.op, r.calls, r.us,
                     r.us / r.calls, 100 * r.us / p.step_us);
  return t;
}

OpProfile profile_decode_ops(model::NemotronHModel& m, int64_t prompt_len, int64_t warmup,
                             int64_t steps) {
  if (steps < 1 || prompt_len < 1)
    fail("bench --profile-ops: steps and prompt length must be >= 1");
  const int64_t context = prompt_len + warmup + steps + 8;
  // Eager: each op is timed between events.
  engine::Executor ex(m, bench_executor(m, Device::Cuda, 1, context, /*graphs=*/false));
  engine::ExecutorSequence s(ex, context);
  const ops::SamplingRow greedy;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < prompt_len; ++i)
    prompt.push_back(static_cast<int32_t>((1000 + 7919 * i) % m.config().vocab_size));
  engine::SamplingBatch batch;
  batch.rows = {greedy};
  int32_t id = ex.sample(s.forward(prompt, engine::LogitRows::LastPerSequence), batch).ids[0];
  for (int64_t i = 0; i < warmup; ++i)
    id = s.step({id}, greedy).ids[0];

  OpProfiler profiler(ex.context(), kSpinMicroseconds);
  for (int64_t step = 0; step < steps; ++step) {
    // The step's one h2d copy (in prepare) synchronizes the stream before the first op.
    const engine::StepInput in = ex.prepare({s.chunk({id})});
    Tensor logits;
    profiler.step([&] { logits = ex.forward(in, engine::LogitRows::LastPerSequence); });
    s.advance(1);
    id = ex.sample(logits, batch).ids[0];
  }
  return profiler.result();
}

}  // namespace strata::bench
