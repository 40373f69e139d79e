#include "text/tokenizer_split.h"

#include <algorithm>

#include "core/check.h"
#include "text/unicode.h"

namespace strata::text {

SplitBehavior parse_split_behavior(std::string_view name, std::string_view where) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  fail(
      "{}: unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
      "MergedWithNext or Contiguous)",
      where, name);
}

std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<Span>& spans,
                                                            SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  out.reserve(spans.size());
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const Span& s : spans)
        out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Removed:
      for (const Span& s : spans)
        if (!s.match) out.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::Contiguous: {
      // Neighbouring spans of the same kind fuse: runs of matches, runs of gaps.
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.match == previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.match;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      // A match joins the span before it, unless that span was itself a match.
      bool previous_match = false;
      for (const Span& s : spans) {
        if (s.match && !previous_match && !out.empty()) {
          out.back().second = s.end;
        } else {
          out.emplace_back(s.begin, s.end);
        }
        previous_match = s.match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      // Mirror image: walk backwards, a match joins the span after it unless that was a match.
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) {
          out.back().first = it->begin;
        } else {
          out.emplace_back(it->begin, it->end);
        }
        previous_match = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
  }
  return out;
}

std::vector<Span> char_spans(std::string_view text, const std::function<bool(char32_t)>& pred) {
  if (text.empty()) return {Span{0, 0, false}};
  std::vector<Span> out;
  size_t gap_start = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t begin = i;
    const char32_t cp = utf8_next(text, i);
    if (!pred(cp)) continue;
    if (gap_start < begin) out.push_back({gap_start, begin, false});
    out.push_back({begin, i, true});
    gap_start = i;
  }
  if (gap_start < text.size()) out.push_back({gap_start, text.size(), false});
  return out;
}

void invert_spans(std::vector<Span>& spans) {
  for (Span& s : spans)
    s.match = !s.match;
}

}  // namespace strata::text
