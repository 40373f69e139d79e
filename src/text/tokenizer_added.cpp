#include "text/tokenizer_added.h"

#include <algorithm>

#include "core/check.h"
#include "text/tokenizer_normalizer.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

// Rust's regex \w: Alphabetic + Mark + Decimal_Number + Connector_Punctuation + Join_Control.
// Alphabetic is approximated by letters, letter numbers and the circled/squared Latin letters
// (So with Other_Alphabetic); its remaining Other_Alphabetic members are marks, covered by \p{M}.
constexpr const char* kWordChar =
    R"([\p{L}\p{Nl}\p{Nd}\p{M}\p{Pc}\x{200C}\x{200D}\x{24B6}-\x{24E9}\x{1F130}-\x{1F149})"
    R"(\x{1F150}-\x{1F169}\x{1F170}-\x{1F189}])";

// Byte offset where the run of white space that ends `s` begins (s.size() when none).
size_t trailing_space_start(std::string_view s) {
  size_t run = std::string_view::npos;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (!is_unicode_whitespace(utf8_next(s, i))) {
      run = std::string_view::npos;
    } else if (run == std::string_view::npos) {
      run = at;
    }
  }
  return run == std::string_view::npos ? s.size() : run;
}

// Length in bytes of the run of white space that starts `s`.
size_t leading_space_length(std::string_view s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size() && is_unicode_whitespace(utf8_next(s, i));)
    end = i;
  return end;
}

// The last / first code point of s as UTF-8 (s is well-formed and non-empty).
std::string_view last_char(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80)
    --i;
  return s.substr(i);
}
std::string_view first_char(std::string_view s) {
  return s.substr(0, utf8_lead_length(static_cast<unsigned char>(s[0])));
}

}  // namespace

void AddedVocabulary::Trie::insert(std::string_view pattern, int32_t token) {
  int32_t node = 0;
  for (char ch : pattern) {
    const auto c = static_cast<unsigned char>(ch);
    auto& next = nodes[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c,
                               [](const auto& e, unsigned char v) { return e.first < v; });
    if (it == next.end() || it->first != c) {
      const auto child = static_cast<int32_t>(nodes.size());
      next.insert(it, {c, child});
      nodes.emplace_back();  // invalidates `next`; not used below
      node = child;
    } else {
      node = it->second;
    }
  }
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
  // Two tokens with one pattern: the first one listed wins, like aho-corasick's pattern order.
  if (nodes[node].token < 0) nodes[node].token = token;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest_at(std::string_view text,
                                                             size_t pos) const {
  std::pair<size_t, int32_t> best{pos, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto& next = nodes[node].next;
    auto it = std::lower_bound(next.begin(), next.end(), c,
                               [](const auto& e, unsigned char v) { return e.first < v; });
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes[node].token >= 0) best = {i + 1, nodes[node].token};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer* normalizer)
    : tokens_(std::move(tokens)), word_char_(kWordChar, "added-token word class") {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_content_.emplace(t.content, t.id);
    if (static_cast<size_t>(t.id) >= index_by_id_.size()) index_by_id_.resize(t.id + 1, -1);
    index_by_id_[t.id] = static_cast<int32_t>(i);
    if (t.content.empty()) continue;  // HF ignores empty added tokens
    if (!t.normalized) {
      raw_.insert(t.content, static_cast<int32_t>(i));
      continue;
    }
    std::string pattern = t.content;
    if (normalizer) normalizer->normalize(pattern);
    if (!pattern.empty()) normalized_.insert(pattern, static_cast<int32_t>(i));
  }
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= index_by_id_.size() || index_by_id_[id] < 0)
    return nullptr;
  return &tokens_[index_by_id_[id]];
}

std::vector<AddedSplit> AddedVocabulary::split(std::string_view text, bool normalized) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  if (text.empty() || trie.nodes.size() == 1) return {AddedSplit{0, text.size(), -1}};

  // 1. Leftmost-longest, non-overlapping matches. A match that the flags reject below is not
  //    retried at a later start inside it: aho-corasick has already moved past it.
  std::vector<std::pair<size_t, std::pair<size_t, int32_t>>> matches;  // start, (end, token)
  for (size_t i = 0; i < text.size();) {
    if (trie.first_byte[static_cast<unsigned char>(text[i])]) {
      const auto [end, token] = trie.longest_at(text, i);
      if (token >= 0) {
        matches.push_back({i, {end, token}});
        i = end;
        continue;
      }
    }
    ++i;
  }

  // 2. HF's find_matches: apply single_word, lstrip and rstrip, and fill the gaps.
  std::vector<AddedSplit> out;
  size_t start_offset = 0;
  for (const auto& [match_start, rest] : matches) {
    size_t start = match_start;
    size_t stop = rest.first;
    const AddedToken& t = tokens_[rest.second];
    if (t.single_word) {
      const bool space_before =
          start == 0 || !word_char_.full_match(last_char(text.substr(0, start)));
      const bool space_after =
          stop == text.size() || !word_char_.full_match(first_char(text.substr(stop)));
      if (!space_before || !space_after) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (t.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace strata::text
