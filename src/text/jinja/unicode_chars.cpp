#include "text/jinja/unicode_chars.h"

namespace strata::jinja::uni {
namespace {

// Simple (one to one) lowercase -> uppercase mapping; returns c when it has none.
char32_t simple_upper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (c == 0xb5) return 0x39c;
  if (c >= 0xe0 && c <= 0xfe && c != 0xf7) return c - 32;
  if (c == 0xff) return 0x178;
  if (c >= 0x100 && c <= 0x12f) return (c & 1) ? c - 1 : c;
  if (c == 0x131) return 'I';
  if (c >= 0x132 && c <= 0x137) return (c & 1) ? c - 1 : c;
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c : c - 1;
  if (c >= 0x14a && c <= 0x177) return (c & 1) ? c - 1 : c;
  if (c >= 0x17a && c <= 0x17e) return (c & 1) ? c : c - 1;
  if (c == 0x17f) return 'S';
  // Latin Extended-B digraphs (DŽ Dž dž, LJ Lj lj, NJ Nj nj, DZ Dz dz): upper is the first.
  if ((c >= 0x1c4 && c <= 0x1cc) || (c >= 0x1f1 && c <= 0x1f3))
    return c - (c - (c >= 0x1f1 ? 0x1f1 : 0x1c4)) % 3;
  if (c >= 0x1cd && c <= 0x1dc) return (c & 1) ? c : c - 1;
  if ((c >= 0x1de && c <= 0x1ef) || (c >= 0x1f8 && c <= 0x21f) || (c >= 0x222 && c <= 0x233))
    return (c & 1) ? c - 1 : c;
  if (c == 0x1f5) return 0x1f4;
  if ((c >= 0x3b1 && c <= 0x3c1) || (c >= 0x3c3 && c <= 0x3cb)) return c - 32;
  if (c == 0x3c2) return 0x3a3;
  if (c == 0x3ac) return 0x386;
  if (c >= 0x3ad && c <= 0x3af) return c - 37;
  if (c == 0x3cc) return 0x38c;
  if (c >= 0x3cd && c <= 0x3ce) return c - 63;
  if (c >= 0x430 && c <= 0x44f) return c - 32;
  if (c >= 0x450 && c <= 0x45f) return c - 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf) || (c >= 0x4d0 && c <= 0x52f))
    return (c & 1) ? c - 1 : c;
  if (c >= 0x4c1 && c <= 0x4ce) return (c & 1) ? c : c - 1;
  if (c == 0x4cf) return 0x4c0;
  if (c >= 0x561 && c <= 0x586) return c - 48;
  if ((c >= 0x1e00 && c <= 0x1e95) || (c >= 0x1ea0 && c <= 0x1eff)) return (c & 1) ? c - 1 : c;
  if (c >= 0xff41 && c <= 0xff5a) return c - 32;
  return c;
}

// Simple uppercase -> lowercase mapping; returns c when it has none.
char32_t simple_lower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (c >= 0xc0 && c <= 0xde && c != 0xd7) return c + 32;
  if (c >= 0x100 && c <= 0x12f) return (c & 1) ? c : c + 1;
  if (c >= 0x132 && c <= 0x137) return (c & 1) ? c : c + 1;
  if (c >= 0x139 && c <= 0x148) return (c & 1) ? c + 1 : c;
  if (c >= 0x14a && c <= 0x177) return (c & 1) ? c : c + 1;
  if (c == 0x178) return 0xff;
  if ((c >= 0x1c4 && c <= 0x1cc) || (c >= 0x1f1 && c <= 0x1f3))
    return c - (c - (c >= 0x1f1 ? 0x1f1 : 0x1c4)) % 3 + 2;
  if (c >= 0x1cd && c <= 0x1dc) return (c & 1) ? c + 1 : c;
  if ((c >= 0x1de && c <= 0x1ef) || (c >= 0x1f8 && c <= 0x21f) || (c >= 0x222 && c <= 0x233))
    return (c & 1) ? c : c + 1;
  if (c == 0x1f4) return 0x1f5;
  if (c >= 0x179 && c <= 0x17e) return (c & 1) ? c + 1 : c;
  if ((c >= 0x391 && c <= 0x3a1) || (c >= 0x3a3 && c <= 0x3ab)) return c + 32;
  if (c == 0x386) return 0x3ac;
  if (c >= 0x388 && c <= 0x38a) return c + 37;
  if (c == 0x38c) return 0x3cc;
  if (c >= 0x38e && c <= 0x38f) return c + 63;
  if (c >= 0x410 && c <= 0x42f) return c + 32;
  if (c >= 0x400 && c <= 0x40f) return c + 80;
  if ((c >= 0x460 && c <= 0x481) || (c >= 0x48a && c <= 0x4bf) || (c >= 0x4d0 && c <= 0x52f))
    return (c & 1) ? c : c + 1;
  if (c >= 0x4c1 && c <= 0x4ce) return (c & 1) ? c + 1 : c;
  if (c == 0x4c0) return 0x4cf;
  if (c >= 0x531 && c <= 0x556) return c + 48;
  if ((c >= 0x1e00 && c <= 0x1e95) || (c >= 0x1ea0 && c <= 0x1eff)) return (c & 1) ? c : c + 1;
  if (c >= 0xff21 && c <= 0xff3a) return c + 32;
  return c;
}

