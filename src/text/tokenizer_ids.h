// Token id lists from outside: `--ids 1,2,3` and a JSON array of ids on stdin. Memory is
// proportional to the text, never to an id's value; every error names `what` and the element.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::text {

// "1,2,3": non-negative decimal 32-bit integers separated by commas, nothing else.
std::vector<int32_t> parse_id_csv(std::string_view text, std::string_view what);

// "[1, 2, 3]": a strict JSON array (bounded nesting, UTF-8 checked) of non-negative 32-bit ids.
std::vector<int32_t> parse_id_json(std::string_view text, std::string_view what);

}  // namespace strata::text
