// libFuzzer target: parse_npy on arbitrary bytes. Malformed input must end in strata::Error;
// an accepted file must describe exactly the data bytes it holds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/check.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const strata::Tensor t = strata::io::parse_npy(data, size, "fuzz.npy");
    if (t.nbytes() > size) std::abort();
    if (t.nbytes()) {
      // The copy must hold the file's last bytes (the data area ends the file).
      const auto* p = static_cast<const uint8_t*>(t.raw());
      if (p[t.nbytes() - 1] != data[size - 1]) std::abort();
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
