#include "engine/executor.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/log.h"
#include "engine/device.h"
#include "engine/device_memory.h"
#include "engine/executor_in_flight.h"
#include "engine/region_allocator.h"

namespace strata::engine {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = kMiB * 1024.0;
constexpr int64_t kDefaultMaxModelLen = 4096;

DType parse_kv_dtype(const std::string& s, DType act) {
  if (s == "auto") return act;
  if (s == "fp8" || s == "fp8_e4m3") return DType::F8E4M3;
  fail("--kv-cache-dtype must be auto or fp8, got \"{}\"", s);
}

DType parse_ssm_dtype(const std::string& s, DType config_dtype) {
  if (s == "auto") return config_dtype;
  if (s == "float32") return DType::F32;
  if (s == "bfloat16") return DType::BF16;
  if (s == "float16") return DType::F16;
  fail("--mamba-ssm-cache-dtype must be auto, float32, bfloat16 or float16, got \"{}\"", s);
}

int64_t resolve_max_model_len(const ExecutorConfig& o, const model::ModelConfig& c) {
  const int64_t model_max = c.max_position_embeddings;
  if (o.max_model_len < 0) fail("--max-model-len must be >= 1, got {}", o.max_model_len);
  if (o.max_model_len == 0) return model_max > 0 ? model_max : kDefaultMaxModelLen;
  if (model_max > 0 && o.max_model_len > model_max)
    fail("--max-model-len {} exceeds the model's context length ({}, max_position_embeddings)",
         o.max_model_len, model_max);
  return o.max_model_len;
}

// Activation bytes one token of a step needs at the widest point of a layer, over the
// residual stream, the normalized input, the mixer output and the widest intermediate, plus
// the logits of the rows that need them. An estimate with a 1.5x margin (kernels' scratch).
size_t workspace_estimate(const model::ModelConfig& c, DType act, int64_t tokens, int64_t seqs) {
  int64_t widest = c.in_proj_rows + c.conv_dim + 2 * c.d_inner;
  widest = std::max(widest, c.q_size + 2 * c.kv_size + c.q_size);
  for (int64_t w : c.mlp_intermediate_sizes)
    widest = std::max(widest, 2 * w);
  widest = std::max(widest, 2 * (c.num_experts_per_tok * c.moe_intermediate_size +
                                 c.shared_intermediate + c.n_routed_experts));
  const size_t per_token = dtype_size(act) * static_cast<size_t>(4 * c.hidden_size + widest);
  const size_t logits = static_cast<size_t>(seqs) * static_cast<size_t>(c.vocab_size) *
                        (dtype_size(act) + 2 * sizeof(float));
  return static_cast<size_t>(1.5 * static_cast<double>(per_token * static_cast<size_t>(tokens) +
                                                       logits)) +
         (size_t{256} << 20);
}

}  // namespace

// The decode graphs: one per batch-size bucket, all captured over one input buffer (each bucket
// uses its leading elements) and one workspace region (intermediates of a replay are dead
// once its logits are sampled, and one stream runs one graph at a time).
struct Executor::Graphs {
  int64_t block_columns = 0;
  Tensor input;           // i32 [packed size of the largest bucket]
  Tensor region_storage;  // u8 [region bytes]: the shared workspace
  std::unique_ptr<RegionAllocator> region;
  struct Bucket {
    CudaGraph graph;
    Tensor logits;  // non-owning view of the bucket's logits inside the region
    bool failed = false;
  };
  std::map<int64_t, Bucket> buckets;
};

