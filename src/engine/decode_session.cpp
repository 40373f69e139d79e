#include "engine/decode_session.h"

#include "core/check.h"
#include "engine/device.h"

namespace strata::engine {

namespace {
const DecodeSessionOptions& checked(const DecodeSessionOptions& o) {
  if (o.max_context < 2)
    fail("decode session: the context must hold at least 2 tokens, got {}", o.max_context);
  if (o.block_size < 1) fail("decode session: block size must be >= 1, got {}", o.block_size);
  return o;
}
}  // namespace

DecodeSession::DecodeSession(model::NemotronHModel& model, Device device,
                             const DecodeSessionOptions& options)
    : model_(model),
      options_(checked(options)),
      ready_((prepare_device(device, ctx_), true)),
      cache_(model.config(),
             cache::plan_cache_for_tokens(model.config(), 1, options.max_context,
                                          options.block_size, model.act_dtype()),
             device) {
  slot_ = cache_.mamba.allocate();
  // Every block the run can need, up front: the block table (and so the packed layout) never
  // changes size during the run.
  if (!blocks_.ensure(cache_.kv, options_.max_context))
    fail("decode session: no KV blocks for {} tokens", options_.max_context);
  block_columns_ = model.config().num_attention > 0
                       ? (options_.max_context + options_.block_size - 1) / options_.block_size
                       : 0;
  decode_input_ =
      Tensor::empty(Shape{model::StepInput::packed_size(1, 1, block_columns_)}, DType::I32, device);
}

DecodeSession::~DecodeSession() {
  blocks_.release(cache_.kv);
  cache_.mamba.free(slot_);
}

Tensor DecodeSession::prefill(const std::vector<int32_t>& prompt) {
  if (prompt.empty()) fail("decode session: empty prompt");
  if (computed_ + static_cast<int64_t>(prompt.size()) >= options_.max_context)
    fail("decode session: {} more tokens do not fit the context of {}", prompt.size(),
         options_.max_context);
  model::SequenceChunk chunk;
  chunk.slot = slot_;
  chunk.num_computed = computed_;
  chunk.tokens = prompt;
  chunk.blocks = &blocks_;
  const model::StepInput step = model::StepInput::build(
      {chunk}, options_.block_size, model_.config().num_attention > 0, ctx_.device, ctx_);
  Tensor logits = model_.forward(ctx_, step, cache_, model::LogitRows::LastPerSequence);
  computed_ += static_cast<int64_t>(prompt.size());
  return logits;
}

model::StepInput DecodeSession::build_decode(int32_t token) {
  if (computed_ == 0) fail("decode session: decode before prefill");
  if (computed_ + 1 > options_.max_context)
    fail("decode session: the context of {} is full", options_.max_context);
  model::SequenceChunk chunk;
  chunk.slot = slot_;
  chunk.num_computed = computed_;
  chunk.tokens = {token};
  chunk.blocks = &blocks_;
  model::StepBuildOptions o;
  o.block_columns = block_columns_;
  o.target = decode_input_;
  return model::StepInput::build({chunk}, options_.block_size, model_.config().num_attention > 0,
                                 ctx_.device, ctx_, o);
}

Tensor DecodeSession::decode(int32_t token) {
  const model::StepInput step = build_decode(token);  // the one h2d copy of the step
  Tensor logits;
  if (graph_.ready()) {
    graph_.replay(ctx_.stream);
    logits = graph_logits_;
  } else {
    logits = model_.forward(ctx_, step, cache_, model::LogitRows::LastPerSequence);
  }
  ++computed_;
  return logits;
}

bool DecodeSession::capture_decode(int32_t token, std::string* why, Tensor* logits) {
  if (ctx_.device == Device::Host) {
    *why = "the host backend has no graphs";
    return false;
  }
  const model::StepInput step = build_decode(token);
  Tensor out;
  const bool ok = graph_.capture(
      ctx_.stream,
      [&] { out = model_.forward(ctx_, step, cache_, model::LogitRows::LastPerSequence); }, why);
  if (!ok) return false;
  graph_logits_ = out;
  // Capturing recorded the step without running it: run it once now for this position.
  graph_.replay(ctx_.stream);
  ++computed_;
  *logits = graph_logits_;
  return true;
}

int32_t DecodeSession::greedy(const Tensor& logits) {
  ops::SampleArgs s;
  s.logits = logits;
  s.rows = {ops::SamplingRow{}};
  s.ids = Tensor::empty(Shape{1}, DType::I32, ctx_.device);
  ops::run(ctx_, s);
  if (ctx_.device == Device::Host) return s.ids.data<int32_t>()[0];
  ++ctx_.d2h_copies;
  return s.ids.to(Device::Host).data<int32_t>()[0];
}

}  // namespace strata::engine
