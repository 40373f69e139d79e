// libFuzzer target: config.json text -> ModelConfig (strict JSON, field checks, finalize) and the
// admission figure derived from it. Malformed input must end in strata::Error; an accepted
// config must satisfy the invariants finalize promises.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "model/nemotron_h/admission.h"
#include "model/nemotron_h/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const strata::model::ModelConfig c =
        strata::model::ModelConfig::from_json_text(text, "fuzz/config.json");
    if (c.hidden_size <= 0 || c.vocab_size <= 0 || c.layers.empty()) std::abort();
    if (c.num_mamba + c.num_attention + c.num_mlp + c.num_moe != c.num_layers()) std::abort();
    const double params = strata::model::parameter_count_f64(c);
    if (!(params > 0) || !std::isfinite(params)) std::abort();
  } catch (const strata::Error&) {
  }
  return 0;
}
