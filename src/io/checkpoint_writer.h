// Writing a model directory in the Hugging Face layout that io::Checkpoint reads: one
// `model.safetensors`, or, when the tensors exceed one shard, `model-0000i-of-0000n.safetensors`
// plus `model.safetensors.index.json` ({"metadata": {"total_size"}, "weight_map"}). Tensors are
// produced on demand, one shard at a time, so a checkpoint larger than memory can be written:
// only the tensors of the shard being written are held.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace strata::io {

struct TensorToWrite {
  std::string name;
  size_t nbytes = 0;  // what produce() will return, for the shard split
};

// Splits tensors, in order, into shards of at most `max_shard_bytes` each (a tensor larger than
// the limit gets a shard of its own). Returns the index ranges [begin, end) of every shard.
std::vector<std::pair<size_t, size_t>> split_shards(const std::vector<TensorToWrite>& tensors,
                                                    size_t max_shard_bytes);

// "model.safetensors" for a single shard, else "model-00002-of-00005.safetensors" (1-based).
std::string shard_file_name(size_t index, size_t count);

struct WrittenCheckpoint {
  std::vector<std::string> files;  // shard file names, in order
  size_t total_bytes = 0;          // tensor bytes (the index's total_size)
};

// Writes every tensor of `tensors` into `dir` (created if missing), calling produce(i) for
// tensor i (a host tensor of exactly tensors[i].nbytes bytes) while its shard is written.
// Throws strata::Error naming the tensor when produce() returns the wrong size, and the path
// on I/O errors.
WrittenCheckpoint write_checkpoint(const std::string& dir,
                                   const std::vector<TensorToWrite>& tensors,
                                   const std::function<Tensor(size_t)>& produce,
                                   size_t max_shard_bytes,
                                   const std::map<std::string, std::string>& metadata = {});

// Writes `text` to `path` through a temporary file and a rename (no partial file on failure).
void write_text_file(const std::string& path, const std::string& text);

}  // namespace strata::io
