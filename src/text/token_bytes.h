// The bytes each token of a vocabulary adds to the decoded text, for byte-level constrained
// decoding (the guided-decoding token mask walks them as a trie).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace strata::text {

// [vocab_size]: the bytes of token id i when decoded in the middle of a sequence, or nullopt
// for ids without a token, special tokens (EOS is handled by the grammar's completion, never
// as bytes) and tokens that decode to nothing. Byte-level tokens that are part of a UTF-8
// character give their raw bytes (not U+FFFD); byte-fallback tokens <0xXX> give their byte.
std::vector<std::optional<std::string>> vocabulary_bytes(const Tokenizer& tokenizer);

}  // namespace strata::text
