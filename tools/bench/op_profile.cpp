#include "op_profile.h"

#include "decode_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

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

  cuda::StreamTimeline timeline;
  std::vector<std::string> keys;  // keys[i]: the op that runs from mark i to mark i + 1
  std::map<std::string, OpProfileRow> rows;
  for (int64_t step = 0; step < steps; ++step) {
    timeline.clear();
    keys.clear();
    ex.context().observer = [&](const char* op, const void* args) {
      // The step's one h2d copy synchronizes the stream before the first op: spin from here.
      if (keys.empty()) cuda::spin(kSpinMicroseconds);
      timeline.mark();
      keys.push_back(op_profile_key(op, args));
    };
    Tensor logits = s.forward({id}, engine::LogitRows::LastPerSequence);
    timeline.mark();  // end of the last op
    ex.context().observer = nullptr;
    const std::vector<double> ms = timeline.intervals_ms();
    STRATA_CHECK_EQ(ms.size(), keys.size());
    for (size_t i = 0; i < ms.size(); ++i) {
      OpProfileRow& r = rows[keys[i]];
      r.op = keys[i];
      r.calls += 1;
      r.us += ms[i] * 1000.0;
    }
    id = ex.sample(logits, batch).ids[0];
  }
  OpProfile p;
  p.steps = steps;
  for (auto& [key, r] : rows) {
    r.calls /= static_cast<double>(steps);
    r.us /= static_cast<double>(steps);
    p.step_us += r.us;
    p.rows.push_back(r);
  }
  std::sort(p.rows.begin(), p.rows.end(),
            [](const OpProfileRow& a, const OpProfileRow& b) { return a.us > b.us; });
  return p;
}

}  // namespace strata::bench
