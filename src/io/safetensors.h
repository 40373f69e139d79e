// safetensors files: a validated header parser, a memory-mapped reader and a writer.
//
// Format: u64 little-endian N, then N bytes of UTF-8 JSON (an object mapping tensor names to
// {"dtype", "shape", "data_offsets": [begin, end]} plus an optional "__metadata__" object of
// strings), then the data area; offsets are relative to the data area.
//
// Validation follows the rules of the safetensors Rust crate (the reference implementation),
// which every file written by the Python library satisfies:
//   * the file has at least 8 bytes; N <= 100,000,000 and 8 + N <= file size;
//   * the header is valid UTF-8 and one JSON object; each entry has a known dtype, a shape of
//     non-negative integers (rank <= kMaxDims here) and data_offsets [begin, end], begin <= end;
//   * numel * dtype size == end - begin, computed without overflow;
//   * sorted by offset, the tensors tile the data area exactly: each begins where the previous
//     one ended (no gap, no overlap) and the last ends at the end of the file.
// Stricter than the crate (each would be a malformed or ambiguous file): a duplicate key in any
// object, an entry field other than dtype/shape/data_offsets, a non-string metadata value, and
// JSON nested deeper than the schema (3 levels). Dtypes strata has no use for (F8_E5M2, U16,
// U32, U64, I16, ...) are rejected by name. Every error names the file, the tensor and the problem.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace strata::io {

constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;  // the Rust crate's MAX_HEADER_SIZE

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  size_t data_offset = 0;  // from the start of the FILE (8 + N + begin), not of the data area
  size_t nbytes = 0;       // end - begin == numel * dtype_size(dtype)
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;              // in file order (ascending data_offset)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty when absent
  size_t header_bytes = 0;                      // N
  size_t data_start = 0;                        // 8 + N
};

// Parses and validates the header of a whole safetensors file held in memory (`data`, `size`
// bytes: the file, not just the header, since offsets are checked against the file's end).
// `file_name` is used in error messages only.
SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size,
                                           std::string_view file_name);

// A safetensors file mapped read-only (PROT_READ, MAP_PRIVATE) and validated at open. Tensors
// returned by tensor() view the mapping (no copy) and keep it alive after this object is gone;
// writing through them faults, since the pages are read-only. Movable, not copyable.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* find(std::string_view name) const;  // nullptr when absent
  // A host tensor viewing the mapped bytes; throws naming the tensor and file when absent.
  // Data whose offset is not a multiple of the element size (legal in the format, never
  // written by the safetensors libraries) cannot be viewed as typed elements: such a tensor
  // is copied into aligned memory, logged, and counted in copied_bytes().
  Tensor tensor(std::string_view name) const;
  size_t mapped_bytes() const;  // the file size
  size_t copied_bytes() const { return copied_bytes_->load(); }

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<const Mapping> mapping_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in header_.tensors
  // Shared so the file stays movable; atomic since loaders may call tensor() from threads.
  std::shared_ptr<std::atomic<size_t>> copied_bytes_ = std::make_shared<std::atomic<size_t>>(0);
};

// Writes host tensors as a safetensors file in the layout the safetensors libraries use: the
// JSON header padded with spaces to a multiple of 8 bytes, tensors ordered by descending element
// size then name (so every tensor starts aligned to its element size). Non-contiguous tensors are
// written in row-major order. Writes to `path`.tmp and renames, so a failure leaves no partial
// file at `path`. Throws naming the tensor for a device tensor, a duplicate or empty name, or a
// name "__metadata__"; and naming the path for I/O errors.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace strata::io