Executor::Executor(model::NemotronHModel& model, const ExecutorConfig& config)
    : model_(model), config_(config) {
  const model::ModelConfig& c = model.config();
  if (config.max_num_seqs < 1) fail("--max-num-seqs must be >= 1, got {}", config.max_num_seqs);
  if (config.block_size < 1 || config.block_size > 1024)
    fail("--block-size must be in [1, 1024], got {}", config.block_size);
  if (!(config.gpu_memory_utilization > 0.0 && config.gpu_memory_utilization <= 1.0))
    fail("--gpu-memory-utilization must be in (0, 1], got {}", config.gpu_memory_utilization);
  if (config.max_num_batched_tokens < 1)
    fail("--max-num-batched-tokens must be >= 1, got {}", config.max_num_batched_tokens);
  max_model_len_ = resolve_max_model_len(config, c);
  if (config.run_on) {
    if (config.run_on->device != config.device)
      fail("executor: the context to run on is on {}, not {}", device_name(config.run_on->device),
           device_name(config.device));
    ctx_ = config.run_on;
  } else {
    prepare_device(config.device, *ctx_);
  }
  DeviceScope scope(*ctx_);  // the caches, graphs and buffers below live in ctx_'s context

  // The caches' dtypes: KV in the activation dtype or e4m3; the SSM state as configured.
  model::ModelConfig cache_config = c;
  cache_config.mamba_ssm_cache_dtype =
      parse_ssm_dtype(config.mamba_ssm_cache_dtype, c.mamba_ssm_cache_dtype);
  // A given plan names its activation dtype (the gate's f32 host side of a bf16 model).
  const DType act = config.cache_plan ? config.cache_plan->act_dtype : model.act_dtype();
  const DType kv_dtype = parse_kv_dtype(config.kv_cache_dtype, act);
  if (kv_dtype != act && c.num_attention > 0 && !kv_cache_dtype_supported(config.device, kv_dtype))
    fail("--kv-cache-dtype {}: the {} attention kernels do not read an {} KV cache",
         config.kv_cache_dtype, device_name(config.device), dtype_name(kv_dtype));

  if (config.cache_plan) {
    plan_ = *config.cache_plan;
  } else if (config.device == Device::Host) {
    plan_ = config.host_cache_bytes > 0
                ? cache::plan_cache_for_budget(cache_config, config.host_cache_bytes,
                                               config.max_num_seqs, config.block_size, act,
                                               kv_dtype)
                : cache::plan_cache_for_tokens(cache_config, config.max_num_seqs, max_model_len_,
                                               config.block_size, act);
  } else {
    // Weights first (the first use of the device uploads them), then what is left of the
    // utilization budget, less the step workspace, goes to the caches.
    model.weights_on(config.device);
    const DeviceMemory mem = device_memory(config.device);
    const double budget = config.gpu_memory_utilization * static_cast<double>(mem.total);
    const double used = static_cast<double>(mem.total - mem.free);
    const size_t work = workspace_estimate(c, act, config.max_num_batched_tokens,
                                           std::max<int64_t>(config.max_num_seqs, 1));
    const double left = budget - used - static_cast<double>(work);
    if (left <= 0)
      fail(
          "--gpu-memory-utilization {:.2f} of {:.1f} GiB leaves nothing for the caches: {:.1f} "
          "GiB are in use (weights) and the step workspace needs about {:.1f} GiB",
          config.gpu_memory_utilization, mem.total / kGiB, used / kGiB, work / kGiB);
    plan_ = cache::plan_cache_for_budget(cache_config, static_cast<size_t>(left),
                                         config.max_num_seqs + 1, config.block_size, act,
                                         kv_dtype);
    plan_.state_slots -= 1;  // the scratch slot is added back below
    plan_.state_bytes = cache::MambaStatePool::bytes_per_slot(cache_config, act) *
                        static_cast<size_t>(plan_.state_slots);
    // More KV blocks than max_num_seqs sequences of max_model_len tokens can use are idle
    // memory until prefix caching shares them: keep them free for the allocator.
    const int64_t per_seq = (max_model_len_ + config.block_size - 1) / config.block_size;
    const int64_t useful = per_seq * config.max_num_seqs;
    if (plan_.num_blocks > useful) {
      plan_.num_blocks = useful;
      plan_.kv_bytes = cache::KvBlockPool::bytes_per_block(cache_config, config.block_size, kv_dtype) *
                       static_cast<size_t>(useful);
    }
  }
  plan_.act_dtype = act;
  // One slot more than requests may use: the scratch slot graph padding rows write.
  cache::CachePlan pools = plan_;
  pools.state_slots = plan_.state_slots + 1;
  cache_ = std::make_unique<cache::ModelCache>(cache_config, pools, kv_dtype, config.device);
  graphs_ = std::make_unique<Graphs>();
  if (config.device != Device::Host && !config.run_on) model.check_kernels(config.device);
}

Executor::~Executor() = default;

