#include "text/grammar_mask.h"

#include <algorithm>
#include <cstring>

namespace strata::text {

TokenTrie::TokenTrie(const std::vector<std::optional<std::string>>& bytes)
    : vocab_size_(static_cast<int64_t>(bytes.size())) {
  nodes_.emplace_back();
  for (size_t id = 0; id < bytes.size(); ++id) {
    if (!bytes[id]) continue;
    int32_t at = 0;
    for (char ch : *bytes[id]) {
      const auto b = static_cast<uint8_t>(ch);
      int32_t child = nodes_[static_cast<size_t>(at)].first_child;
      while (child >= 0 && nodes_[static_cast<size_t>(child)].byte != b)
        child = nodes_[static_cast<size_t>(child)].next_sibling;
      if (child < 0) {
        Node n;
        n.byte = b;
        n.next_sibling = nodes_[static_cast<size_t>(at)].first_child;
        child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(std::move(n));
        nodes_[static_cast<size_t>(at)].first_child = child;
      }
      at = child;
    }
    nodes_[static_cast<size_t>(at)].tokens.push_back(static_cast<int32_t>(id));
  }
}

void TokenTrie::walk(int32_t node, const JsonGrammarState& state, int64_t V,
                     uint32_t* words) const {
  for (int32_t c = nodes_[static_cast<size_t>(node)].first_child; c >= 0;
       c = nodes_[static_cast<size_t>(c)].next_sibling) {
    const Node& n = nodes_[static_cast<size_t>(c)];
    auto mark = [&] {
      for (int32_t id : n.tokens)
        if (id < V) words[id / 32] |= 1u << (id % 32);
    };
    // Inside a string's text a printable ASCII byte changes nothing: no copy, no advance (most
    // of a vocabulary's bytes, where most of it is allowed).
    if (n.byte >= 0x20 && n.byte < 0x7F && n.byte != '"' && n.byte != '\\' &&
        state.in_plain_string()) {
      mark();
      if (n.first_child >= 0) walk(c, state, V, words);
      continue;
    }
    JsonGrammarState next = state;
    if (!next.advance(n.byte)) continue;  // every token below shares the rejected prefix
    mark();
    if (n.first_child >= 0) walk(c, next, V, words);
  }
}

void TokenTrie::mask(const JsonGrammarState& state, std::span<const int32_t> eos, int64_t V,
                     uint32_t* words) const {
  std::memset(words, 0, static_cast<size_t>((V + 31) / 32) * sizeof(uint32_t));
  if (state.dead()) return;
  walk(0, state, V, words);
  if (state.complete())
    for (int32_t id : eos)
      if (id >= 0 && id < V) words[id / 32] |= 1u << (id % 32);
}

}  // namespace strata::text
