#include "io/module_pattern.h"

namespace strata::io {

namespace {

// Tries the bracket expression starting at pattern[p] == '['. Returns false when it is not
// one (no closing ']': then '[' is a literal); otherwise sets *matched and *next (just past ']').
bool match_class(std::string_view pat, size_t p, char ch, bool* matched, size_t* next) {
  size_t j = p + 1;
  if (j < pat.size() && pat[j] == '!') ++j;
  if (j < pat.size() && pat[j] == ']') ++j;  // a ']' first in the set is a member
  while (j < pat.size() && pat[j] != ']')
    ++j;
  if (j >= pat.size()) return false;
  std::string_view set = pat.substr(p + 1, j - p - 1);
  const bool negate = !set.empty() && set[0] == '!';
  if (negate) set.remove_prefix(1);
  bool in = false;
  for (size_t k = 0; k < set.size(); ++k) {
    if (k + 2 < set.size() && set[k + 1] == '-') {
      if (set[k] <= ch && ch <= set[k + 2]) in = true;  // an inverted range is empty
      k += 2;
    } else if (set[k] == ch) {
      in = true;
    }
  }
  *matched = in != negate;
  *next = j + 1;
  return true;
}

}  // namespace

bool glob_match(std::string_view pat, std::string_view name) {
  // Greedy scan with one backtrack point: the last '*' seen and where its match ended.
  constexpr size_t kNone = std::string_view::npos;
  size_t p = 0, n = 0, star_p = kNone, star_n = 0;
  while (n < name.size()) {
    if (p < pat.size()) {
      if (pat[p] == '*') {
        star_p = ++p;
        star_n = n;
        continue;
      }
      bool ok;
      size_t next = p + 1;
      if (pat[p] == '?') {
        ok = true;
      } else if (pat[p] == '[' && match_class(pat, p, name[n], &ok, &next)) {
        // ok and next set by match_class
      } else {
        ok = pat[p] == name[n];
      }
      if (ok) {
        p = next;
        ++n;
        continue;
      }
    }
    if (star_p == kNone) return false;
    p = star_p;  // let the last '*' swallow one more character
    n = ++star_n;
  }
  while (p < pat.size() && pat[p] == '*')
    ++p;
  return p == pat.size();
}

}  // namespace strata::io
