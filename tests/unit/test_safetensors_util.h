// Helpers shared by the io tests: a scratch directory, random bytes, hand-built files.
#pragma once

#include "../common/scratch_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace strata::io::test {

using ScratchDir = ::strata::test_util::ScratchDir;

inline std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out)
    b = static_cast<uint8_t>(rng());
  return out;
}

// 8-byte little-endian header length `n` (may differ from header.size() on purpose), the header
// text, then `data_bytes` random bytes.
inline std::vector<uint8_t> safetensors_bytes_with_length(uint64_t n, const std::string& header,
                                                          size_t data_bytes, uint64_t seed = 7) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  const auto data = random_bytes(data_bytes, seed);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline std::vector<uint8_t> safetensors_bytes(const std::string& header, size_t data_bytes,
                                              uint64_t seed = 7) {
  return safetensors_bytes_with_length(header.size(), header, data_bytes, seed);
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace strata::io::test
