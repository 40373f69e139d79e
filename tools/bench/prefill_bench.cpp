#include "prefill_bench.h"

#include <algorithm>
#include <chrono>
#include <map>

#include "cache/cache_plan.h"
#include "core/check.h"
#include "engine/device.h"
#include "model/nemotron_h/step.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::bench {

namespace {

// Long enough for the host to enqueue a whole step before its first kernel runs.
constexpr double kSpinMicroseconds = 50000;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The caches and sequences of B prompts of L tokens, reused by every step of one length (each
// step prefills from scratch: num_computed 0 overwrites the states and KV rows).
class PrefillRig {
 public:
  PrefillRig(model::NemotronHModel& m, Device device, int64_t batch, int64_t len)
      : m_(m),
        cache_(m.config(),
               cache::plan_cache_for_tokens(m.config(), batch, len + 1, kBlockSize, m.act_dtype()),
               device) {
    engine::prepare_device(device, ctx_);
    tables_.resize(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b) {
      model::SequenceChunk c;
      c.slot = cache_.mamba.allocate();
      if (!tables_[static_cast<size_t>(b)].ensure(cache_.kv, len))
        fail("bench prefill: no KV blocks for {} x {} tokens", batch, len);
      c.blocks = &tables_[static_cast<size_t>(b)];
      for (int64_t i = 0; i < len; ++i)  // distinct prompts per sequence
        c.tokens.push_back(
            static_cast<int32_t>((1000 + 7919 * i + 104729 * b) % m.config().vocab_size));
      seqs_.push_back(std::move(c));
    }
  }
  ~PrefillRig() {
    for (size_t b = 0; b < seqs_.size(); ++b) {
      tables_[b].release(cache_.kv);
      cache_.mamba.free(seqs_[b].slot);
    }
  }
  PrefillRig(const PrefillRig&) = delete;
  PrefillRig& operator=(const PrefillRig&) = delete;

  model::StepInput build() {
    return model::StepInput::build(seqs_, kBlockSize, m_.config().num_attention > 0, ctx_.device,
                                   ctx_);
  }
  Tensor forward(const model::StepInput& step) {
    return m_.forward(ctx_, step, cache_, model::LogitRows::LastPerSequence);
  }
  OpContext& ctx() { return ctx_; }

 private:
  static constexpr int64_t kBlockSize = 16;
  model::NemotronHModel& m_;
  OpContext ctx_;
  cache::ModelCache cache_;
  std::vector<cache::BlockTable> tables_;
  std::vector<model::SequenceChunk> seqs_;
};

// Milliseconds of one step: the packed input built and uploaded, the forward, to completion.
double time_step_ms(PrefillRig& rig, Device device) {
  auto step = [&] {
    const model::StepInput in = rig.build();
    (void)rig.forward(in);
  };
  if (device == Device::Cuda) return cuda::time_ms(step, 0, 1);
  const auto t0 = std::chrono::steady_clock::now();
  step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Per-op device time of one step (see op_profile.h for the method).
OpProfile profile_step(PrefillRig& rig) {
  const model::StepInput in = rig.build();  // its h2d copy completes before the spin
  cuda::StreamTimeline timeline;
  std::vector<std::string> keys;
  rig.ctx().observer = [&](const char* op, const void* args) {
    if (keys.empty()) cuda::spin(kSpinMicroseconds);
    timeline.mark();
    keys.push_back(op_profile_key(op, args));
  };
  (void)rig.forward(in);
  timeline.mark();
  rig.ctx().observer = nullptr;
  const std::vector<double> ms = timeline.intervals_ms();
  STRATA_CHECK_EQ(ms.size(), keys.size());
  std::map<std::string, OpProfileRow> rows;
  for (size_t i = 0; i < ms.size(); ++i) {
    OpProfileRow& r = rows[keys[i]];
    r.op = keys[i];
    r.calls += 1;
    r.us += ms[i] * 1000.0;
  }
  OpProfile p;
  p.steps = 1;
  for (auto& [key, r] : rows) {
    p.step_us += r.us;
    p.rows.push_back(r);
  }
  std::sort(p.rows.begin(), p.rows.end(),
            [](const OpProfileRow& a, const OpProfileRow& b) { return a.us > b.us; });
  return p;
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