StepLimits Executor::limits() const {
  const model::ModelConfig& c = model_.config();
  StepLimits l;
  l.vocab_size = c.vocab_size;
  l.num_slots = c.num_mamba > 0 ? cache_->mamba.num_slots() : 0;
  l.num_blocks = cache_->kv.num_blocks();
  l.block_size = cache_->kv.block_size();
  l.need_kv = c.num_attention > 0;
  l.max_model_len = max_model_len_;
  return l;
}

std::string Executor::describe_pools() const {
  const int64_t per_seq = (max_model_len_ + plan_.block_size - 1) / plan_.block_size;
  const int64_t by_blocks =
      model_.config().num_attention > 0 ? plan_.num_blocks / std::max<int64_t>(per_seq, 1)
                                        : plan_.state_slots;
  return fmt::format(
      "caches: Mamba state {:.1f} MiB ({} slots of {:.2f} MiB), KV {:.1f} MiB ({} blocks of {} "
      "tokens, {}); maximum concurrency for {} tokens per request: {}",
      plan_.state_bytes / kMiB, plan_.state_slots,
      plan_.state_slots ? plan_.state_bytes / kMiB / static_cast<double>(plan_.state_slots) : 0.0,
      plan_.kv_bytes / kMiB, plan_.num_blocks, plan_.block_size,
      dtype_name(cache_->kv.dtype()), max_model_len_, std::min(by_blocks, plan_.state_slots));
}

StepInput Executor::prepare(const std::vector<SequenceChunk>& seqs,
                            const StepBuildOptions& options) {
  DeviceScope scope(*ctx_);
  StepLimits l = limits();
  l.num_slots = l.num_slots > 0 ? l.num_slots - 1 : 0;  // the scratch slot is not a request's
  return StepInput::build(seqs, l, ctx_->device, *ctx_, options);
}

Executor::InFlight& Executor::next_slot() {
  if (launched_ == 2) fail("executor: two steps are launched and not collected");
  std::unique_ptr<InFlight>& slot = ring_[(head_ + launched_) % 2];
  if (!slot) slot = std::make_unique<InFlight>();
  return *slot;
}

Tensor Executor::forward(const StepInput& step, LogitRows rows) {
  DeviceScope scope(*ctx_);
  return model_.forward(*ctx_, step, *cache_, rows);
}

SampledStep Executor::sample(const Tensor& logits, const SamplingBatch& batch) {
  DeviceScope scope(*ctx_);
  if (launched_ > 0) fail("executor: sample() while a launched step waits for collect()");
  enqueue_sample(logits, batch);
  return collect();
}

int64_t Executor::bucket_for(int64_t batch) {
  int64_t b = 1;
  while (b < batch) b *= 2;
  return b;
}

SampledStep Executor::step(const std::vector<SequenceChunk>& seqs, const SamplingBatch& batch) {
  DeviceScope scope(*ctx_);
  launch(seqs, batch);
  return collect();
}

void Executor::launch(const std::vector<SequenceChunk>& seqs, const SamplingBatch& batch) {
  DeviceScope scope(*ctx_);
  if (launched_ == 2) fail("executor: launch() with two steps already launched");
  const bool decode_only =
      !seqs.empty() && std::all_of(seqs.begin(), seqs.end(), [](const SequenceChunk& q) {
        return q.tokens.size() == 1 && q.num_computed > 0;
      });
  Tensor logits;
  if (ctx_->device != Device::Host && (config_.cuda_graphs || config_.pad_eager_decode) &&
      decode_only &&
      bucket_for(static_cast<int64_t>(seqs.size())) <= bucket_for(config_.max_num_seqs)) {
    logits = decode_graph_logits(seqs);
  } else {
    StepBuildOptions o;
    InFlight& slot = next_slot();
    if (ctx_->device != Device::Host) o.staging = [&slot](size_t words) { return slot.stage(words); };
    const StepInput step = prepare(seqs, o);
    take_pending(step);
    logits = forward(step, LogitRows::LastPerSequence);  // [B, V] f32
  }
  enqueue_sample(logits, batch);
}

void Executor::take_pending(const StepInput& step) {
  if (!step.has_pending()) return;
  if (!last_ids_.defined()) fail("executor: a pending token with no earlier step");
  ops::TakeIdsArgs take;
  take.ids = step.token_ids();
  take.src = step.token_src();
  take.prev = last_ids_;
  ops::run(*ctx_, take);
}

