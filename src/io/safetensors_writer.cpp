// write_safetensors: the layout the safetensors libraries write (see safetensors.h).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "core/check.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace strata::io {

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> seen;
  for (const auto& [name, t] : tensors) {
    if (name.empty()) fail("{}: a tensor has an empty name", path);
    if (name == "__metadata__") fail("{}: \"__metadata__\" is reserved, not a tensor name", path);
    if (!seen.insert(name).second) fail("{}: tensor \"{}\" is given twice", path, name);
    if (!t.defined()) fail("{}: tensor \"{}\" is undefined", path, name);
    if (t.device() != Device::Host)
      fail("{}: tensor \"{}\" is {}; copy it to the host before writing", path, name, t.str());
  }

  // Widest elements first, then by name: with the header padded to 8 bytes every tensor then
  // starts at a multiple of its element size, as the safetensors libraries arrange it.
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t sa = dtype_size(tensors[a].second.dtype());
    const size_t sb = dtype_size(tensors[b].second.dtype());
    return sa != sb ? sa > sb : tensors[a].first < tensors[b].first;
  });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    header[name] = {{"dtype", dtype_to_safetensors(t.dtype())},
                    {"shape", t.shape().vec()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::type_error& e) {
    fail("{}: a tensor name or metadata string is not valid UTF-8: {}", path, e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFile out(path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(len, 8);
  out.write(text.data(), text.size());
  for (size_t i : order) {
    const Tensor c = tensors[i].second.contiguous();  // a view when already contiguous
    out.write(c.raw(), c.nbytes());
  }
  out.commit();
}

}  // namespace strata::io
