// Where weights come from: a checkpoint directory (io::Checkpoint, see checkpoint_source.h) or
// tensors built in memory (synthetic weights, tests). The weight loader only asks for names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace strata::model {

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual std::string describe() const = 0;  // for messages: the directory, or "synthetic"
  virtual bool has(const std::string& name) const = 0;
  // A host tensor (a view of the mapping for checkpoints); throws naming the tensor when absent.
  virtual Tensor get(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;  // sorted
  virtual size_t mapped_bytes() const { return 0; }
};

// Tensors held in memory under their checkpoint names.
class TensorMapSource : public TensorSource {
 public:
  explicit TensorMapSource(std::string description = "in-memory tensors")
      : description_(std::move(description)) {}
  void add(const std::string& name, Tensor t) { tensors_[name] = std::move(t); }
  std::string describe() const override { return description_; }
  bool has(const std::string& name) const override { return tensors_.count(name) > 0; }
  Tensor get(const std::string& name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail("{}: no tensor {}", description_, name);
    return it->second;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& [k, v] : tensors_)
      n.push_back(k);
    return n;
  }
  const std::map<std::string, Tensor>& tensors() const { return tensors_; }

 private:
  std::string description_;
  std::map<std::string, Tensor> tensors_;
};

}  // namespace strata::model
