// Tokenizers written by hand (tests/fixtures/tokenizers_handmade/generate.py spells them out)
// with expected ids worked out by hand below, one comment per case. Together they cover every
// supported pre-tokenizer, normalizer, decoder, post-processor and added-token flag; the HF
// fixtures (test_tokenizer_fixtures.cpp) then check the same code against HF on real vocabularies.
//
// Id conventions of the fixtures (see generate.py): in gpt2_mini and added_flags byte b is id b;
// in nemotron_mini byte b is id 14 + b; in llama_fallback <0xbb> is id 3 + b.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "text/tokenizer.h"

namespace strata::text {
namespace {

Tokenizer load(const std::string& name) {
  return Tokenizer::from_dir(std::string(STRATA_SOURCE_DIR) +
                             "/tests/fixtures/tokenizers_handmade/" + name);
}

struct Case {
  std::string text;
  std::vector<int32_t> with_special;     // encode(text, add_special_tokens=true)
  std::vector<int32_t> without_special;  // encode(text, add_special_tokens=false)
};

// Checks every case and returns how many were compared, so each test can assert its count.
size_t check_cases(const Tokenizer& tok, const std::vector<Case>& cases) {
  size_t compared = 0;
  for (const Case& c : cases) {
    EXPECT_EQ(tok.encode(c.text, true), c.with_special) << "text: \"" << c.text << "\"";
    EXPECT_EQ(tok.encode(c.text, false), c.without_special) << "text: \"" << c.text << "\"";
    ++compared;
  }
  return compared;
}

TEST(TokenizerHandmade, Gpt2ByteLevel) {
  const Tokenizer tok = load("gpt2_mini");
  // Merges (rank: pair -> id): 0 h+e=256, 1 l+l=257, 2 he+ll=258, 3 hell+o=259, 4 Ġ+w=260,
  // 5 o+r=261, 6 Ġw+or=262, 7 l+d=263, 8 Ġwor+ld=264, 9 a+a=265, 10 b+c=266, 11 a+b=267.
  // The ByteLevel post-processor adds nothing, so both columns agree.
  const std::vector<Case> cases = {
      // GPT-2 regex: "hello" | " world". hello: h+e(r0), l+l(r1), he+ll(r2), hell+o(r3) = 259.
      // Ġworld: Ġ+w(r4), o+r(r5), Ġw+or(r6), l+d(r7), Ġwor+ld(r8) = 264.
      {"hello world", {259, 264}, {259, 264}},
      // The added token is cut out first; the pieces around it tokenize as above.
      {"hello<|endoftext|> world", {259, 268, 264}, {259, 268, 264}},
      // Equal ranks: the leftmost pair merges first: (aa) a -> 265, 97.
      {"aaa", {265, 97}, {265, 97}},
      // Lower rank first: b+c (r10) beats a+b (r11), then "a"+"bc" has no merge.
      {"abc", {97, 266}, {97, 266}},
      // 's is its own piece: "it" | "'s" -> i t ' s.
      {"it's", {105, 116, 39, 115}, {105, 116, 39, 115}},
      // \s+(?!\S) takes the first space only, " x" is one piece: Ġ=32, x=120.
      {"  x", {32, 32, 120}, {32, 32, 120}},
      // Trailing spaces: \s+(?!\S) takes both.
      {"x  ", {120, 32, 32}, {120, 32, 32}},
      // "Hello": no H+e merge; l+l (r1) then e+ll has no merge: H e ll o.
      {"Hello", {72, 101, 257, 111}, {72, 101, 257, 111}},
      // é is C3 A9: two byte tokens.
      {"\xC3\xA9", {195, 169}, {195, 169}},
      // Invalid byte FF becomes U+FFFD (EF BF BD) before tokenizing.
      {"\xFF", {239, 191, 189}, {239, 191, 189}},
      // Truncated E4 BD is one maximal subpart: one U+FFFD, then "a" in its own piece.
      {"\xE4\xBD"
       "a",
       {239, 191, 189, 97},
       {239, 191, 189, 97}},
      {"", {}, {}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());

  EXPECT_EQ(tok.decode(std::vector<int32_t>{259, 268, 264}, false), "hello<|endoftext|> world");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{259, 268, 264}, true), "hello world");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{32, 32, 120}, false), "  x");
  // Half of é decodes to U+FFFD, the whole of it to é.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{195}, false), "\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{195, 169}, false), "\xC3\xA9");
  // Unknown ids are skipped, as HF does.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{259, 99999}, false), "hello");

  EXPECT_EQ(tok.vocab_size(), 269);
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 268);
  EXPECT_EQ(tok.id_to_token(264), "\xC4\xA0world");  // "Ġworld"
  EXPECT_FALSE(tok.id_to_token(269).has_value());
  EXPECT_TRUE(tok.is_special(268));
  EXPECT_FALSE(tok.is_special(259));
  EXPECT_EQ(tok.eos_token_id(), 268);
  EXPECT_FALSE(tok.bos_token_id().has_value());  // "bos_token": null
}