void Executor::copy_slots(const std::vector<std::pair<int32_t, int32_t>>& from_to) {
  DeviceScope scope(*ctx_);
  cache::MambaStatePool& m = cache_->mamba;
  for (const auto& [from, to] : from_to) {
    if (from == to || from < 0 || to < 0 || from >= m.num_slots() || to >= m.num_slots())
      fail("executor: bad Mamba slot copy {} -> {}", from, to);
    for (int64_t l = 0; l < m.num_layers(); ++l) {
      m.conv_states(l).select(to).copy_from(m.conv_states(l).select(from));
      m.ssm_states(l).select(to).copy_from(m.ssm_states(l).select(from));
    }
  }
}

void Executor::copy_blocks(const std::vector<std::pair<int32_t, int32_t>>& from_to) {
  DeviceScope scope(*ctx_);
  cache::KvBlockPool& kv = cache_->kv;
  for (const auto& [from, to] : from_to) {
    if (from == to || from < 0 || to < 0 || from >= kv.num_blocks() || to >= kv.num_blocks())
      fail("executor: bad KV block copy {} -> {}", from, to);
    for (int64_t l = 0; l < kv.num_layers(); ++l) {
      kv.k_cache(l).select(to).copy_from(kv.k_cache(l).select(from));
      kv.v_cache(l).select(to).copy_from(kv.v_cache(l).select(from));
    }
  }
}

std::vector<int64_t> Executor::captured_buckets() const {
  std::vector<int64_t> out;
  for (const auto& [b, g] : graphs_->buckets)
    if (g.graph.ready()) out.push_back(b);
  return out;
}

size_t Executor::graph_workspace_bytes() const {
  return graphs_->region_storage.defined() ? graphs_->region_storage.nbytes() : 0;
}

size_t Executor::graph_workspace_peak_bytes() const {
  return graphs_->region ? graphs_->region->peak_bytes() : 0;
}

Tensor Executor::decode_graph_logits(const std::vector<SequenceChunk>& seqs) {
  Graphs& G = *graphs_;
  const model::ModelConfig& c = model_.config();
  const int64_t B = static_cast<int64_t>(seqs.size());
  const int64_t bucket = bucket_for(B);
  const int64_t max_bucket = bucket_for(config_.max_num_seqs);
  if (!G.input.defined()) {
    G.block_columns =
        c.num_attention > 0 ? (max_model_len_ + plan_.block_size - 1) / plan_.block_size : 0;
    G.input = Tensor::empty(
        Shape{StepInput::packed_size(max_bucket, max_bucket, max_bucket, G.block_columns)},
        DType::I32, ctx_->device);
  }
  Graphs::Bucket& slot = G.buckets[bucket];
  StepBuildOptions o;
  o.block_columns = G.block_columns;
  o.pad_to_seqs = bucket;
  o.pad_slot = static_cast<int32_t>(cache_->mamba.num_slots() - 1);
  o.target = G.input.slice(0, 0, StepInput::packed_size(bucket, bucket, bucket, G.block_columns));
  InFlight& in_flight = next_slot();
  o.staging = [&in_flight](size_t words) { return in_flight.stage(words); };
  StepLimits l = limits();
  l.num_slots = l.num_slots > 0 ? l.num_slots - 1 : 0;
  const StepInput step = StepInput::build(seqs, l, ctx_->device, *ctx_, o);  // the one h2d copy
  take_pending(step);  // before the graph: it reads the ids from the input buffer
  if (!config_.cuda_graphs) return forward(step, LogitRows::LastPerSequence).slice(0, 0, B);

  if (!slot.graph.ready() && !slot.failed) {
    // Capture into the shared region, growing it (and recapturing every bucket) when a
    // capture needs more than it holds.
    for (int attempt = 0; attempt < 8 && !slot.graph.ready(); ++attempt) {
      if (!G.region) {
        const size_t bytes = workspace_estimate(c, model_.act_dtype(), max_bucket, max_bucket);
        G.region_storage = Tensor::empty(Shape{static_cast<int64_t>(bytes)}, DType::U8,
                                         ctx_->device);
        G.region = std::make_unique<RegionAllocator>(G.region_storage.raw(), bytes, Device::Cuda,
                                                     device_allocator(ctx_->device));
      }
      Tensor out;
      std::string why;
      G.region->reset();
      // The region is this thread's allocator for the capture (in front of the context's
      // arena, which DeviceScope made current); the process-wide allocator is not touched.
      DeviceAllocator* inner = set_thread_device_allocator(ctx_->device, G.region.get());
      bool ok = false;
      try {
        ok = slot.graph.capture(
            ctx_->stream,
            [&] { out = model_.forward(*ctx_, step, *cache_, LogitRows::LastPerSequence); }, &why);
      } catch (...) {
        set_thread_device_allocator(ctx_->device, inner);
        throw;
      }
      set_thread_device_allocator(ctx_->device, inner);
      if (ok) {
        // The graph writes its logits here on every replay; the view does not own them.
        slot.logits = Tensor::wrap(out.raw(), out.shape(), out.dtype(), ctx_->device, nullptr);
        break;
      }
      if (G.region->exhausted()) {
        // Every captured graph points into the old region: drop them all and start over.
        const size_t bigger = 2 * G.region_storage.nbytes();
        for (auto& [b, g] : G.buckets) {
          g.graph.reset();
          g.logits = Tensor{};
        }
        G.region.reset();
        G.region_storage = Tensor{};
        G.region_storage = Tensor::empty(Shape{static_cast<int64_t>(bigger)}, DType::U8,
                                         ctx_->device);
        G.region = std::make_unique<RegionAllocator>(G.region_storage.raw(), bigger, Device::Cuda,
                                                     device_allocator(ctx_->device));
        continue;
      }
      log::warn("decode graph for batch {} not captured ({}); that bucket runs eagerly", bucket,
               why);
      slot.failed = true;
    }
  }
  if (!slot.graph.ready()) return forward(step, LogitRows::LastPerSequence).slice(0, 0, B);
  slot.graph.replay(ctx_->stream);
  return slot.logits.slice(0, 0, B);  // the padding rows' logits are not sampled
}

}  // namespace strata::engine

