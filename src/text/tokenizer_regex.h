// The regular expressions of tokenizer.json, run through PCRE2 with UTF and UCP so that \p{L},
// \p{N}, \s, \w and (?i) case folding follow Unicode as Oniguruma (the engine HF tokenizers
// uses) does. Matches are enumerated the way the Rust `onig` crate's find_iter does, so empty
// matches land in the same places.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

struct pcre2_real_code_8;

namespace strata::text {

// A byte range of the searched text; `match` tells a regex match from the gap between two.
struct Span {
  size_t begin = 0;
  size_t end = 0;
  bool match = false;
};

class Regex {
 public:
  // `where` names the source of the pattern for error messages (file and JSON field).
  Regex(std::string_view pattern, std::string_view where);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match of the pattern in text, left to right, non-overlapping. An empty match right
  // where the previous match ended is skipped (onig's rule).
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // find_all plus the gaps, covering text from 0 to size(): what HF's Pattern::find_matches
  // returns. Empty text yields one empty non-match span.
  std::vector<Span> spans(std::string_view text) const;

  // Whether the whole of `text` (one code point, typically) matches.
  bool full_match(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

  // A pattern matching `literal` verbatim.
  static std::string escape(std::string_view literal);

 private:
  std::string pattern_;
  std::string where_;
  pcre2_real_code_8* code_ = nullptr;
};

}  // namespace strata::text