bool is_case_ignorable(char32_t c) {
  return c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xad || c == 0xb7 ||
         (c >= 0x300 && c <= 0x36f) || c == 0x2019;
}

}  // namespace

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

bool is_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f)) return false;
  if ((c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x180e)
    return false;
  if (c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb) || c == 0xfffe || c == 0xffff) return false;
  if (c >= 0xd800 && c <= 0xf8ff) return false;  // surrogates and private use
  if (c >= 0xe0000) return false;                // tags, variation selectors supplement, PUA
  return true;
}

bool is_linebreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

bool is_decimal(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 0x660 && c <= 0x669) || (c >= 0x6f0 && c <= 0x6f9) ||
         (c >= 0x966 && c <= 0x96f) || (c >= 0xff10 && c <= 0xff19);
}

bool is_cased(char32_t c) {
  return c == 0xdf || c == 0x149 || c == 0x130 || simple_upper(c) != c || simple_lower(c) != c;
}
// The titlecase digraphs (Dž, Lj, Nj, Dz) are neither upper nor lower.
bool is_titlecase_digraph(char32_t c) {
  return c == 0x1c5 || c == 0x1c8 || c == 0x1cb || c == 0x1f2;
}
bool is_lower(char32_t c) {
  return !is_titlecase_digraph(c) && (c == 0xdf || c == 0x149 || simple_upper(c) != c);
}
bool is_upper(char32_t c) {
  return !is_titlecase_digraph(c) && (c == 0x130 || simple_lower(c) != c);
}

bool is_alpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (is_cased(c)) return true;
  return (c >= 0x5d0 && c <= 0x5ea) || (c >= 0x620 && c <= 0x64a) || (c >= 0x904 && c <= 0x939) ||
         (c >= 0xe01 && c <= 0xe30) || (c >= 0x3041 && c <= 0x3096) ||
         (c >= 0x30a1 && c <= 0x30fa) || (c >= 0x3400 && c <= 0x4dbf) ||
         (c >= 0x4e00 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7a3);
}

void append_upper(std::u32string& out, char32_t c) {
  if (c == 0xdf) {
    out += U"SS";
  } else if (c == 0x149) {
    out += U"\u02bcN";
  } else {
    out.push_back(simple_upper(c));
  }
}

void append_lower(std::u32string& out, char32_t c) {
  if (c == 0x130) {
    out += U"i\u0307";
  } else {
    out.push_back(simple_lower(c));
  }
}

void append_title(std::u32string& out, char32_t c) {
  if ((c >= 0x1c4 && c <= 0x1cc) || (c >= 0x1f1 && c <= 0x1f3)) {
    out.push_back(c - (c - (c >= 0x1f1 ? 0x1f1 : 0x1c4)) % 3 + 1);
  } else if (c == 0xdf) {
    out += U"Ss";
  } else if (c == 0x149) {
    out += U"\u02bcN";
  } else {
    out.push_back(simple_upper(c));
  }
}

std::u32string lower(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != 0x3a3) {
      append_lower(out, s[i]);
      continue;
    }
    // Final sigma: preceded by a cased letter and not followed by one (skipping ignorables).
    bool before = false;
    for (size_t j = i; j-- > 0;) {
      if (is_case_ignorable(s[j])) continue;
      before = is_cased(s[j]);
      break;
    }
    bool after = false;
    for (size_t j = i + 1; j < s.size(); ++j) {
      if (is_case_ignorable(s[j])) continue;
      after = is_cased(s[j]);
      break;
    }
    out.push_back(before && !after ? 0x3c2 : 0x3c3);
  }
  return out;
}

std::u32string upper(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (char32_t c : s)
    append_upper(out, c);
  return out;
}

}  // namespace strata::jinja::uni
