// Launcher of take_ids (ops.h TakeIdsArgs): ids[t] = prev[src[t]] where src[t] >= 0.
#pragma once

#include <cstdint>

namespace strata::cuda {

void launch_take_ids(int32_t* ids, const int32_t* src, int64_t T, const int32_t* prev, int64_t P,
                     int* index_errors, void* stream);

}  // namespace strata::cuda
