// UTF-8 replacement (Python's errors='replace'), the byte-level alphabet and White_Space,
// checked against independent references built in this file.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <unordered_set>

#include "text/unicode.h"

namespace strata::text {
namespace {

// Reference encoder, written from the UTF-8 definition (RFC 3629 table).
std::string encode_ref(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 + cp / 64);
    s += static_cast<char>(0x80 + cp % 64);
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 + cp / 4096);
    s += static_cast<char>(0x80 + cp / 64 % 64);
    s += static_cast<char>(0x80 + cp % 64);
  } else {
    s += static_cast<char>(0xF0 + cp / 262144);
    s += static_cast<char>(0x80 + cp / 4096 % 64);
    s += static_cast<char>(0x80 + cp / 64 % 64);
    s += static_cast<char>(0x80 + cp % 64);
  }
  return s;
}

// Every byte string that is a (proper or full) prefix of the encoding of a Unicode scalar
// value, found by encoding all 1,112,064 of them: the definition of "maximal subpart".
struct PrefixTable {
  std::unordered_set<std::string> prefixes;
  std::unordered_set<std::string> complete;
  PrefixTable() {
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // surrogates are not scalar values
      const std::string e = encode_ref(cp);
      complete.insert(e);
      for (size_t k = 1; k <= e.size(); ++k)
        prefixes.insert(e.substr(0, k));
    }
  }
};

const PrefixTable& table() {
  static const PrefixTable t;
  return t;
}

// Python's decode(errors='replace'): at each position take a complete character if one
// starts there; otherwise the longest prefix of some character (at least one byte) is one
// ill-formed subpart and becomes U+FFFD.
std::string replace_ref(const std::string& in) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    size_t full = 0, longest = 0;
    for (size_t k = 1; k <= 4 && i + k <= in.size(); ++k) {
      const std::string p = in.substr(i, k);
      if (!table().prefixes.count(p)) break;
      longest = k;
      if (table().complete.count(p)) full = k;
    }
    if (full) {
      out += in.substr(i, full);
      i += full;
    } else {
      out += "\xEF\xBF\xBD";
      i += longest ? longest : 1;
    }
  }
  return out;
}

TEST(TokenizerUnicode, ReplacementMatchesMaximalSubpartReference) {
  std::mt19937 rng(1234);
  // Bytes drawn to hit the interesting ranges: ASCII, continuation bytes, every lead class.
  const std::vector<uint8_t> pool = {0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                                     0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED,
                                     0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF};
  size_t compared = 0, with_replacement = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s;
    const int len = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < len; ++k) {
      s += static_cast<char>(rng() % 3 == 0 ? rng() % 256 : pool[rng() % pool.size()]);
    }
    const std::string expect = replace_ref(s);
    ASSERT_EQ(utf8_replace_invalid(s), expect) << "trial " << trial;
    EXPECT_EQ(utf8_is_valid(s), expect == s) << "trial " << trial;
    with_replacement += expect != s;
    ++compared;
  }
  EXPECT_EQ(compared, 20000u);
  EXPECT_GT(with_replacement, 10000u);  // the generator really produces malformed input
}

TEST(TokenizerUnicode, KnownPythonReplacements) {
  const std::string R = "\xEF\xBF\xBD";
  // Values of bytes.decode('utf-8', errors='replace') for classic cases.
  EXPECT_EQ(utf8_replace_invalid("\xE4\xBD"), R);                      // truncated 3-byte
  EXPECT_EQ(utf8_replace_invalid("\xED\xA0\x80"), R + R + R);          // surrogate: 3 subparts
  EXPECT_EQ(utf8_replace_invalid("\xF0\x9F\x98"), R);                  // truncated 4-byte
  EXPECT_EQ(utf8_replace_invalid("\xC0\xAF"), R + R);                  // overlong
  EXPECT_EQ(utf8_replace_invalid("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(utf8_replace_invalid("a\xE4\xBDz"), "a" + R + "z");
  EXPECT_EQ(utf8_replace_invalid("\xE4\xBD\xA0"), "\xE4\xBD\xA0");  // complete
}

TEST(TokenizerUnicode, EndsIncomplete) {
  EXPECT_TRUE(utf8_ends_incomplete("a\xE4"));
  EXPECT_TRUE(utf8_ends_incomplete("a\xE4\xBD"));
  EXPECT_TRUE(utf8_ends_incomplete("\xF0\x9F\x98"));
  EXPECT_FALSE(utf8_ends_incomplete("\xE4\xBD\xA0"));
  EXPECT_FALSE(utf8_ends_incomplete("a\x80"));         // a lone continuation byte never completes
  EXPECT_FALSE(utf8_ends_incomplete("\xED\xA0"));      // ED A0 can never be completed (surrogate)
  EXPECT_FALSE(utf8_ends_incomplete("\xEF\xBF\xBD"));  // a real U+FFFD is complete
  EXPECT_FALSE(utf8_ends_incomplete(""));
}

TEST(TokenizerUnicode, ByteLevelAlphabetIsGpt2s) {
  // GPT-2's bytes_to_unicode: the printable ranges map to themselves, the 68 others to
  // U+0100.. in byte order (space 0x20 is the 33rd of them: U+0120 'Ġ'; 0x0A is U+010A 'Ċ').
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint('!')), static_cast<uint32_t>(U'!'));
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint(0x00)), static_cast<uint32_t>(0x100u));
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint(0x0A)), static_cast<uint32_t>(0x10Au));
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint(0x20)), static_cast<uint32_t>(0x120u));
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint(0x7F)), static_cast<uint32_t>(0x121u));
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint(0xAD)), static_cast<uint32_t>(0x143u));
  EXPECT_EQ(static_cast<uint32_t>(byte_to_codepoint(0xFF)), static_cast<uint32_t>(0xFFu));
  std::set<char32_t> seen;
  for (unsigned b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_codepoint(static_cast<uint8_t>(b));
    EXPECT_EQ(codepoint_to_byte(cp), static_cast<int>(b));
    seen.insert(cp);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(codepoint_to_byte(0x144), -1);
  EXPECT_EQ(codepoint_to_byte(0x20), -1);  // a raw space is not in the alphabet
}

TEST(TokenizerUnicode, WhiteSpaceProperty) {
  // Unicode White_Space (PropList.txt): 25 code points.
  const std::set<char32_t> ws = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,
                                 0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004,
                                 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028,
                                 0x2029, 0x202F, 0x205F, 0x3000};
  size_t count = 0;
  for (char32_t cp = 0; cp < 0x11000; ++cp) {
    EXPECT_EQ(is_unicode_whitespace(cp), ws.count(cp) == 1)
        << std::hex << static_cast<uint32_t>(cp);
    count += is_unicode_whitespace(cp);
  }
  EXPECT_EQ(count, 25u);
}

TEST(TokenizerUnicode, EncodeDecodeRoundTrip) {
  size_t compared = 0;
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string e = utf8_encode(cp);
    ASSERT_EQ(e, encode_ref(cp));
    size_t i = 0;
    ASSERT_EQ(static_cast<uint32_t>(utf8_next(e, i)), cp);
    ASSERT_EQ(i, e.size());
    ++compared;
  }
  EXPECT_GT(compared, 20000u);
}

}  // namespace
}  // namespace strata::text
