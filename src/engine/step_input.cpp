#include "engine/step_input.h"

#include <algorithm>

#include "core/check.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::engine {

namespace {

// Every check a step needs, before anything is written (the step must fail whole).
void validate(const std::vector<SequenceChunk>& seqs, const StepLimits& lim) {
  if (seqs.empty()) fail("step: no sequences");
  std::vector<int32_t> seen_slots;
  seen_slots.reserve(seqs.size());
  for (size_t b = 0; b < seqs.size(); ++b) {
    const SequenceChunk& q = seqs[b];
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (len < 1) fail("step: sequence {} has no tokens", b);
    if (q.num_computed < 0) fail("step: sequence {} has a negative computed-token count", b);
    const int64_t total = q.num_computed + len;
    if (total > INT32_MAX) fail("step: sequence {} is too long ({} tokens)", b, total);
    if (lim.max_model_len > 0 && total > lim.max_model_len)
      fail("step: sequence {} reaches {} tokens, beyond the maximum model length {}", b, total,
           lim.max_model_len);
    if (q.pending_row >= 0 && (len != 1 || q.num_computed < 1))
      fail("step: sequence {} takes its token from the previous step but is not a decode row", b);
    for (size_t i = 0; i < q.tokens.size() && q.pending_row < 0; ++i)
      if (q.tokens[i] < 0 || q.tokens[i] >= lim.vocab_size)
        fail("step: sequence {} token {} has id {}, outside the vocabulary [0, {})", b, i,
             q.tokens[i], lim.vocab_size);
    if (lim.num_slots > 0) {
      if (q.slot < 0 || q.slot >= lim.num_slots)
        fail("step: sequence {} uses Mamba slot {}, outside the pool [0, {})", b, q.slot,
             lim.num_slots);
      seen_slots.push_back(q.slot);
    }
    if (lim.need_kv) {
      if (!q.blocks) fail("step: sequence {} has no KV block table", b);
      const int64_t needed = (total + lim.block_size - 1) / lim.block_size;
      const auto& blocks = q.blocks->blocks();
      if (static_cast<int64_t>(blocks.size()) < needed)
        fail("step: sequence {} needs {} KV positions but its blocks hold {}", b, total,
             q.blocks->capacity(lim.block_size));
      for (int64_t j = 0; j < needed; ++j)
        if (blocks[static_cast<size_t>(j)] < 0 || blocks[static_cast<size_t>(j)] >= lim.num_blocks)
          fail("step: sequence {} block {} is {}, outside the pool [0, {})", b, j,
               blocks[static_cast<size_t>(j)], lim.num_blocks);
    }
  }
  std::sort(seen_slots.begin(), seen_slots.end());
  const auto dup = std::adjacent_find(seen_slots.begin(), seen_slots.end());
  if (dup != seen_slots.end()) fail("step: Mamba slot {} is used by two sequences", *dup);
}

bool is_decode(const SequenceChunk& q) { return q.tokens.size() == 1 && q.num_computed > 0; }

}  // namespace

