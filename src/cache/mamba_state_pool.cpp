#include "cache/mamba_state_pool.h"

#include <cstring>

#include "core/check.h"

namespace strata::cache {

namespace {
Shape conv_shape(const model::ModelConfig& c, int64_t slots) {
  return Shape{slots, c.conv_kernel - 1, c.conv_dim};
}
Shape ssm_shape(const model::ModelConfig& c, int64_t slots) {
  return Shape{slots, c.mamba_num_heads, c.mamba_head_dim, c.ssm_state_size};
}

// Zeroes a contiguous tensor wherever it lives (device memory through one host->device copy).
void zero_fill(Tensor t) {
  if (t.device() == Device::Host) {
    std::memset(t.raw(), 0, t.nbytes());
  } else {
    t.copy_from(Tensor::zeros(t.shape(), t.dtype(), Device::Host));
  }
}
}  // namespace

size_t MambaStatePool::bytes_per_slot(const model::ModelConfig& c, DType conv_dtype) {
  const size_t conv = static_cast<size_t>(conv_shape(c, 1).numel()) * dtype_size(conv_dtype);
  const size_t ssm =
      static_cast<size_t>(ssm_shape(c, 1).numel()) * dtype_size(c.mamba_ssm_cache_dtype);
  return static_cast<size_t>(c.num_mamba) * (conv + ssm);
}

MambaStatePool::MambaStatePool(const model::ModelConfig& config, int64_t num_slots,
                               DType conv_dtype, Device device)
    : num_slots_(num_slots), device_(device) {
  if (num_slots < 1) fail("Mamba state pool: need at least one slot, got {}", num_slots);
  if (config.num_mamba > 0) {
    for (int64_t l = 0; l < config.num_mamba; ++l) {
      conv_.push_back(Tensor::empty(conv_shape(config, num_slots), conv_dtype, device));
      ssm_.push_back(
          Tensor::empty(ssm_shape(config, num_slots), config.mamba_ssm_cache_dtype, device));
    }
  }
  in_use_.assign(static_cast<size_t>(num_slots), false);
  for (int64_t s = num_slots - 1; s >= 0; --s)
    free_.push_back(static_cast<int32_t>(s));
}

size_t MambaStatePool::bytes() const {
  size_t b = 0;
  for (const auto& t : conv_)
    b += t.nbytes();
  for (const auto& t : ssm_)
    b += t.nbytes();
  return b;
}

void MambaStatePool::zero_slot(int32_t slot) {
  for (auto& t : conv_)
    zero_fill(t.select(slot));
  for (auto& t : ssm_)
    zero_fill(t.select(slot));
}

std::optional<int32_t> MambaStatePool::try_allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t s = free_.back();
  free_.pop_back();
  in_use_[static_cast<size_t>(s)] = true;
  zero_slot(s);
  return s;
}

int32_t MambaStatePool::allocate() {
  auto s = try_allocate();
  if (!s) fail("Mamba state pool: all {} slots are in use", num_slots_);
  return *s;
}

bool MambaStatePool::in_use(int32_t slot) const {
  return slot >= 0 && slot < num_slots_ && in_use_[static_cast<size_t>(slot)];
}

void MambaStatePool::free(int32_t slot) {
  STRATA_CHECK(in_use(slot), "freeing Mamba state slot {} which is not in use", slot);
  in_use_[static_cast<size_t>(slot)] = false;
  free_.push_back(slot);
}

Tensor& MambaStatePool::conv_states(int64_t l) {
  STRATA_CHECK(l >= 0 && l < num_layers(), "Mamba layer {} of {}", l, num_layers());
  return conv_[static_cast<size_t>(l)];
}

Tensor& MambaStatePool::ssm_states(int64_t l) {
  STRATA_CHECK(l >= 0 && l < num_layers(), "Mamba layer {} of {}", l, num_layers());
  return ssm_[static_cast<size_t>(l)];
}

}  // namespace strata::cache
