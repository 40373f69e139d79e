// Checkpoint: every safetensors file of a model directory behind one name -> tensor lookup.
//
// Which files: DIR/model.safetensors.index.json when present (HF sharded layout: "weight_map"
// maps tensor name -> shard file name); else DIR/model.safetensors; else every *.safetensors in
// DIR. With an index, every shard it names must exist and hold every tensor the index assigns to
// it (errors name the index, the tensor and the shard); shard names must be plain file names in
// DIR. Tensors a shard holds that the index does not list are still served (vLLM loads every
// tensor of every shard) and counted in the log. A tensor name present in two files is an error
// in every layout. All files are mapped read-only; tensors view the mappings (see safetensors.h).
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "io/safetensors.h"

namespace strata::io {

class Checkpoint {
 public:
  static Checkpoint open(const std::string& dir);

  bool has(const std::string& name) const;
  // The tensor, viewing the mapped file; throws naming the tensor and the directory if absent.
  Tensor get(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;      // throws like get()
  const std::string& file_of(const std::string& name) const;  // path of the file holding it
  std::vector<std::string> names() const;                     // sorted
  size_t size() const { return where_.size(); }               // number of tensors
  size_t mapped_bytes() const;                                // sum of the file sizes
  size_t copied_bytes() const;  // bytes copied for unaligned tensors (normally 0)
  const std::string& dir() const { return dir_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }

 private:
  size_t file_index(const std::string& name) const;  // throws when absent
  void add_file(SafetensorsFile f);                  // registers its tensors, rejects duplicates

  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, size_t> where_;  // tensor name -> index into files_
};

}  // namespace strata::io