StepInput StepInput::build(const std::vector<SequenceChunk>& seqs, const StepLimits& lim,
                           Device device, OpContext& ctx, const StepBuildOptions& options) {
  validate(seqs, lim);
  StepInput s;
  const int64_t real_b = static_cast<int64_t>(seqs.size());
  // Decode rows lead: the longest prefix of single-token continuations. A decode row after a
  // prefill row is run by the prefill kernels (correct for q_len 1 with an initial state).
  int64_t D = 0;
  while (D < real_b && is_decode(seqs[static_cast<size_t>(D)])) ++D;
  const int64_t pad = options.pad_to_seqs > real_b ? options.pad_to_seqs - real_b : 0;
  if (pad > 0 && D != real_b) fail("step: only decode-only steps are padded to a graph bucket");
  s.num_real_seqs_ = real_b;
  s.num_seqs_ = real_b + pad;
  s.num_decode_ = D + pad;
  s.host_cu_seqlens_.push_back(0);
  int64_t max_blocks = 0;
  for (const SequenceChunk& q : seqs) {
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    s.max_q_len_ = std::max(s.max_q_len_, len);
    s.num_tokens_ += len;
    s.host_cu_seqlens_.push_back(static_cast<int32_t>(s.num_tokens_));
    if (lim.need_kv)
      max_blocks = std::max(max_blocks, (q.num_computed + len + lim.block_size - 1) / lim.block_size);
  }
  for (int64_t i = 0; i < pad; ++i) {
    ++s.num_tokens_;
    s.host_cu_seqlens_.push_back(static_cast<int32_t>(s.num_tokens_));
  }
  if (s.num_tokens_ > INT32_MAX) fail("step: too many tokens");
  for (int64_t b = D; b < real_b; ++b)
    s.prefill_max_q_len_ = std::max(s.prefill_max_q_len_,
                                    static_cast<int64_t>(seqs[static_cast<size_t>(b)].tokens.size()));
  const int64_t T = s.num_tokens_, B = s.num_seqs_, Dn = s.num_decode_, P = B - Dn;
  if (options.block_columns > 0) {
    if (options.block_columns < max_blocks)
      fail("step: the block table needs {} columns, more than the fixed {}", max_blocks,
           options.block_columns);
    max_blocks = options.block_columns;
  }

  // Layout of the packed buffer: ids | cu_seqlens | slots | has_initial | context_lens |
  // last rows | slot_mapping | prefill cu_seqlens | block_tables | token sources.
  const int64_t off_ids = 0, off_cu = off_ids + T, off_slots = off_cu + B + 1,
                off_init = off_slots + B, off_ctx = off_init + B, off_last = off_ctx + B,
                off_map = off_last + B, off_pcu = off_map + T, off_bt = off_pcu + P + 1,
                off_src = off_bt + B * max_blocks, total = off_src + T;
  STRATA_CHECK_EQ(total, packed_size(T, B, Dn, max_blocks));
  const bool staged = options.staging && device != Device::Host;
  Tensor host = staged ? Tensor::wrap(options.staging(static_cast<size_t>(total)), Shape{total},
                                      DType::I32, Device::Host, nullptr)
                       : Tensor::zeros(Shape{total}, DType::I32, Device::Host);
  int32_t* p = host.data<int32_t>();
  if (staged) std::fill(p, p + total, 0);
  int64_t t = 0;
  for (int64_t b = 0; b < B; ++b) {
    const bool padding = b >= real_b;
    const SequenceChunk* q = padding ? nullptr : &seqs[static_cast<size_t>(b)];
    const int64_t len = padding ? 1 : static_cast<int64_t>(q->tokens.size());
    const int64_t computed = padding ? 1 : q->num_computed;
    const bool pending = !padding && q->pending_row >= 0;
    s.has_pending_ = s.has_pending_ || pending;
    for (int64_t i = 0; i < len; ++i) {
      p[off_ids + t + i] = padding || pending ? 0 : q->tokens[static_cast<size_t>(i)];
      p[off_src + t + i] = pending ? q->pending_row : -1;
      p[off_map + t + i] =
          lim.need_kv && !padding ? q->blocks->slot(computed + i, lim.block_size) : -1;
    }
    t += len;
    p[off_cu + b + 1] = static_cast<int32_t>(t);
    p[off_slots + b] = padding ? options.pad_slot : q->slot;
    p[off_init + b] = computed > 0 ? 1 : 0;
    // A padding row attends to one (stale) position of block 0 and writes nothing.
    p[off_ctx + b] = static_cast<int32_t>(computed + len);
    p[off_last + b] = static_cast<int32_t>(t - 1);
    if (b >= Dn) p[off_pcu + (b - Dn) + 1] = static_cast<int32_t>(t - Dn);
    if (lim.need_kv && !padding) {
      const auto& blocks = q->blocks->blocks();
      const int64_t used = (computed + len + lim.block_size - 1) / lim.block_size;
      for (int64_t j = 0; j < used; ++j)
        p[off_bt + b * max_blocks + j] = blocks[static_cast<size_t>(j)];
    }
  }

  if (options.target.defined()) {
    const Tensor& dst = options.target;
    if (dst.device() != device || dst.dtype() != DType::I32 || dst.numel() != total ||
        !dst.is_contiguous())
      fail("step: the target buffer {} does not fit the packed step input (i32[{}] on {})",
           dst.str(), total, device_name(device));
    s.packed_ = dst;
    if (staged) {
      cuda::context_of(ctx).copy_h2d_async(dst.raw(), p, host.nbytes());
    } else {
      s.packed_.copy_from(host);
    }
    if (device != Device::Host) ++ctx.h2d_copies;
  } else if (staged) {
    s.packed_ = Tensor::empty(Shape{total}, DType::I32, device);
    cuda::context_of(ctx).copy_h2d_async(s.packed_.raw(), p, host.nbytes());
    ++ctx.h2d_copies;
  } else if (device == Device::Host) {
    s.packed_ = host;
  } else {
    s.packed_ = host.to(device);
    ++ctx.h2d_copies;
  }
  s.token_ids_ = s.packed_.slice(0, off_ids, T);
  s.cu_seqlens_ = s.packed_.slice(0, off_cu, B + 1);
  s.slots_ = s.packed_.slice(0, off_slots, B);
  s.has_initial_ = s.packed_.slice(0, off_init, B);
  s.context_lens_ = s.packed_.slice(0, off_ctx, B);
  s.last_rows_ = s.packed_.slice(0, off_last, B);
  s.slot_mapping_ = s.packed_.slice(0, off_map, T);
  s.prefill_cu_seqlens_ = s.packed_.slice(0, off_pcu, P + 1);
  s.block_tables_ = s.packed_.slice(0, off_bt, B * max_blocks).reshape(Shape{B, max_blocks});
  s.token_src_ = s.packed_.slice(0, off_src, T);
  return s;
}

StepPart StepInput::decode_part() const {
  StepPart d;
  d.first_seq = 0;
  d.num_seqs = num_decode_;
  d.first_token = 0;
  d.num_tokens = num_decode_;
  d.max_q_len = num_decode_ > 0 ? 1 : 0;
  d.cu_seqlens = cu_seqlens_.slice(0, 0, num_decode_ + 1);
  d.slots = slots_.slice(0, 0, num_decode_);
  d.has_initial = has_initial_.slice(0, 0, num_decode_);
  d.context_lens = context_lens_.slice(0, 0, num_decode_);
  d.block_tables = block_tables_.slice(0, 0, num_decode_);
  return d;
}

StepPart StepInput::prefill_part() const {
  StepPart p;
  p.first_seq = num_decode_;
  p.num_seqs = num_seqs_ - num_decode_;
  p.first_token = num_decode_;
  p.num_tokens = num_tokens_ - num_decode_;
  p.max_q_len = prefill_max_q_len_;
  p.cu_seqlens = prefill_cu_seqlens_;
  p.slots = slots_.slice(0, p.first_seq, p.num_seqs);
  p.has_initial = has_initial_.slice(0, p.first_seq, p.num_seqs);
  p.context_lens = context_lens_.slice(0, p.first_seq, p.num_seqs);
  p.block_tables = block_tables_.slice(0, p.first_seq, p.num_seqs);
  return p;
}

}  // namespace strata::engine
