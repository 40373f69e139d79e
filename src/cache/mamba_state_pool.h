// MambaStatePool: the recurrent state of every Mamba layer for a fixed number of sequence
// slots (DESIGN principle 5, spec 4.1). Per Mamba layer:
//   conv_states [S, K-1, conv_dim]  the last K-1 RAW (pre-bias, pre-activation) xBC rows,
//                                   oldest first, in the activation dtype
//   ssm_states  [S, Hm, P, N]       in mamba_ssm_cache_dtype (f32 by default)
// The engine owns slot lifetimes (allocate/free); the model owns what the bytes mean. A slot is
// zeroed when it is handed out, so a new sequence never sees an old one's state.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"
#include "model/nemotron_h/config.h"

namespace strata::cache {

class MambaStatePool {
 public:
  // `conv_dtype` is the activation dtype; the SSM dtype comes from the config.
  MambaStatePool(const model::ModelConfig& config, int64_t num_slots, DType conv_dtype,
                 Device device);

  // Bytes one slot takes over all Mamba layers (conv + SSM).
  static size_t bytes_per_slot(const model::ModelConfig& config, DType conv_dtype);

  int64_t num_slots() const { return num_slots_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_layers() const { return static_cast<int64_t>(conv_.size()); }
  Device device() const { return device_; }
  size_t bytes() const;

  // A zeroed slot, or nullopt when all are in use.
  std::optional<int32_t> try_allocate();
  // A zeroed slot; throws strata::Error when the pool is exhausted.
  int32_t allocate();
  // Returns a slot; freeing a slot that is not in use is a programming error (throws).
  void free(int32_t slot);
  bool in_use(int32_t slot) const;

  // Per Mamba layer (index among Mamba layers, ModelConfig::kind_index).
  Tensor& conv_states(int64_t mamba_layer);  // [S, K-1, conv_dim]
  Tensor& ssm_states(int64_t mamba_layer);   // [S, Hm, P, N]

 private:
  void zero_slot(int32_t slot);

  int64_t num_slots_;
  Device device_;
  std::vector<Tensor> conv_, ssm_;
  std::vector<int32_t> free_;  // a stack: slot 0 first, then the most recently freed
  std::vector<bool> in_use_;
};

}  // namespace strata::cache
