// Where the weights live (DESIGN principle 4). The loaded weights are views of the checkpoint
// mapping (or, for dummy weights, already on the device); a run on another device gets its own
// copy, made on the first use of that device: one slot per tensor, in ModelWeights'
// for_each_tensor order, so a copy is found by its position in the weights (the slot), never
// by the address of the tensor it was made from. Copies go tensor by tensor, each staged once
// (a contiguous host copy only for a strided view) and the staging freed as soon as its upload
// ends. make_resident(d) keeps only the copy on d and releases the rest (host mappings,
// converted host copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "model/nemotron_h/weights.h"

namespace strata::model {

struct TransferStats {
  int64_t tensors = 0;      // tensors copied to the device (shared ones not counted)
  size_t bytes = 0;         // bytes copied
  size_t staging_peak = 0;  // largest staging buffer held at once
  double seconds = 0;
};

class WeightResidency {
 public:
  explicit WeightResidency(ModelWeights loaded) : loaded_(std::move(loaded)) {}

  // The weights with every tensor in the memory of `device`: the loaded weights when they all
  // live there, else the copy for `device`, made on the first call.
  const ModelWeights& on(Device device);
  // Makes the copy on `device` the only one (drops the loaded weights and other copies).
  void make_resident(Device device);

  const ModelWeights& loaded() const { return loaded_; }
  ModelWeights& loaded() { return loaded_; }
  bool all_on(Device device) const;
  // Bytes of tensors living on `device` in the loaded weights or its copy.
  size_t bytes_on(Device device) const;
  const TransferStats& transfers(Device device) const;

 private:
  ModelWeights loaded_;
  std::map<Device, ModelWeights> copies_;
  std::map<Device, TransferStats> stats_;
};

// Every tensor of `w` that is not on `device` replaced by a copy there (the others shared).
ModelWeights copy_weights_to(const ModelWeights& w, Device device, TransferStats* stats);
// One layer's weights on `device` (the per-block gate copies one layer at a time).
LayerWeights copy_layer_to(const LayerWeights& layer, Device device, TransferStats* stats);

}  // namespace strata::model
