// NumPy .npy files (format 1.0; 2.0 and 3.0 are read too): little-endian, C order. Used for
// logits and other arrays exchanged with Python tools (`strata logits`, golden fixtures).
// Element types: f32 '<f4', f64 '<f8', f16 '<f2', i32 '<i4', i64 '<i8', u8 '|u1', i8 '|i1',
// bool '|b1'. bf16 and fp8 have no NumPy dtype: cast before writing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace strata::io {

// Writes a host tensor (any strides; written in row-major order) with the header NumPy writes:
// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", padded with spaces and a final
// newline so the data starts at a multiple of 64 bytes. Writes PATH.tmp, then renames.
void write_npy(const std::string& path, const Tensor& t);

// Reads a .npy file into a new host tensor. Throws strata::Error naming the file on a bad magic
// or version, a malformed header dict, an unsupported or big-endian dtype, Fortran order (rank
// >= 2), or a data size that differs from shape x element size.
Tensor read_npy(const std::string& path);

// The same from bytes in memory; `name` is used in messages.
Tensor parse_npy(const uint8_t* data, size_t size, std::string_view name);

}  // namespace strata::io