TEST(TokenizerHandmade, NemotronLayoutSplitRegexByteLevel) {
  const Tokenizer tok = load("nemotron_mini");
  // Specials 0..13, byte b = 14 + b. Merges: 0 t+h=270, 1 th+e=271, 2 Ġ+the=272, 3 1+2=273,
  // 4 12+3=274, 5 i+s=275; "xyz"=276 has no merges. ignore_merges: a word that is a token is
  // taken whole. The template prepends <s>=1.
  const std::vector<Case> cases = {
      // Tekken regex: "the" | " cat". "the" is a token (271); Ġcat has no merges:
      // Ġ=14+32=46, c=14+99=113, a=14+97=111, t=14+116=130.
      {"the cat", {1, 271, 46, 113, 111, 130}, {271, 46, 113, 111, 130}},
      // " the" is one piece, "Ġthe" = 272.
      {" the", {1, 272}, {272}},
      // \p{N} takes one digit per piece, so 1+2 never merges: 14+'1'(49)=63 ... 67.
      {"12345", {1, 63, 64, 65, 66, 67}, {63, 64, 65, 66, 67}},
      // ignore_merges: "xyz" is in the vocabulary, so no BPE (which would give 134 135 136).
      {"xyz", {1, 276}, {276}},
      // "this": t+h (r0) then i+s (r5): th is -> 270 275. " is": Ġ i+s -> 46 275.
      {"this is", {1, 270, 275, 46, 275}, {270, 275, 46, 275}},
      // Upper case: "Hello" (alt 1: Lu* Ll+) | " WORLD" (alt 2: Lu+ Ll*).
      // H=86 e=115 l=122 l=122 o=125 | Ġ=46 W=101 O=93 R=96 L=90 D=82.
      {"Hello WORLD",
       {1, 86, 115, 122, 122, 125, 46, 101, 93, 96, 90, 82},
       {86, 115, 122, 122, 125, 46, 101, 93, 96, 90, 82}},
      // Chat markup: <|im_start|>=10, "user" u=131 s=129 e=115 r=128, "\n" (\s*[\r\n]+) = 14+10
      // = 24, "hi" h=118 i=119, <|im_end|>=11.
      {"<|im_start|>user\nhi<|im_end|>",
       {1, 10, 131, 129, 115, 128, 24, 118, 119, 11},
       {10, 131, 129, 115, 128, 24, 118, 119, 11}},
      // Emoji F0 9F 98 80 after "a": 111 | 254 173 166 142.
      {"a\xF0\x9F\x98\x80", {1, 111, 254, 173, 166, 142}, {111, 254, 173, 166, 142}},
      // Empty text: only the template's <s>.
      {"", {1}, {}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());

  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 271, 46, 113, 111, 130}, false), "<s>the cat");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 271, 46, 113, 111, 130}, true), "the cat");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{10, 131, 129, 115, 128, 24, 118, 119, 11}, false),
            "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{10, 131, 129, 115, 128, 24, 118, 119, 11}, true),
            "user\nhi");
  // tokenizer_config.json: bos <s>, eos </s>, pad <unk>.
  EXPECT_EQ(tok.bos_token_id(), 1);
  EXPECT_EQ(tok.eos_token_id(), 2);
  EXPECT_EQ(tok.pad_token_id(), 0);
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 11);
  for (int32_t id = 0; id < 14; ++id)
    EXPECT_TRUE(tok.is_special(id)) << id;
  EXPECT_FALSE(tok.is_special(14));
}

