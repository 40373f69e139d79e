// Incremental detokenizer for streaming: ids go in one at a time, text comes out as soon as it
// is final. Output is always complete UTF-8 (a character split over several byte-level or
// <0xXX> tokens comes out once its last byte arrives), and the concatenation of everything
// push() and finish() return equals tokenizer.decode(all ids, skip_special_tokens).
//
// How: ids wait in a window until the decoder says their text cannot change any more (no
// trailing U+FFFD from an incomplete character, no open run of byte-fallback tokens, ...);
// then the window is decoded as a continuation of what came before, emitted, and cleared. Work
// per id is proportional to the window, which holds only the few ids of one character.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace strata::text {

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Adds one id; returns the text that became final (often empty). Ids that name no token are
  // ignored, as decode ignores them.
  std::string push(int32_t id);
  // End of the stream: returns what was held back (an incomplete character becomes U+FFFD,
  // exactly as the full decode shows it). The detokenizer can be reused afterwards.
  std::string finish();

  // Ids waiting for more input before their text is final.
  size_t pending() const { return window_.size(); }

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  bool at_start_ = true;  // nothing has been emitted since the stream began
  std::vector<std::string> window_;
};

}  // namespace strata::text
