#include "prefill_bench.h"

#include <algorithm>
#include <chrono>

#include "cache/cache_plan.h"
#include "core/check.h"
#include "engine/device.h"
#include "decode_bench.h"
#include "engine/executor.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::bench {

namespace {

// Long enough for the host to enqueue a whole step before its first kernel runs.
constexpr double kSpinMicroseconds = 50000;

// The caches and sequences of B prompts of L tokens in one executor, reused by every step of one
// length (each step prefills from scratch: num_computed 0 overwrites the states and KV rows).
class PrefillRig {
 public:
  PrefillRig(model::NemotronHModel& m, Device device, int64_t batch, int64_t len)
      : ex_(m, bench_executor(m, device, batch, len + 1, /*graphs=*/false)) {
    for (int64_t b = 0; b < batch; ++b) {
      seqs_.push_back(std::make_unique<engine::ExecutorSequence>(ex_, len + 1));
      std::vector<int32_t> tokens;
      for (int64_t i = 0; i < len; ++i)  // distinct prompts per sequence
        tokens.push_back(
            static_cast<int32_t>((1000 + 7919 * i + 104729 * b) % m.config().vocab_size));
      chunks_.push_back(seqs_.back()->chunk(std::move(tokens)));
    }
  }

  engine::StepInput build() { return ex_.prepare(chunks_); }
  Tensor forward(const engine::StepInput& step) {
    return ex_.forward(step, engine::LogitRows::LastPerSequence);
  }
  OpContext& ctx() { return ex_.context(); }

 private:
  engine::Executor ex_;
  std::vector<std::unique_ptr<engine::ExecutorSequence>> seqs_;
  std::vector<engine::SequenceChunk> chunks_;
};

// Milliseconds of one step: the packed input built and uploaded, the forward, to completion.
double time_step_ms(PrefillRig& rig, Device device) {
  auto step = [&] {
    const engine::StepInput in = rig.build();
    (void)rig.forward(in);
  };
  if (device == Device::Cuda) return cuda::time_ms(step, 0, 1);
  const auto t0 = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Per-op device time of one step (see op_profile.h for the method).
OpProfile profile_step(PrefillRig& rig) {
  const engine::StepInput in = rig.build();  // its h2d copy completes before the spin
  OpProfiler profiler(rig.ctx(), kSpinMicroseconds);
  profiler.step([&] { (void)rig.forward(in); });
  return profiler.result();
}

}  // namespace

std::vector<PrefillRow> run_prefill_bench(model::NemotronHModel& m, Device device,
                                          const PrefillOptions& o) {
  if (o.batch < 1 || o.repeats < 1 || o.warmup < 0 || o.prompt_lens.empty())
    fail("bench prefill: --batch and --repeats must be >= 1 and --prompt-len non-empty");
  if (o.profile_ops && device != Device::Cuda)
    fail("bench prefill --profile-ops needs --device cuda (it times CUDA events)");
  std::vector<PrefillRow> out;
  for (int64_t len : o.prompt_lens) {
    if (len < 1) fail("bench prefill: prompt length {} must be >= 1", len);
    PrefillRig rig(m, device, o.batch, len);
    for (int64_t i = 0; i < o.warmup; ++i)
      (void)time_step_ms(rig, device);
    PrefillRow row;
    row.prompt_len = len;
    row.batch = o.batch;
    for (int64_t r = 0; r < o.repeats; ++r)
      row.repeat_ms.push_back(time_step_ms(rig, device));
    row.ms = median(row.repeat_ms);
    row.tokens_per_s = static_cast<double>(len * o.batch) * 1000.0 / row.ms;
    if (o.profile_ops) row.profile = profile_step(rig);
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace strata::bench
