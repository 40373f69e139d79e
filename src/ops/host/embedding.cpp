// Host embedding gather: out[t, :] = table[ids[t], :]. Same dtype: a byte copy of the row;
// otherwise converted through f32 and rounded to out's dtype.
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

bool embedding_supports(const EmbeddingArgs& a, std::string* why) {
  ArgCheck c("embedding", why);
  if (!(c.host(a.table, "table") && c.host(a.ids, "ids") && c.host(a.out, "out"))) return false;
  if (!c.that(a.table.rank() == 2, "table must be 2-D [V, H]")) return false;
  const int64_t V = a.table.dim(0), H = a.table.dim(1);
  const int64_t T = a.ids.rank() == 1 ? a.ids.dim(0) : -1;
  return c.float_act(a.table, "table") && c.rows(a.table, "table", V, H) &&
         c.index_vec(a.ids, "ids", T) && c.float_act(a.out, "out") && c.rows(a.out, "out", T, H);
}

void embedding_run(const EmbeddingArgs& a, OpContext&) {
  const std::vector<int32_t> ids = load_indices(a.ids);
  const RowsView table(a.table), out(a.out);
  for (size_t t = 0; t < ids.size(); ++t)
    if (ids[t] < 0 || ids[t] >= table.rows)
      fail("embedding: ids[{}] = {} is outside the table's {} rows", t, ids[t], table.rows);
  const int64_t H = table.cols;
  const bool same = table.dtype == out.dtype;
  const size_t row_bytes = static_cast<size_t>(H) * dtype_size(out.dtype);
  parallel_for(static_cast<int64_t>(ids.size()), [&](int64_t t0, int64_t t1) {
    std::vector<float> row(same ? 0 : static_cast<size_t>(H));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t id = ids[static_cast<size_t>(t)];
      if (same) {
        const size_t es = dtype_size(out.dtype);
        std::memcpy(out.base + static_cast<size_t>(t * out.row_stride) * es,
                    table.base + static_cast<size_t>(id * table.row_stride) * es, row_bytes);
      } else {
        table.load(id, row.data());
        out.store(t, row.data());
      }
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(EmbeddingArgs, "host", Device::Host, embedding_supports, embedding_run);

}  // namespace strata::ops::host
