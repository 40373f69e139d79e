// UTF-8 helpers the tokenizer needs: walking code points, replacing malformed input the way
// Python's bytes.decode('utf-8', errors='replace') and Rust's String::from_utf8_lossy do
// (one U+FFFD per maximal ill-formed subpart, Unicode "best practice"), the GPT-2 byte-level
// alphabet, and the Unicode White_Space property (a fixed list of 25 code points).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata::text {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Length in bytes of the well-formed UTF-8 sequence that starts at s[i], or 0 when the bytes
// there are not a complete well-formed sequence (truncated, overlong, surrogate, > U+10FFFF).
size_t utf8_valid_length(std::string_view s, size_t i);

// Whether every byte of s belongs to a well-formed UTF-8 sequence.
bool utf8_is_valid(std::string_view s);

// s with every maximal ill-formed subpart replaced by U+FFFD (Python errors='replace').
std::string utf8_replace_invalid(std::string_view s);

// Whether s ends with the first bytes of a character that more bytes could complete (a lead
// byte and fitting continuation bytes, fewer than the lead announces).
bool utf8_ends_incomplete(std::string_view s);

// Decodes the code point at s[i] and advances i. s must be well-formed UTF-8.
char32_t utf8_next(std::string_view s, size_t& i);

// Length of the sequence a well-formed lead byte starts (1..4).
inline size_t utf8_lead_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(char32_t cp);

// Unicode White_Space (what Rust's char::is_whitespace and regex \s use).
bool is_unicode_whitespace(char32_t cp);

// GPT-2's byte-level alphabet: byte b is shown as code point byte_to_codepoint(b). Printable
// Latin-1 bytes map to themselves; the other 68 map to U+0100.. in byte order.
char32_t byte_to_codepoint(uint8_t b);
// The UTF-8 spelling of byte_to_codepoint(b) for every byte.
const std::array<std::string, 256>& byte_level_alphabet();
// The byte a byte-level code point stands for, or -1 when cp is not in the alphabet.
int codepoint_to_byte(char32_t cp);

}  // namespace strata::text
