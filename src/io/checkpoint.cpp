#include "io/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"

namespace strata::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";
// {"metadata": {...}, "weight_map": {...}}; metadata is free-form, so allow some nesting.
constexpr int kIndexMaxDepth = 8;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// weight_map of the index: tensor name -> shard file name, validated.
std::map<std::string, std::string> read_weight_map(const fs::path& index_path) {
  const std::string index = index_path.string();
  const nlohmann::json root = parse_json_strict(
      read_text_file(index, "shard index", kIndexMaxBytes), index, kIndexMaxDepth);
  if (!root.is_object()) fail("{}: is a JSON {}, not an object", index, json_type_name(root));
  if (!root.contains("weight_map")) fail("{}: has no \"weight_map\"", index);
  const auto& wm = root["weight_map"];
  if (!wm.is_object())
    fail("{}: \"weight_map\" is a JSON {}, not an object", index, json_type_name(wm));
  std::map<std::string, std::string> out;
  for (const auto& [tensor, shard] : wm.items()) {
    if (!shard.is_string())
      fail("{}: tensor {}: shard is a JSON {}, not a file name", index, quote_name(tensor),
           json_type_name(shard));
    const auto& s = shard.get_ref<const std::string&>();
    // Shards live next to the index: a path could point anywhere on the machine.
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
        s.find('\\') != std::string::npos || s.find('\0') != std::string::npos)
      fail("{}: tensor {}: shard {} is not a plain file name in the checkpoint directory", index,
           quote_name(tensor), quote_name(s));
    out.emplace(tensor, s);
  }
  return out;
}

}  // namespace

void Checkpoint::add_file(SafetensorsFile f) {
  const size_t idx = files_.size();
  for (const auto& t : f.tensors()) {
    const auto [it, inserted] = where_.emplace(t.name, idx);
    if (!inserted)
      fail("{}: tensor {} is in two files: {} and {}", dir_, quote_name(t.name),
           files_[it->second].path(), f.path());
  }
  files_.push_back(std::move(f));
}

Checkpoint Checkpoint::open(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("{}: not a directory (expected a checkpoint directory)", dir);
  Checkpoint ck;
  ck.dir_ = dir;
  const fs::path root(dir);

  if (is_file(root / kIndexName)) {
    const fs::path index_path = root / kIndexName;
    const std::string index = index_path.string();
    const auto weight_map = read_weight_map(index_path);
    std::set<std::string> shards;
    for (const auto& [tensor, shard] : weight_map) {
      if (shards.count(shard)) continue;
      if (!is_file(root / shard))
        fail("{}: tensor {} is in shard {}, which does not exist in {}", index, quote_name(tensor),
             quote_name(shard), dir);
      shards.insert(shard);
    }
    std::map<std::string, size_t> shard_file;  // shard name -> index into files_
    for (const auto& shard : shards) {
      shard_file[shard] = ck.files_.size();
      ck.add_file(SafetensorsFile::open((root / shard).string()));
    }
    for (const auto& [tensor, shard] : weight_map) {
      const SafetensorsFile& f = ck.files_[shard_file.at(shard)];
      if (!f.find(tensor))
        fail("{}: tensor {} is listed in shard {}, but that file has no such tensor", index,
             quote_name(tensor), quote_name(shard));
    }
    const size_t unlisted = ck.where_.size() - weight_map.size();
    if (unlisted)
      log::info("{}: {} tensor(s) in its shards are not listed in the index; loading them too",
                index, unlisted);
    return ck;
  }

  if (is_file(root / kSingleName)) {
    ck.add_file(SafetensorsFile::open((root / kSingleName).string()));
    return ck;
  }

  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (entry.path().extension() == ".safetensors" && is_file(entry.path()))
      found.push_back(entry.path().string());
  if (ec) fail("{}: cannot list the directory: {}", dir, ec.message());
  if (found.empty())
    fail("{}: no {}, {} or *.safetensors file in this directory", dir, kIndexName, kSingleName);
  std::sort(found.begin(), found.end());
  for (const auto& path : found)
    ck.add_file(SafetensorsFile::open(path));
  return ck;
}

size_t Checkpoint::file_index(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end())
    fail("{}: no tensor {} in this checkpoint ({} tensors in {} files)", dir_, quote_name(name),
         where_.size(), files_.size());
  return it->second;
}

bool Checkpoint::has(const std::string& name) const {
  return where_.count(name) != 0;
}

Tensor Checkpoint::get(const std::string& name) const {
  return files_[file_index(name)].tensor(name);
}

const TensorInfo& Checkpoint::info(const std::string& name) const {
  return *files_[file_index(name)].find(name);
}

const std::string& Checkpoint::file_of(const std::string& name) const {
  return files_[file_index(name)].path();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, _] : where_)
    out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

size_t Checkpoint::mapped_bytes() const {
  size_t n = 0;
  for (const auto& f : files_)
    n += f.mapped_bytes();
  return n;
}

size_t Checkpoint::copied_bytes() const {
  size_t n = 0;
  for (const auto& f : files_)
    n += f.copied_bytes();
  return n;
}

}  // namespace strata::io
