// The Unicode normalizers of tokenizer.json, through ICU (Debian libicu-dev): NFC, NFD, NFKC,
// NFKD, Lowercase and StripAccents, with HF tokenizers' semantics:
//   - NFC/NFD/NFKC/NFKD: the Unicode normalization forms (UAX #15).
//   - Lowercase: every code point through its full lowercase mapping without context (Rust's
//     char::to_lowercase, which HF calls): U+0130 becomes "i" + U+0307, and a final capital sigma
//     becomes σ, not ς (ICU's string lowercasing would apply the final-sigma rule).
//   - StripAccents: removes every code point of General_Category Mark (Mn, Mc, Me), as HF's
//     is_combining_mark does. It does not decompose: tokenizers put NFD before it.
// Input is valid UTF-8 (encode replaces invalid bytes first); so is the output.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/tokenizer_normalizer.h"

namespace strata::text {

// nullptr when `type` is none of NFC, NFD, NFKC, NFKD, Lowercase, StripAccents.
std::unique_ptr<Normalizer> make_unicode_normalizer(std::string_view type,
                                                    const std::string& where);

}  // namespace strata::text
