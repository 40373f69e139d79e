// How HF tokenizers cuts a string once a pattern has been found in it (NormalizedString::split):
// the pattern yields spans covering the text, flagged match / gap, and the delimiter behaviour
// decides which spans survive and which are glued to a neighbour.
#pragma once

#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer_regex.h"

namespace strata::text {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Parses tokenizer.json's spelling ("Removed", "Isolated", ...); throws naming `where`.
SplitBehavior parse_split_behavior(std::string_view name, std::string_view where);

// The byte ranges that remain after applying `behavior` to `spans` (which cover the text in
// order). Empty ranges are kept here; callers drop them as HF's PreTokenizedString does.
std::vector<std::pair<size_t, size_t>> apply_split_behavior(const std::vector<Span>& spans,
                                                            SplitBehavior behavior);

// Spans for a per-character predicate: every character for which `pred` holds is its own
// match, the runs between are gaps (HF's Pattern impl for Fn(char) -> bool).
std::vector<Span> char_spans(std::string_view text, const std::function<bool(char32_t)>& pred);

// Flips match and gap (HF's Invert pattern).
void invert_spans(std::vector<Span>& spans);

}  // namespace strata::text
