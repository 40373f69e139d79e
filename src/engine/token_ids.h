// Token-id lists from users: parsing "1,2,3" and checking ids against a vocabulary.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace strata::engine {

// Throws naming the first id outside [0, vocab_size).
void validate_token_ids(const std::vector<int32_t>& ids, int64_t vocab_size, const char* what);

// "1,2, 3" -> {1, 2, 3}; throws naming `what` and the bad item (empty list, non-number, < 0).
std::vector<int32_t> parse_token_id_list(std::string_view text, std::string_view what);

}  // namespace strata::engine
