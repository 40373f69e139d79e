#include "text/unicode.h"

namespace strata::text {
namespace {

// How many leading bytes at s[i] form a well-formed prefix of a sequence, and how long the
// full sequence must be. The second byte's range depends on the lead (Unicode Table 3-7):
// this is what rules out overlongs (E0 80.., F0 80..), surrogates (ED A0..) and > U+10FFFF.
struct Prefix {
  size_t matched;  // bytes that fit the table, lead included (0 only for an invalid lead)
  size_t needed;   // length of the complete sequence
};

Prefix well_formed_prefix(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {1, 1};
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 == 0xE0) {
    need = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 3;
  } else if (b0 == 0xED) {
    need = 3, hi = 0x9F;
  } else if (b0 == 0xF0) {
    need = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 4;
  } else if (b0 == 0xF4) {
    need = 4, hi = 0x8F;
  } else {
    return {0, 1};  // 80..C1, F5..FF can never start a character
  }
  size_t k = 1;
  for (; k < need && i + k < s.size(); ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < lo || b > hi) break;
    lo = 0x80, hi = 0xBF;  // only the second byte has a special range
  }
  return {k, need};
}

}  // namespace

size_t utf8_valid_length(std::string_view s, size_t i) {
  const Prefix p = well_formed_prefix(s, i);
  return p.matched == p.needed ? p.needed : 0;
}

bool utf8_is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t n = utf8_valid_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_replace_invalid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const Prefix p = well_formed_prefix(s, i);
    if (p.matched == p.needed) {
      out.append(s.substr(i, p.needed));
      i += p.needed;
    } else {
      // The maximal subpart (the bytes that still fit) becomes one U+FFFD; the byte that broke
      // the sequence is examined again as a possible start.
      out.append(kReplacementUtf8);
      i += p.matched == 0 ? 1 : p.matched;
    }
  }
  return out;
}

bool utf8_ends_incomplete(std::string_view s) {
  // An incomplete sequence is at most 3 bytes long, so its lead is among the last 3 bytes.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const size_t pos = s.size() - back;
    const auto b = static_cast<unsigned char>(s[pos]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: the lead is further back
    const Prefix p = well_formed_prefix(s, pos);
    return p.matched == back && p.needed > back;
  }
  return false;
}

char32_t utf8_next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const size_t n = utf8_lead_length(b0);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string utf8_encode(char32_t cp) {
  std::string s;
  utf8_append(s, cp);
  return s;
}

bool is_unicode_whitespace(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp < 0x85) return false;
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

char32_t byte_to_codepoint(uint8_t b) {
  // Bytes that are printable in Latin-1 stand for themselves; the rest are numbered from
  // U+0100 in byte order, so the table is a bijection onto 256 printable code points.
  const auto printable = [](unsigned v) {
    return (v >= 0x21 && v <= 0x7E) || (v >= 0xA1 && v <= 0xAC) || (v >= 0xAE && v <= 0xFF);
  };
  if (printable(b)) return b;
  unsigned rank = 0;
  for (unsigned v = 0; v < b; ++v)
    if (!printable(v)) ++rank;
  return 0x100 + rank;
}

const std::array<std::string, 256>& byte_level_alphabet() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    for (unsigned b = 0; b < 256; ++b)
      t[b] = utf8_encode(byte_to_codepoint(static_cast<uint8_t>(b)));
    return t;
  }();
  return table;
}

int codepoint_to_byte(char32_t cp) {
  // The alphabet occupies U+0021..U+00FF and U+0100..U+0143 (68 remapped bytes).
  static const std::array<int16_t, 0x144> reverse = [] {
    std::array<int16_t, 0x144> r{};
    r.fill(-1);
    for (unsigned b = 0; b < 256; ++b)
      r[byte_to_codepoint(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
    return r;
  }();
  return cp < reverse.size() ? reverse[cp] : -1;
}

}  // namespace strata::text
