#include "text/tokenizer_ids.h"

#include <charconv>

#include "core/check.h"
#include "io/json_strict.h"

namespace strata::text {

std::vector<int32_t> parse_id_csv(std::string_view text, std::string_view what) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    int32_t v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || v < 0)
      fail("{}: {} is not a non-negative 32-bit token id (expected e.g. 1,2,3)", what,
           io::quote_name(item));
    ids.push_back(v);
    pos = comma + 1;
  }
  return ids;
}

std::vector<int32_t> parse_id_json(std::string_view text, std::string_view what) {
  // An id list is flat: depth 2 already lets "[[1]]" reach the element check below.
  const nlohmann::json j = io::parse_json_strict(text, what, /*max_depth=*/2);
  if (!j.is_array())
    fail("{}: expected a JSON array of token ids, found {}", what, io::json_type_name(j));
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    const bool ok = e.is_number_unsigned() || (e.is_number_integer() && e.get<int64_t>() >= 0);
    if (!ok || e.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX))
      fail("{}: element {} is not a non-negative 32-bit token id: {}", what, i,
           io::quote_name(e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
    ids.push_back(static_cast<int32_t>(e.get<uint64_t>()));
  }
  return ids;
}

}  // namespace strata::text
