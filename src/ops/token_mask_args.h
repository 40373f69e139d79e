// The token_mask op (guided decoding) in a header of its own: only its kernels and the
// executor's sampling need it.
#pragma once

#include "ops/ops.h"

namespace strata::ops {

// Guided decoding's token mask: logits[b, v] = kMaskedLogit where bit v % 32 of
// mask[b, v / 32] is clear (rows a grammar does not constrain carry all-ones words). Applied
// before sampling. The lowest finite float rather than -inf: the sample op reads a raw -inf as
// a broken row (nonfinite = 1), while a masked logit only has to lose to every allowed one (its
// probability underflows to 0; temperature < 1 or a penalty may push it to -inf, a ban).
constexpr float kMaskedLogit = -3.40282346638528859812e+38f;  // -FLT_MAX
struct TokenMaskArgs {
  static constexpr const char* kName = "token_mask";
  Tensor logits;  // [B, V] f32, in/out (row views allowed)
  Tensor mask;    // [B, ceil(V / 32)] i32 bit words
  template <class F>
  void visit(F&& f) {
    f(logits, Role::InOut);
    f(mask, Role::In);
  }
};

}  // namespace strata::ops
