// Split behaviours and the regex engine: the delimiter behaviours against the examples in HF
// tokenizers' documentation, empty-match enumeration against onig's rule worked by hand, and
// the Unicode classes the tokenizer regexes rely on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/check.h"
#include "text/tokenizer_regex.h"
#include "text/tokenizer_split.h"

namespace strata::text {
namespace {

std::vector<std::string> cut(const std::string& text, SplitBehavior b) {
  std::vector<std::string> out;
  for (const auto& [s, e] :
       apply_split_behavior(char_spans(text, [](char32_t c) { return c == '-'; }), b)) {
    if (s != e) out.push_back(text.substr(s, e - s));
  }
  return out;
}

using Words = std::vector<std::string>;

TEST(TokenizerSplit, DelimiterBehavioursAsDocumentedByHF) {
  // HF's SplitDelimiterBehavior docs, "the-final--countdown" split on '-'.
  const std::string t = "the-final--countdown";
  EXPECT_EQ(cut(t, SplitBehavior::Removed), (Words{"the", "final", "countdown"}));
  EXPECT_EQ(cut(t, SplitBehavior::Isolated), (Words{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(cut(t, SplitBehavior::MergedWithPrevious), (Words{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(cut(t, SplitBehavior::MergedWithNext), (Words{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(cut(t, SplitBehavior::Contiguous), (Words{"the", "-", "final", "--", "countdown"}));
  // Delimiters at the ends.
  EXPECT_EQ(cut("-a-", SplitBehavior::MergedWithPrevious), (Words{"-", "a-"}));
  EXPECT_EQ(cut("-a-", SplitBehavior::MergedWithNext), (Words{"-a", "-"}));
}

TEST(TokenizerSplit, InvertKeepsTheMatches) {
  // Split(pattern=\d+, Removed, invert=true) keeps only the numbers.
  const Regex re(R"(\d+)", "test");
  auto spans = re.spans("ab12cd345");
  invert_spans(spans);
  std::vector<std::string> kept;
  for (const auto& [s, e] : apply_split_behavior(spans, SplitBehavior::Removed))
    kept.push_back(std::string("ab12cd345").substr(s, e - s));
  EXPECT_EQ(kept, (Words{"12", "345"}));
}

TEST(TokenizerSplit, EmptyMatchesFollowOnig) {
  // onig's find_iter on "baaac" with a*: empty at 0; the empty match at 0 again is skipped
  // (it touches the last match), 1..4 "aaa"; empty at 4 touches it and is skipped; empty at 5
  // is new; then the end.
  const Regex re("a*", "test");
  const std::vector<std::pair<size_t, size_t>> expect = {{0, 0}, {1, 4}, {5, 5}};
  EXPECT_EQ(re.find_all("baaac"), expect);
  // Spans cover the text: empty [0,0) match, "b", "aaa", "c", empty [5,5) match.
  const auto spans = re.spans("baaac");
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_EQ(spans[1].begin, 0u);
  EXPECT_EQ(spans[1].end, 1u);
  EXPECT_FALSE(spans[1].match);
  EXPECT_TRUE(spans[2].match);
  EXPECT_EQ(re.spans("").size(), 1u);
}

TEST(TokenizerSplit, UnicodeClassesBehaveAsOniguruma) {
  const Regex letter(R"(\p{L})", "test"), number(R"(\p{N})", "test"), space(R"(\s)", "test");
  EXPECT_TRUE(letter.full_match("\xC3\xA9"));           // é
  EXPECT_TRUE(letter.full_match("\xE4\xBD\xA0"));       // 你 (Lo)
  EXPECT_FALSE(letter.full_match("\xF0\x9F\x98\x80"));  // 😀 (So)
  EXPECT_TRUE(number.full_match("\xD9\xA3"));           // ٣ ARABIC-INDIC DIGIT THREE (Nd)
  EXPECT_TRUE(number.full_match("\xC2\xB2"));           // ² (No)
  // \s is Unicode White_Space: NEL and ideographic space yes, zero-width space and U+001C no.
  EXPECT_TRUE(space.full_match("\xC2\x85"));
  EXPECT_TRUE(space.full_match("\xE3\x80\x80"));
  EXPECT_FALSE(space.full_match("\xE2\x80\x8B"));
  EXPECT_FALSE(space.full_match("\x1C"));
  // (?i) uses Unicode case folding: long s folds to s (as in onig, used by Llama-3's pattern).
  const Regex contraction("(?i:'s|'t)", "test");
  EXPECT_TRUE(contraction.full_match("'S"));
  EXPECT_TRUE(contraction.full_match("'\xC5\xBF"));
  // Possessive quantifiers and lookahead compile (GPT-4o style patterns use them).
  EXPECT_NO_THROW(Regex(R"(\p{L}++|\s+(?!\S))", "test"));
  EXPECT_THROW(Regex("[", "test"), Error);
}

TEST(TokenizerSplit, EscapedStringPatternsAreLiteral) {
  const Regex re(Regex::escape("a.b*(c)"), "test");
  EXPECT_EQ(re.find_all("xa.b*(c)a_b").size(), 1u);
  EXPECT_TRUE(re.full_match("a.b*(c)"));
  EXPECT_FALSE(re.full_match("axb(c)"));
}

}  // namespace
}  // namespace strata::text
