#include "ops/cuda/kernel_support.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "ops/cuda/cuda_backend.h"

namespace strata::cuda {

ArgCheck& ArgCheck::bad(const std::string& msg) {
  if (ok_ && why_) *why_ = msg;  // the first problem explains the refusal
  ok_ = false;
  return *this;
}

ArgCheck& ArgCheck::on_device(const Tensor& t, const char* name) {
  if (!ok_) return *this;
  if (!t.defined()) return bad(fmt::format("{} is missing", name));
  if (t.device() != Device::Cuda)
    return bad(fmt::format("{} {} is not on the CUDA device", name, t.str()));
  return *this;
}

ArgCheck& ArgCheck::dtype(const Tensor& t, DType d, const char* name) {
  if (!ok_) return *this;
  if (t.dtype() != d) return bad(fmt::format("{} {} must be {}", name, t.str(), dtype_name(d)));
  return *this;
}

ArgCheck& ArgCheck::act(const Tensor& t, const char* name) {
  if (!ok_) return *this;
  if (t.dtype() != DType::F32 && t.dtype() != DType::BF16)
    return bad(fmt::format("{} {}: activations must be f32 or bf16", name, t.str()));
  return *this;
}

ArgCheck& ArgCheck::same_dtype(const Tensor& a, const Tensor& b, const char* na, const char* nb) {
  if (!ok_) return *this;
  if (a.dtype() != b.dtype())
    return bad(fmt::format("{} {} and {} {} must have one dtype", na, a.str(), nb, b.str()));
  return *this;
}

ArgCheck& ArgCheck::rows(const Tensor& t, int64_t r, int64_t c, const char* name) {
  if (!ok_) return *this;
  if (t.rank() != 2) return bad(fmt::format("{} {} must be 2-D", name, t.str()));
  if (r >= 0 && t.dim(0) != r) return bad(fmt::format("{} {} must have {} rows", name, t.str(), r));
  if (c >= 0 && t.dim(1) != c)
    return bad(fmt::format("{} {} must have {} columns", name, t.str(), c));
  if (t.dim(1) > 1 && t.stride(1) != 1)
    return bad(fmt::format("{} {}: innermost stride {} (must be 1)", name, t.str(), t.stride(1)));
  if (t.dim(0) > 1 && t.stride(0) < t.dim(1))
    return bad(fmt::format("{} {}: row stride {} below its width", name, t.str(), t.stride(0)));
  return *this;
}

ArgCheck& ArgCheck::contiguous(const Tensor& t, const Shape& shape, const char* name) {
  if (!ok_) return *this;
  if (t.shape() != shape)
    return bad(fmt::format("{} {} must have shape {}", name, t.str(), shape.str()));
  if (!t.is_contiguous()) return bad(fmt::format("{} {} must be contiguous", name, t.str()));
  return *this;
}

ArgCheck& ArgCheck::require(bool cond, const std::string& what) {
  if (!ok_ || cond) return *this;
  return bad(what);
}

Mat mat_of(const Tensor& t) {
  Mat m;
  m.p = t.raw();
  m.rows = t.dim(0);
  m.cols = t.dim(1);
  m.ld = t.dim(0) > 1 ? t.stride(0) : t.dim(1);
  m.dt = t.dtype();
  return m;
}

Mat opt_mat_of(const Tensor& t) {
  return t.defined() ? mat_of(t) : Mat{};
}

void check_quantized_out(ArgCheck& c, const Tensor& out, const Tensor& out_q, float scale,
                         int64_t rows, int64_t cols) {
  if (!out_q.defined()) {
    c.require(out.defined(), "out must be given (or out_q)");
    return;
  }
  c.on_device(out_q, "out_q").dtype(out_q, DType::F8E4M3, "out_q").rows(out_q, rows, cols, "out_q");
  c.require(scale > 0.f, fmt::format("out_q_scale {} must be > 0", scale));
}

QuantOut quant_out_of(const Tensor& out_q, float scale) {
  QuantOut q;
  if (!out_q.defined()) return q;
  q.p = out_q.raw();
  q.ld = out_q.dim(0) > 1 ? out_q.stride(0) : out_q.dim(1);
  q.scale = scale;
  return q;
}

Vec vec_of(const Tensor& t) {
  Vec v;
  if (!t.defined()) return v;
  v.p = t.raw();
  v.n = t.numel();
  v.dt = t.dtype();
  return v;
}

void* stream_of(const OpContext& ctx) {
  // ctx.stream is the context's step stream (cuda::bind), or its side stream while a
  // SideBranch runs work there (ops/side_branch.h).
  return ctx.stream ? ctx.stream : context_of(ctx).stream();
}

bool kernel_disabled(const char* op, const char* kernel) {
  static const std::set<std::string> off = [] {
    std::set<std::string> v;
    const char* e = std::getenv("STRATA_CUDA_DISABLE_KERNELS");
    std::stringstream ss(e ? e : "");
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) v.insert(item);
    return v;
  }();
  return !off.empty() && off.count(std::string(op) + ":" + kernel) > 0;
}

int64_t warp_form_min_rows() {
  static const int64_t rows = [] {
    const char* v = std::getenv("STRATA_WARP_FORM_MIN_ROWS");
    return v ? std::max<int64_t>(1, std::atoll(v)) : kWarpFormMinRows;
  }();
  return rows;
}

}  // namespace strata::cuda
