// libFuzzer target: parse_safetensors_header on arbitrary bytes (the whole "file"). Bad input
// must end in strata::Error; anything else (a crash, an ASan report, another exception type)
// is a bug. Accepted headers are checked against the format's invariants, so a parser that
// lets an inconsistent layout through is caught too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/check.h"
#include "core/tensor.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto h = strata::io::parse_safetensors_header(data, size, "fuzz.safetensors");
    if (h.data_start != 8 + h.header_bytes || h.data_start > size) std::abort();
    size_t expected = h.data_start;  // tensors tile the data area in file order
    for (const auto& t : h.tensors) {
      if (t.data_offset != expected) std::abort();
      // The parser promises numel * element size fits int64 at every partial product.
      int64_t bytes = static_cast<int64_t>(strata::dtype_size(t.dtype));
      for (int i = 0; i < t.shape.rank(); ++i) {
        if (t.shape[i] < 0 || __builtin_mul_overflow(bytes, t.shape[i], &bytes)) std::abort();
      }
      if (static_cast<size_t>(bytes) != t.nbytes ||
          t.shape.numel() * static_cast<int64_t>(strata::dtype_size(t.dtype)) != bytes)
        std::abort();
      expected += t.nbytes;
      if (expected > size) std::abort();
      // What SafetensorsFile::tensor builds: a view (UBSan checks its stride arithmetic).
      const strata::Tensor view =
          strata::Tensor::wrap(const_cast<uint8_t*>(data + t.data_offset), t.shape, t.dtype,
                               strata::Device::Host, nullptr);
      if (view.nbytes() != t.nbytes) std::abort();
      // Reading the bytes lets ASan confirm they are inside the input.
      volatile uint8_t sink = 0;
      if (t.nbytes)
        sink = static_cast<uint8_t>(data[t.data_offset] ^ data[t.data_offset + t.nbytes - 1]);
      (void)sink;
    }
    if (expected != size) std::abort();
  } catch (const strata::Error&) {
    // rejected with a message: the expected outcome for malformed input
  }
  return 0;
}
