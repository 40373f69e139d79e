#include "io/checkpoint_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/admission.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace strata::io {

namespace fs = std::filesystem;

std::vector<std::pair<size_t, size_t>> split_shards(const std::vector<TensorToWrite>& tensors,
                                                    size_t max_shard_bytes) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0, bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t b = tensors[i].nbytes;
    if (i > begin && bytes + b > max_shard_bytes) {
      out.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += b;
  }
  if (begin < tensors.size()) out.emplace_back(begin, tensors.size());
  return out;
}

std::string shard_file_name(size_t index, size_t count) {
  if (count == 1) return "model.safetensors";
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return buf;
}

void write_text_file(const std::string& path, const std::string& text) {
  write_file_atomic(path, text);
}

WrittenCheckpoint write_checkpoint(const std::string& dir,
                                   const std::vector<TensorToWrite>& tensors,
                                   const std::function<Tensor(size_t)>& produce,
                                   size_t max_shard_bytes,
                                   const std::map<std::string, std::string>& metadata) {
  if (tensors.empty()) fail("{}: no tensors to write", dir);
  std::error_code ec;
  const auto shards = split_shards(tensors, max_shard_bytes);
  // Admission: the files on disk, and one shard's tensors held in memory at a time.
  ResourceNeed need;
  // statvfs needs an existing directory: the nearest one the checkpoint will be under.
  fs::path under = fs::absolute(dir, ec);
  while (!under.empty() && under != under.parent_path() && !fs::is_directory(under, ec))
    under = under.parent_path();
  need.disk_path = under.string();
  for (const auto& [begin, end] : shards) {
    uint64_t shard_bytes = 0;
    for (size_t i = begin; i < end; ++i)
      shard_bytes += tensors[i].nbytes;
    need.disk_bytes += shard_bytes;
    need.host_bytes = std::max<uint64_t>(need.host_bytes, shard_bytes);
  }
  check_fits(need, fmt::format("writing the checkpoint {}", dir));
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create directory: {}", dir, ec.message());
  WrittenCheckpoint out;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shard_file_name(s, shards.size());
    std::vector<std::pair<std::string, Tensor>> batch;
    for (size_t i = shards[s].first; i < shards[s].second; ++i) {
      Tensor t = produce(i);
      if (!t.defined() || t.nbytes() != tensors[i].nbytes)
        fail("{}: tensor {}: produced {} bytes, planned {}", dir, tensors[i].name,
             t.defined() ? t.nbytes() : 0, tensors[i].nbytes);
      out.total_bytes += t.nbytes();
      weight_map[tensors[i].name] = file;
      batch.emplace_back(tensors[i].name, std::move(t));
    }
    write_safetensors((fs::path(dir) / file).string(), batch, metadata);
    out.files.push_back(file);
  }
  if (shards.size() > 1) {
    nlohmann::json index;
    index["metadata"] = {{"total_size", out.total_bytes}};
    index["weight_map"] = std::move(weight_map);
    write_text_file((fs::path(dir) / "model.safetensors.index.json").string(),
                    index.dump(2) + "\n");
  }
  return out;
}

}  // namespace strata::io
