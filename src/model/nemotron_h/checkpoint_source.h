// A checkpoint directory (io::Checkpoint: sharded index, model.safetensors or all *.safetensors)
// as a TensorSource for the weight loader.
#pragma once

#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "model/nemotron_h/tensor_source.h"

namespace strata::model {

class CheckpointSource : public TensorSource {
 public:
  explicit CheckpointSource(io::Checkpoint ckpt) : ckpt_(std::move(ckpt)) {}
  static CheckpointSource open(const std::string& dir) {
    return CheckpointSource(io::Checkpoint::open(dir));
  }

  std::string describe() const override { return ckpt_.dir(); }
  bool has(const std::string& name) const override { return ckpt_.has(name); }
  Tensor get(const std::string& name) const override { return ckpt_.get(name); }
  std::vector<std::string> names() const override { return ckpt_.names(); }
  size_t mapped_bytes() const override { return ckpt_.mapped_bytes(); }
  const io::Checkpoint& checkpoint() const { return ckpt_; }

 private:
  io::Checkpoint ckpt_;
};

}  // namespace strata::model