namespace strata::engine {

ExecutorSequence::ExecutorSequence(Executor& executor, int64_t max_tokens)
    : ex_(executor), max_tokens_(max_tokens) {
  if (max_tokens < 1) fail("sequence: needs room for at least one token, got {}", max_tokens);
  if (max_tokens > executor.max_model_len())
    fail("sequence: {} tokens exceed the maximum model length {}", max_tokens,
         executor.max_model_len());
  cache::ModelCache& cache = executor.cache();
  slot_ = cache.mamba.allocate();
  if (slot_ >= executor.request_slots()) {
    cache.mamba.free(slot_);
    fail("sequence: every Mamba slot is in use");
  }
  if (!blocks_.ensure(cache.kv, max_tokens)) {
    cache.mamba.free(slot_);
    fail("sequence: the KV cache has no blocks for {} tokens ({} free of {})", max_tokens,
         cache.kv.num_free(), cache.kv.num_blocks());
  }
}

ExecutorSequence::~ExecutorSequence() {
  blocks_.release(ex_.cache().kv);
  ex_.cache().mamba.free(slot_);
}

SequenceChunk ExecutorSequence::chunk(std::vector<int32_t> tokens) const {
  if (computed_ + static_cast<int64_t>(tokens.size()) > max_tokens_)
    fail("sequence: {} more tokens after {} exceed the {} it was sized for", tokens.size(),
         computed_, max_tokens_);
  SequenceChunk c;
  c.slot = slot_;
  c.num_computed = computed_;
  c.tokens = std::move(tokens);
  c.blocks = &blocks_;
  return c;
}

Tensor ExecutorSequence::forward(std::vector<int32_t> tokens, LogitRows rows) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const StepInput step = ex_.prepare({chunk(std::move(tokens))});
  Tensor logits = ex_.forward(step, rows);
  computed_ += n;
  return logits;
}

SampledStep ExecutorSequence::step(std::vector<int32_t> tokens, const ops::SamplingRow& row) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  SamplingBatch batch;
  batch.rows = {row};
  SampledStep out = ex_.step({chunk(std::move(tokens))}, batch);
  computed_ += n;
  return out;
}

}  // namespace strata::engine
