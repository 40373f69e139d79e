#include "text/token_bytes.h"

#include "text/unicode.h"

namespace strata::text {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// A "<0xAB>" byte-fallback token's byte, or -1.
int byte_fallback(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  int v = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// The byte-level alphabet read back to bytes; nullopt when a character is outside it.
std::optional<std::string> byte_level(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const int b = codepoint_to_byte(utf8_next(s, i));
    if (b < 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

}  // namespace

std::vector<std::optional<std::string>> vocabulary_bytes(const Tokenizer& tokenizer) {
  const int32_t V = tokenizer.vocab_size();
  std::vector<std::optional<std::string>> out(static_cast<size_t>(V));
  for (int32_t id = 0; id < V; ++id) {
    const std::string* s = tokenizer.token_string(id);
    if (!s || tokenizer.is_special(id)) continue;
    std::string text = tokenizer.decode_strings({*s}, DecodePosition{false, false});
    if (text.find(kReplacement) != std::string::npos) {
      // Part of a character: the raw bytes, where the token spells them.
      if (const int b = byte_fallback(*s); b >= 0)
        text.assign(1, static_cast<char>(b));
      else if (auto raw = byte_level(*s); raw && raw->find(kReplacement) == std::string::npos)
        text = std::move(*raw);
    }
    if (!text.empty()) out[static_cast<size_t>(id)] = std::move(text);
  }
  return out;
}

}  // namespace strata::text
