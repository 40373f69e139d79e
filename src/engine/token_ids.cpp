#include "engine/token_ids.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/check.h"

namespace strata::engine {

void validate_token_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const char* what) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      fail("{}: token id {} at position {} is outside the vocabulary [0, {})", what, ids[i], i,
           vocab_size);
}

std::vector<int32_t> parse_token_id_list(std::string_view text, std::string_view what) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string_view item = text.substr(pos, comma - pos);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.front())))
      item.remove_prefix(1);
    while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
      item.remove_suffix(1);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0 ||
        v > INT32_MAX)
      fail("{}: {:?} is not a token id (expected comma-separated non-negative integers)", what,
           item);
    ids.push_back(static_cast<int32_t>(v));
    pos = comma + 1;
  }
  return ids;
}

}  // namespace strata::engine