TEST(TokenizerHandmade, LlamaByteFallbackUnkAndStrip) {
  const Tokenizer tok = load("llama_fallback");
  // Normalizer: prepend "▁", spaces -> "▁". <0xbb> = 3 + b for b < 0xF0 only. ▁=243 h=244
  // i=245 e=246 l=247 o=248. Merges: 0 ▁+h=249, 1 ▁h+i=250, 2 h+e=251, 3 l+l=252,
  // 4 he+ll=253, 5 hell+o=254, 6 ▁+hello=255. The template prepends <s>=1.
  const std::vector<Case> cases = {
      // "▁hi": ▁+h (r0) then ▁h+i (r1) = 250.
      {"hi", {1, 250}, {250}},
      // "▁hello▁hi": both ▁+h (r0, left first) win before h+e (r2), so "hello" never forms:
      // ▁h e ll o ▁hi -> 249 246 252 248 250 (the stale h+e entry is skipped).
      {"hello hi", {1, 249, 246, 252, 248, 250}, {249, 246, 252, 248, 250}},
      // é = C3 A9 is not a token: byte fallback <0xC3>=198 <0xA9>=172.
      {"\xC3\xA9", {1, 243, 198, 172}, {243, 198, 172}},
      // 😀 starts with F0, which has no byte token: unk; fuse_unk makes two emoji one <unk>=0.
      {"\xF0\x9F\x98\x80\xF0\x9F\x98\x80", {1, 243, 0}, {243, 0}},
      // An unknown between known characters: ▁ h <unk> i -> ▁h (r0) <unk> i = 249 0 245.
      {"h\xF0\x9F\x98\x80i", {1, 249, 0, 245}, {249, 0, 245}},
      // A leading space: "▁▁hi" -> ▁ then ▁+h, ▁h+i -> 243 250.
      {" hi", {1, 243, 250}, {243, 250}},
      // Prepend does nothing to an empty string.
      {"", {1}, {}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());

  // Decoder: ▁ -> space, byte fallback, fuse, strip one leading space.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 249, 246, 252, 248, 250}, false), "<s> hello hi");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 249, 246, 252, 248, 250}, true), "hello hi");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{243, 198, 172}, false), "\xC3\xA9");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{243, 250}, false), " hi");
  // A byte group that is not UTF-8 becomes one U+FFFD per byte (HF's rule, not Python's):
  // C3 41 -> two U+FFFD, where errors='replace' would give U+FFFD "A".
  EXPECT_EQ(tok.decode(std::vector<int32_t>{198, 3 + 0x41}, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // bos_token given as {"content": "<s>"} in tokenizer_config.json.
  EXPECT_EQ(tok.bos_token_id(), 1);
  EXPECT_EQ(tok.eos_token_id(), 2);
}

TEST(TokenizerHandmade, AddedTokenFlags) {
  const Tokenizer tok = load("added_flags");
  // Byte b = id b. Added: <sw>=256 single_word, <ls>=257 lstrip, <rs>=258 rstrip, [X]=259
  // normalized (pattern "[x]" after the X->x normalizer), ab!=260, ab!!=261, <both>=262
  // lstrip+rstrip. No post-processor.
  const std::vector<Case> cases = {
      // <sw> glued to "a": rejected, so all of it is text: a | < | sw | > | b.
      {"a<sw>b", {97, 60, 115, 119, 62, 98}, {97, 60, 115, 119, 62, 98}},
      // Spaces around <sw>: accepted. "a " -> a, " " (\s+(?!\S) at the piece end); " b" -> Ġb.
      {"a <sw> b", {97, 32, 256, 32, 98}, {97, 32, 256, 32, 98}},
      // At both ends of the text: accepted.
      {"<sw>", {256}, {256}},
      // Letters, digits and '_' are word characters (Unicode): é, 1, _ reject; '-' does not.
      {"\xC3\xA9<sw>", {195, 169, 60, 115, 119, 62}, {195, 169, 60, 115, 119, 62}},
      {"1<sw>", {49, 60, 115, 119, 62}, {49, 60, 115, 119, 62}},
      {"_<sw>", {95, 60, 115, 119, 62}, {95, 60, 115, 119, 62}},
      {"-<sw>", {45, 256}, {45, 256}},
      // lstrip swallows the spaces before <ls>.
      {"x  <ls>y", {120, 257, 121}, {120, 257, 121}},
      // rstrip swallows the spaces after <rs>.
      {"x<rs>  y", {120, 258, 121}, {120, 258, 121}},
      // Both sides.
      {"a <both> b", {97, 262, 98}, {97, 262, 98}},
      // The space after <rs> was taken by its rstrip: <ls>'s lstrip cannot take it again.
      {"<rs> <ls>", {258, 257}, {258, 257}},
      // Normalized token: "[X]" normalizes to "[x]", which is the pattern; "[x]" too.
      {"[X]", {259}, {259}},
      {"[x]", {259}, {259}},
      // Not a token: [ Y ] as bytes.
      {"[Y]", {91, 89, 93}, {91, 89, 93}},
      // The normalizer itself: X -> x.
      {"X", {120}, {120}},
      // Longest match at the leftmost position: "ab!!" then "!".
      {"ab!!!", {261, 33}, {261, 33}},
      {"ab!", {260}, {260}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());

  EXPECT_EQ(tok.decode(std::vector<int32_t>{97, 262, 98}, false), "a<both>b");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{97, 262, 98}, true), "ab");
  // Non-special added tokens stay with skip_special_tokens.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{45, 256}, true), "-<sw>");
}

TEST(TokenizerHandmade, MetaspacePrependFirst) {
  const Tokenizer tok = load("metaspace_first");
  // <unk>=0 <s>=1 ▁=2 a=3 b=4 c=5; merges 0 ▁+a=6, 1 ▁+b=7. prepend_scheme "first": only the
  // piece that starts the input gets a leading ▁.
  const std::vector<Case> cases = {
      // "▁a▁b" split before each ▁ (MergedWithNext): ▁a=6 ▁b=7.
      {"a b", {6, 7}, {6, 7}},
      // After <s> the piece does not start the input: "a▁b" -> a=3, ▁b=7.
      {"<s>a b", {1, 3, 7}, {1, 3, 7}},
      // "▁ab": ▁+a (r0), b: 6 4.
      {"ab", {6, 4}, {6, 4}},
      // "▁c▁▁a" -> "▁c" "▁" "▁a": ▁ c (no merge) = 2 5, ▁ = 2, ▁a = 6.
      {"c  a", {2, 5, 2, 6}, {2, 5, 2, 6}},
      // d is unknown: ▁ <unk>.
      {"d", {2, 0}, {2, 0}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());
  // Decoder: the first token's ▁ is dropped, later ones become spaces.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{6, 7}, false), "a b");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 3, 7}, false), "<s>a b");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{1, 3, 7}, true), "a b");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{2, 5, 2, 6}, false), "c  a");
}

TEST(TokenizerHandmade, EndOfWordSuffixDigitsStrip) {
  const Tokenizer tok = load("word_suffix");
  // <unk>=0 a=1 b=2 a</w>=3 b</w>=4 2=5 0=6 4=7 2</w>=8 0</w>=9 4</w>=10; merges
  // 0 a+b</w>=11, 1 b+a</w>=12. Strip normalizer, WhitespaceSplit, Digits(individual).
  const std::vector<Case> cases = {
      // "ab": a, b</w> -> r0 = 11. "ba": b, a</w> -> r1 = 12.
      {"ab ba", {11, 12}, {11, 12}},
      // Stripped, then a a b</w>: a+b</w> at position 1 -> a(1) ab</w>(11).
      {"  aab  ", {1, 11}, {1, 11}},
      // Each digit is a word of its own, so each carries the suffix: 2</w> 0</w> 2</w> 4</w>.
      {"2024", {8, 9, 8, 10}, {8, 9, 8, 10}},
      // c</w> is unknown: a <unk>.
      {"ac", {1, 0}, {1, 0}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());
  // BPEDecoder: the suffix becomes a space except in the last token.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{11, 12}, false), "ab ba");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{8, 9, 8, 10}, false), "2 0 2 4");
}

TEST(TokenizerHandmade, ContinuingSubwordPrefixNoDecoder) {
  const Tokenizer tok = load("subword_prefix");
  // [UNK]=0 a=1 b=2 c=3 ##a=4 ##b=5 ##c=6 -=7 ##-=8 ab=9 abc=10; merges 0 a+##b=ab,
  // 1 ab+##c=abc. Split on "-" MergedWithNext; BertProcessing adds [UNK] (id 0) as cls and sep.
  const std::vector<Case> cases = {
      // "abc" | "-ab": a ##b ##c -> ab ##c -> abc = 10; - ##a ##b has no merges = 7 4 5.
      {"abc-ab", {0, 10, 7, 4, 5, 0}, {10, 7, 4, 5}},
      // ##d is unknown.
      {"ad", {0, 1, 0, 0}, {1, 0}},
  };
  EXPECT_EQ(check_cases(tok, cases), cases.size());
  // No decoder: HF joins the token strings with spaces.
  EXPECT_EQ(tok.decode(std::vector<int32_t>{10, 7, 4, 5}, false), "abc - ##a ##b");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0, 10, 0}, true), "abc");
}

TEST(TokenizerHandmade, LoadErrorsNameTheFileAndField) {
  auto message_of = [](const std::string& json) {
    try {
      Tokenizer::from_json_text(json, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message_of("{").find("bad.json: not valid JSON"), std::string::npos);
  EXPECT_NE(
      message_of(R"({"model": {"type": "WordPiece", "vocab": {}}})").find("model type 'WordPiece'"),
      std::string::npos);
  EXPECT_NE(message_of(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})")
                .find("merges[0]: token \"b\" is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(
      message_of(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})")
          .find("merged token \"ab\""),
      std::string::npos);
  EXPECT_NE(
      message_of(R"({"normalizer": {"type": "Precompiled"}, "model": {"vocab": {}, "merges": []}})")
          .find("normalizer type 'Precompiled' is not supported"),
      std::string::npos);
  EXPECT_NE(
      message_of(
          R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"},
                           "model": {"vocab": {}, "merges": []}})")
          .find("pre_tokenizer.pattern: regex /(/ does not compile"),
      std::string::npos);
  EXPECT_NE(message_of(R"({"model": {"vocab": {"a": -1}, "merges": []}})").find("vocab[\"a\"]"),
            std::string::npos);
  EXPECT_NE(
      message_of(
          R"({"added_tokens": [{"id": 0, "content": "<x>"}], "model": {"vocab": {"a": 0}, "merges": []}})")
          .find("id 0 of \"<x>\" is already the vocabulary token \"a\""),
      std::string::npos);
  EXPECT_THROW(Tokenizer::from_dir("/nonexistent-strata-dir"), Error);
}

}  // namespace
}  // namespace strata::text
