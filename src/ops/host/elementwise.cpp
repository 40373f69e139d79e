// Host elementwise ops: relu2 (out = act(relu(x)^2)), add (out = act(a + b)) over 2-D rows
// (row stride >= width; a 1-D tensor is one row) and cast between float dtypes (contiguous,
// any rank). All math in f32; relu2 and add may run in place (out aliasing an input). relu2 may
// also write the e4m3 input of a W8A8 linear (out_q, ops.h), with or without out.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/thread_pool.h"
#include "ops/host/host_common.h"
#include "ops/ops.h"

namespace strata::ops::host {
namespace {

// rank 1 [N] or rank 2 [T, N] rows, matching `like`'s shape.
bool rows_like(ArgCheck& c, const Tensor& t, const char* name, const Tensor& like) {
  if (!c.float_act(t, name)) return false;
  if (like.rank() == 1) return c.vec(t, name, like.dim(0));
  return c.rows(t, name, like.dim(0), like.dim(1));
}

bool rank_1_or_2(ArgCheck& c, const Tensor& t, const char* name) {
  return c.that(t.rank() == 1 || t.rank() == 2, "tensors must be 1-D or 2-D [T, N]") &&
         rows_like(c, t, name, t);
}

// out_q (the e4m3 input of a W8A8 down projection) takes 2-D x only.
bool relu2_supports(const Relu2Args& a, std::string* why) {
  ArgCheck c("relu2", why);
  if (!(c.host(a.x, "x") && rank_1_or_2(c, a.x, "x"))) return false;
  if (a.out.defined() && !(c.host(a.out, "out") && rows_like(c, a.out, "out", a.x))) return false;
  if (a.out_q.defined() && !c.that(a.x.rank() == 2, "out_q needs 2-D x [T, N]")) return false;
  return quantized_out_ok(c, a.out, a.out_q, a.out_q_scale, a.x.dim(0),
                          a.x.rank() == 2 ? a.x.dim(1) : 0);
}

void relu2_run(const Relu2Args& a, OpContext&) {
  const bool has_out = a.out.defined(), has_q = a.out_q.defined();
  const RowsView x(a.x), out = has_out ? RowsView(a.out) : RowsView(a.x);
  const DType act = out.dtype;
  parallel_for(x.rows, [&](int64_t t0, int64_t t1) {
    std::vector<float> v(static_cast<size_t>(x.cols));
    for (int64_t t = t0; t < t1; ++t) {
      x.load(t, v.data());
      for (float& e : v)
        e = e > 0.f ? e * e : 0.f;
      if (has_out) out.store(t, v.data());
      if (has_q) store_quantized_row(a.out_q, a.out_q_scale, act, t, x.cols, v.data());
    }
  });
}

bool add_supports(const AddArgs& a, std::string* why) {
  ArgCheck c("add", why);
  return c.host(a.a, "a") && c.host(a.b, "b") && c.host(a.out, "out") && rank_1_or_2(c, a.a, "a") &&
         rows_like(c, a.b, "b", a.a) && rows_like(c, a.out, "out", a.a);
}

void add_run(const AddArgs& args, OpContext&) {
  const RowsView a(args.a), b(args.b), out(args.out);
  parallel_for(a.rows, [&](int64_t t0, int64_t t1) {
    std::vector<float> va(static_cast<size_t>(a.cols)), vb(static_cast<size_t>(a.cols));
    for (int64_t t = t0; t < t1; ++t) {
      a.load(t, va.data());
      b.load(t, vb.data());
      for (size_t i = 0; i < va.size(); ++i)
        va[i] += vb[i];
      out.store(t, va.data());
    }
  });
}

bool cast_supports(const CastArgs& a, std::string* why) {
  ArgCheck c("cast", why);
  if (!(c.host(a.x, "x") && c.host(a.out, "out"))) return false;
  const std::initializer_list<DType> floats = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                               DType::F8E4M3};
  if (!(c.dtype_in(a.x, "x", floats) && c.dtype_in(a.out, "out", floats))) return false;
  // Values pass through f32: from f64 only f32 (and f64) targets round exactly once.
  if (a.x.dtype() == DType::F64 && a.out.dtype() != DType::F32 && a.out.dtype() != DType::F64)
    return c.fail("f64 -> {} would round twice through f32", dtype_name(a.out.dtype()));
  if (a.x.shape() != a.out.shape())
    return c.fail("x {} and out {} differ in shape", a.x.str(), a.out.str());
  return c.that(a.x.is_contiguous() && a.out.is_contiguous(), "x and out must be contiguous");
}

void cast_run(const CastArgs& a, OpContext&) {
  if (a.x.dtype() == a.out.dtype()) {
    if (a.out.raw() != a.x.raw()) std::memmove(a.out.raw(), a.x.raw(), a.x.nbytes());
    return;
  }
  constexpr int64_t kBlock = 4096;
  const int64_t n = a.x.numel();
  const size_t in_es = dtype_size(a.x.dtype()), out_es = dtype_size(a.out.dtype());
  const auto* src = static_cast<const char*>(a.x.raw());
  auto* dst = static_cast<char*>(a.out.raw());
  parallel_for((n + kBlock - 1) / kBlock, [&](int64_t b0, int64_t b1) {
    std::vector<float> v(kBlock);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
      load_f32(src + static_cast<size_t>(i0) * in_es, a.x.dtype(), len, v.data());
      store_f32(dst + static_cast<size_t>(i0) * out_es, a.out.dtype(), len, v.data());
    }
  });
}

}  // namespace

STRATA_REGISTER_KERNEL(Relu2Args, "host", Device::Host, relu2_supports, relu2_run);
STRATA_REGISTER_KERNEL(AddArgs, "host", Device::Host, add_supports, add_run);
STRATA_REGISTER_KERNEL(CastArgs, "host", Device::Host, cast_supports, cast_run);

}  // namespace strata::ops::host
