#include "text/jinja/pystr.h"

#include <algorithm>

#include "text/jinja/error.h"
#include "text/jinja/unicode_chars.h"

namespace strata::jinja::pystr {

U32 strip(const U32& s, const std::optional<U32>& chars, bool left, bool right) {
  auto strippable = [&](char32_t c) {
    return chars ? chars->find(c) != U32::npos : uni::is_space(c);
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && strippable(s[b]))
      ++b;
  if (right)
    while (e > b && strippable(s[e - 1]))
      --e;
  return s.substr(b, e - b);
}

std::vector<U32> split(const U32& s, const std::optional<U32>& sep, int64_t maxsplit) {
  std::vector<U32> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (!sep) {
    size_t i = 0;
    const size_t n = s.size();
    while (i < n && uni::is_space(s[i]))
      ++i;
    while (i < n) {
      if (maxsplit-- == 0) {
        out.push_back(s.substr(i));  // the rest keeps its trailing whitespace
        return out;
      }
      size_t j = i;
      while (j < n && !uni::is_space(s[j]))
        ++j;
      out.push_back(s.substr(i, j - i));
      i = j;
      while (i < n && uni::is_space(s[i]))
        ++i;
    }
    return out;
  }
  if (sep->empty()) runtime_error("empty separator");
  size_t start = 0;
  while (maxsplit-- > 0) {
    const size_t pos = s.find(*sep, start);
    if (pos == U32::npos) break;
    out.push_back(s.substr(start, pos - start));
    start = pos + sep->size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<U32> rsplit(const U32& s, const std::optional<U32>& sep, int64_t maxsplit) {
  std::vector<U32> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (!sep) {
    size_t i = s.size();
    while (i > 0 && uni::is_space(s[i - 1]))
      --i;
    while (i > 0) {
      if (maxsplit-- == 0) {
        out.push_back(s.substr(0, i));
        break;
      }
      size_t j = i;
      while (j > 0 && !uni::is_space(s[j - 1]))
        --j;
      out.push_back(s.substr(j, i - j));
      i = j;
      while (i > 0 && uni::is_space(s[i - 1]))
        --i;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  if (sep->empty()) runtime_error("empty separator");
  size_t end = s.size();
  while (maxsplit-- > 0 && end >= sep->size()) {
    const size_t pos = s.rfind(*sep, end - sep->size());
    if (pos == U32::npos) break;
    out.push_back(s.substr(pos + sep->size(), end - pos - sep->size()));
    end = pos;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<U32> splitlines(const U32& s, bool keepends) {
  std::vector<U32> out;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    size_t j = i;
    while (j < n && !uni::is_linebreak(s[j]))
      ++j;
    size_t eol = j;
    if (j < n) {
      eol = (s[j] == '\r' && j + 1 < n && s[j + 1] == '\n') ? j + 2 : j + 1;
    }
    out.push_back(s.substr(i, (keepends ? eol : j) - i));
    i = eol;
  }
  return out;
}

U32 replace(const U32& s, const U32& old_sub, const U32& new_sub, int64_t count, size_t max_len) {
  if (count < 0) count = INT64_MAX;
  U32 out;
  auto grow = [&](const U32& piece) {
    if (out.size() + piece.size() > max_len) runtime_error("str.replace result is too large");
    out += piece;
  };
  if (old_sub.empty()) {
    for (size_t i = 0; i <= s.size(); ++i) {
      if (count > 0) {
        grow(new_sub);
        --count;
      }
      if (i < s.size()) out.push_back(s[i]);
    }
    return out;
  }
  size_t start = 0;
  while (count > 0) {
    const size_t pos = s.find(old_sub, start);
    if (pos == U32::npos) break;
    grow(s.substr(start, pos - start));
    grow(new_sub);
    start = pos + old_sub.size();
    --count;
  }
  grow(s.substr(start));
  return out;
}

Range adjust(std::optional<int64_t> start, std::optional<int64_t> end, int64_t len) {
  int64_t b = start.value_or(0), e = end.value_or(len);
  if (e > len) e = len;
  if (e < 0) e = std::max<int64_t>(e + len, 0);
  if (b < 0) b = std::max<int64_t>(b + len, 0);
  return {b, e};
}

int64_t find(const U32& s, const U32& sub, Range r) {
  const auto len = static_cast<int64_t>(s.size());
  if (r.start > len || r.end - r.start < static_cast<int64_t>(sub.size())) return -1;
  const size_t pos =
      s.substr(0, static_cast<size_t>(r.end)).find(sub, static_cast<size_t>(r.start));
  return pos == U32::npos ? -1 : static_cast<int64_t>(pos);
}

int64_t rfind(const U32& s, const U32& sub, Range r) {
  const auto len = static_cast<int64_t>(s.size());
  if (r.start > len || r.end - r.start < static_cast<int64_t>(sub.size())) return -1;
  const U32 window = s.substr(0, static_cast<size_t>(r.end));
  const size_t pos = window.rfind(sub);
  return pos == U32::npos || static_cast<int64_t>(pos) < r.start ? -1 : static_cast<int64_t>(pos);
}

int64_t count(const U32& s, const U32& sub, Range r) {
  const auto len = static_cast<int64_t>(s.size());
  if (r.start > len || r.end < r.start) return 0;
  if (sub.empty()) return r.end - r.start + 1;
  int64_t n = 0;
  const U32 window = s.substr(0, static_cast<size_t>(r.end));
  for (size_t pos = window.find(sub, static_cast<size_t>(r.start)); pos != U32::npos;
       pos = window.find(sub, pos + sub.size()))
    ++n;
  return n;
}

bool starts_with(const U32& s, const U32& prefix, Range r) {
  if (r.start > static_cast<int64_t>(s.size())) return false;
  if (r.end - r.start < static_cast<int64_t>(prefix.size())) return false;
  return s.compare(static_cast<size_t>(r.start), prefix.size(), prefix) == 0;
}

bool ends_with(const U32& s, const U32& suffix, Range r) {
  if (r.start > static_cast<int64_t>(s.size())) return false;
  if (r.end - r.start < static_cast<int64_t>(suffix.size())) return false;
  return s.compare(static_cast<size_t>(r.end) - suffix.size(), suffix.size(), suffix) == 0;
}

U32 title(const U32& s) {
  U32 out;
  bool previous_cased = false;
  for (char32_t c : s) {
    if (previous_cased) {
      uni::append_lower(out, c);
    } else {
      uni::append_title(out, c);
    }
    previous_cased = uni::is_cased(c);
  }
  return out;
}

U32 capitalize(const U32& s) {
  if (s.empty()) return s;
  U32 out;
  uni::append_title(out, s[0]);
  out += uni::lower(s.substr(1));
  return out;
}

U32 swapcase(const U32& s) {
  U32 out;
  for (char32_t c : s) {
    if (uni::is_upper(c)) {
      uni::append_lower(out, c);
    } else if (uni::is_lower(c)) {
      uni::append_upper(out, c);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool is_title(const U32& s) {
  bool cased = false, previous_cased = false;
  for (char32_t c : s) {
    if (uni::is_upper(c)) {
      if (previous_cased) return false;
      previous_cased = cased = true;
    } else if (uni::is_lower(c)) {
      if (!previous_cased) return false;
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return cased;
}

}  // namespace strata::jinja::pystr
