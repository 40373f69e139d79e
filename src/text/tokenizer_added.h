// Added tokens (tokenizer.json "added_tokens"): strings such as <s> or <|im_end|> that are cut
// out of the text before pre-tokenization and become one id each. Matching follows HF's
// AddedVocabulary: leftmost-longest, non-overlapping; tokens with normalized=false are matched
// in the raw text, tokens with normalized=true in the normalized text (their pattern is the
// normalized content); single_word rejects a match glued to a word character; lstrip/rstrip
// swallow the white space beside the match.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer_bpe.h"
#include "text/tokenizer_regex.h"

namespace strata::text {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// A byte range of the searched text and the added token it is, or -1 for plain text.
struct AddedSplit {
  size_t begin = 0;
  size_t end = 0;
  int32_t id = -1;
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) turns the content of normalized tokens into their patterns.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Cuts `text` around the tokens whose `normalized` flag equals `normalized`. The splits
  // cover the text in order (HF keeps overlapping ranges in one rare lstrip/rstrip case).
  std::vector<AddedSplit> split(std::string_view text, bool normalized) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* find(int32_t id) const;
  bool empty() const { return tokens_.empty(); }

 private:
  // A byte trie over the patterns of one kind of token.
  struct Trie {
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
      int32_t token = -1;                                   // index into tokens_
    };
    std::vector<Node> nodes{Node{}};
    std::array<bool, 256> first_byte{};
    void insert(std::string_view pattern, int32_t token);
    // Longest pattern starting at text[pos]: (end, token index) or token -1.
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  StringIdMap by_content_;
  std::vector<int32_t> index_by_id_;  // id -> index into tokens_, -1 when not an added token
  Trie raw_;
  Trie normalized_;
  Regex word_char_;  // Rust regex \w, for single_word
};

}  // namespace strata::text
