// libFuzzer target: tokenizer.json text -> Tokenizer, then a short encode and decode. Malformed
// input must end in strata::Error; a loaded tokenizer must encode to ids it can decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = strata::text::Tokenizer::from_json_text(text, "fuzz/tokenizer.json");
    const auto ids = tok.encode("Hello wörld 123 <s>\xCC\x81!", /*add_special_tokens=*/true);
    for (int32_t id : ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    (void)tok.decode(ids, /*skip_special_tokens=*/false);
  } catch (const strata::Error&) {
  }
  return 0;
}
