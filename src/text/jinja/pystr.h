// Python str algorithms over code points (std::u32string): strip, split, splitlines, replace,
// find/count with Python's start/end index rules, and the case conversions. The str methods and
// the string filters are thin bindings of these.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::jinja::pystr {

using U32 = std::u32string;

// str.strip/lstrip/rstrip; chars == nullopt strips whitespace.
U32 strip(const U32& s, const std::optional<U32>& chars, bool left, bool right);

// str.split / str.rsplit; sep == nullopt splits on runs of whitespace. maxsplit < 0: no limit.
// Throws TemplateError for an empty separator.
std::vector<U32> split(const U32& s, const std::optional<U32>& sep, int64_t maxsplit);
std::vector<U32> rsplit(const U32& s, const std::optional<U32>& sep, int64_t maxsplit);
std::vector<U32> splitlines(const U32& s, bool keepends);

// count < 0: replace all. Throws if the result would exceed max_len code points.
U32 replace(const U32& s, const U32& old_sub, const U32& new_sub, int64_t count, size_t max_len);

// Python's slice-style clamping of optional start/end for find/count/startswith.
struct Range {
  int64_t start, end;
};
Range adjust(std::optional<int64_t> start, std::optional<int64_t> end, int64_t len);

int64_t find(const U32& s, const U32& sub, Range r);   // -1 when absent
int64_t rfind(const U32& s, const U32& sub, Range r);  // -1 when absent
int64_t count(const U32& s, const U32& sub, Range r);
bool starts_with(const U32& s, const U32& prefix, Range r);
bool ends_with(const U32& s, const U32& suffix, Range r);

U32 title(const U32& s);       // str.title
U32 capitalize(const U32& s);  // str.capitalize
U32 swapcase(const U32& s);
bool is_title(const U32& s);

}  // namespace strata::jinja::pystr
