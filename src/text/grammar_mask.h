// The token mask of guided decoding: which tokens of the vocabulary a grammar state accepts
// next. The vocabulary's byte strings form a trie; the mask walks it depth first with a copy
// of the automaton per trie node, so a byte shared by many tokens is fed once and a rejected
// prefix prunes every token below it (the cost is the live part of the trie, not vocab x bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "text/json_schema_grammar.h"

namespace strata::text {

class TokenTrie {
 public:
  // `bytes[id]`: the token's bytes (text/token_bytes.h), nullopt = never allowed.
  explicit TokenTrie(const std::vector<std::optional<std::string>>& bytes);
  int64_t vocab_size() const { return vocab_size_; }
  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size()); }

  // Sets words[0 .. ceil(V / 32)) to the allowed tokens of `state` (bit id % 32 of word
  // id / 32; ids >= V stay clear): every token whose bytes the state accepts, and the `eos`
  // ids when the state is complete. V may exceed the tokenizer's vocabulary (padded logits).
  void mask(const JsonGrammarState& state, std::span<const int32_t> eos, int64_t V,
            uint32_t* words) const;

 private:
  struct Node {
    uint8_t byte = 0;
    int32_t first_child = -1, next_sibling = -1;
    std::vector<int32_t> tokens;  // ids whose bytes end here
  };
  void walk(int32_t node, const JsonGrammarState& state, int64_t V, uint32_t* words) const;
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
  int64_t vocab_size_ = 0;
};

}  // namespace strata::text
