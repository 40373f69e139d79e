#include "model/nemotron_h/step.h"

#include <algorithm>

#include "core/check.h"

namespace strata::model {

StepInput StepInput::build(const std::vector<SequenceChunk>& seqs, int64_t block_size, bool need_kv,
                           Device device, OpContext& ctx, const StepBuildOptions& options) {
  if (seqs.empty()) fail("step: no sequences");
  StepInput s;
  s.num_seqs_ = static_cast<int64_t>(seqs.size());
  int64_t max_blocks = 0;
  s.decode_only_ = true;
  s.host_cu_seqlens_.push_back(0);
  for (size_t b = 0; b < seqs.size(); ++b) {
    const SequenceChunk& q = seqs[b];
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (len < 1) fail("step: sequence {} has no tokens", b);
    if (q.num_computed < 0) fail("step: sequence {} has a negative computed-token count", b);
    s.max_q_len_ = std::max(s.max_q_len_, len);
    s.decode_only_ = s.decode_only_ && len == 1 && q.num_computed > 0;
    s.num_tokens_ += len;
    if (s.num_tokens_ > INT32_MAX) fail("step: too many tokens");
    s.host_cu_seqlens_.push_back(static_cast<int32_t>(s.num_tokens_));
    if (need_kv) {
      if (!q.blocks) fail("step: sequence {} has no KV block table", b);
      const int64_t total = q.num_computed + len;
      if (q.blocks->capacity(block_size) < total)
        fail("step: sequence {} needs {} KV positions but its blocks hold {}", b, total,
             q.blocks->capacity(block_size));
      max_blocks = std::max(max_blocks, (total + block_size - 1) / block_size);
    }
  }
  const int64_t T = s.num_tokens_, B = s.num_seqs_;
  if (options.block_columns > 0) {
    if (options.block_columns < max_blocks)
      fail("step: the block table needs {} columns, more than the fixed {}", max_blocks,
           options.block_columns);
    max_blocks = options.block_columns;
  }

  // Layout of the packed buffer: ids | cu_seqlens | slots | has_initial | context_lens |
  // last rows | slot_mapping | block_tables.
  const int64_t off_ids = 0, off_cu = off_ids + T, off_slots = off_cu + B + 1,
                off_init = off_slots + B, off_ctx = off_init + B, off_last = off_ctx + B,
                off_map = off_last + B, off_bt = off_map + T, total = off_bt + B * max_blocks;
  Tensor host = Tensor::zeros(Shape{total}, DType::I32, Device::Host);
  int32_t* p = host.data<int32_t>();
  int64_t t = 0;
  for (int64_t b = 0; b < B; ++b) {
    const SequenceChunk& q = seqs[static_cast<size_t>(b)];
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    for (int64_t i = 0; i < len; ++i) {
      p[off_ids + t + i] = q.tokens[static_cast<size_t>(i)];
      p[off_map + t + i] = need_kv ? q.blocks->slot(q.num_computed + i, block_size) : -1;
    }
    t += len;
    p[off_cu + b + 1] = static_cast<int32_t>(t);
    p[off_slots + b] = q.slot;
    p[off_init + b] = q.num_computed > 0 ? 1 : 0;
    p[off_ctx + b] = static_cast<int32_t>(q.num_computed + len);
    p[off_last + b] = static_cast<int32_t>(t - 1);
    if (need_kv) {
      const auto& blocks = q.blocks->blocks();
      const int64_t used = (q.num_computed + len + block_size - 1) / block_size;
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
    s.packed_.copy_from(host);
    if (device != Device::Host) ++ctx.h2d_copies;
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
  s.block_tables_ = s.packed_.slice(0, off_bt, B * max_blocks).reshape(Shape{B, max_blocks});
  return s;
}

}  // namespace strata::model
