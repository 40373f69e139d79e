#include "ops/host/host_common.h"

#include <cstring>

namespace strata::ops::host {

bool ArgCheck::that(bool cond, const char* what) {
  if (!ok_) return false;
  return cond || fail("{}", what);
}

bool ArgCheck::defined(const Tensor& t, const char* name) {
  if (!ok_) return false;
  return t.defined() || fail("{} is not given", name);
}

bool ArgCheck::host(const Tensor& t, const char* name) {
  if (!defined(t, name)) return false;
  return t.device() == Device::Host ||
         fail("{} is on {}, not on the host", name, device_name(t.device()));
}

bool ArgCheck::dtype_in(const Tensor& t, const char* name, std::initializer_list<DType> allowed) {
  if (!ok_) return false;
  std::string names;
  for (DType d : allowed) {
    if (t.dtype() == d) return true;
    names += (names.empty() ? "" : "|") + std::string(dtype_name(d));
  }
  return fail("{} has dtype {}, expected {}", name, dtype_name(t.dtype()), names);
}

bool ArgCheck::float_act(const Tensor& t, const char* name) {
  return dtype_in(t, name, {DType::F32, DType::BF16, DType::F16});
}

bool ArgCheck::rows(const Tensor& t, const char* name, int64_t rows, int64_t cols) {
  if (!ok_) return false;
  if (t.rank() != 2) return fail("{} {} must be 2-D [{}, {}]", name, t.str(), rows, cols);
  if (t.dim(0) != rows || t.dim(1) != cols)
    return fail("{} {} must have shape [{}, {}]", name, t.str(), rows, cols);
  if (cols > 1 && t.stride(1) != 1)
    return fail("{} has inner stride {}, expected 1", name, t.stride(1));
  if (rows > 1 && t.stride(0) < cols)
    return fail("{} has row stride {} < width {}", name, t.stride(0), cols);
  return true;
}

bool ArgCheck::vec(const Tensor& t, const char* name, int64_t n) {
  if (!ok_) return false;
  if (t.rank() != 1 || t.dim(0) != n) return fail("{} {} must have shape [{}]", name, t.str(), n);
  return t.is_contiguous() || fail("{} must be contiguous", name);
}

bool ArgCheck::index_vec(const Tensor& t, const char* name, int64_t n) {
  return dtype_in(t, name, {DType::I32}) && vec(t, name, n);
}

bool ArgCheck::inner_contiguous(const Tensor& t, const char* name,
                                std::initializer_list<int64_t> shape) {
  if (!ok_) return false;
  const Shape want{shape};
  if (t.shape() != want) return fail("{} {} must have shape {}", name, t.str(), want.str());
  int64_t expect = 1;
  for (int d = t.rank() - 1; d >= 1; --d) {
    if (t.dim(d) > 1 && t.stride(d) != expect)
      return fail(
          "{} must be contiguous below its first dimension (stride {} of dim {}, expected {})",
          name, t.stride(d), d, expect);
    expect *= t.dim(d);
  }
  if (t.dim(0) > 1 && t.stride(0) < expect)
    return fail("{} has stride {} in its first dimension, below its row size {}", name, t.stride(0),
                expect);
  return true;
}

RowsView::RowsView(const Tensor& t) : base(static_cast<char*>(t.raw())), dtype(t.dtype()) {
  if (t.rank() == 1) {
    rows = 1;
    cols = t.dim(0);
    row_stride = cols;
  } else {
    STRATA_CHECK_EQ(t.rank(), 2);
    rows = t.dim(0);
    cols = t.dim(1);
    row_stride = t.stride(0);
  }
}

void RowsView::load(int64_t r, int64_t c0, int64_t n, float* dst) const {
  const size_t es = dtype_size(dtype);
  load_f32(base + static_cast<size_t>(r * row_stride + c0) * es, dtype, n, dst);
}

void RowsView::store(int64_t r, int64_t c0, int64_t n, const float* src) const {
  const size_t es = dtype_size(dtype);
  store_f32(base + static_cast<size_t>(r * row_stride + c0) * es, dtype, n, src);
}

bool quantized_out_ok(ArgCheck& c, const Tensor& out, const Tensor& out_q, float scale,
                      int64_t rows, int64_t cols) {
  if (!out_q.defined()) return c.that(out.defined(), "out must be given (or out_q)");
  return c.host(out_q, "out_q") && c.dtype_in(out_q, "out_q", {DType::F8E4M3}) &&
         c.rows(out_q, "out_q", rows, cols) && c.that(scale > 0.f, "out_q_scale must be > 0");
}

void store_quantized_row(const Tensor& out_q, float scale, DType act, int64_t r, int64_t n,
                         const float* v) {
  auto* q = static_cast<uint8_t*>(out_q.raw()) + r * out_q.stride(0);
  for (int64_t i = 0; i < n; ++i)
    q[i] = fp8e4m3_from_f32_sat(round_to(act, v[i]) / scale);
}

void load_f32(const void* p, DType t, int64_t n, float* dst) {
  switch (t) {
    case DType::F32:
      std::memcpy(dst, p, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::BF16: {
      const auto* s = static_cast<const uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i)
        dst[i] = bf16_to_f32(s[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i)
        dst[i] = load_as_f32(p, t, static_cast<size_t>(i));
  }
}

void store_f32(void* p, DType t, int64_t n, const float* src) {
  switch (t) {
    case DType::F32:
      std::memmove(p, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(p);
      for (int64_t i = 0; i < n; ++i)
        d[i] = f32_to_bf16(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i)
        store_from_f32(p, t, static_cast<size_t>(i), src[i]);
  }
}

std::vector<float> load_vector(const Tensor& t) {
  STRATA_CHECK(t.is_contiguous(), "load_vector of non-contiguous {}", t.str());
  std::vector<float> v(static_cast<size_t>(t.numel()));
  load_f32(t.raw(), t.dtype(), t.numel(), v.data());
  return v;
}

std::vector<int32_t> load_indices(const Tensor& t) {
  STRATA_CHECK(t.is_contiguous() && t.dtype() == DType::I32, "load_indices of {}", t.str());
  std::vector<int32_t> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) std::memcpy(v.data(), t.raw(), v.size() * sizeof(int32_t));
  return v;
}

char* element_ptr(const Tensor& t, std::initializer_list<int64_t> index) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : index)
    off += i * t.stride(d++);
  return static_cast<char*>(t.raw()) + static_cast<size_t>(off) * dtype_size(t.dtype());
}

float round_to(DType t, float v) {
  switch (t) {
    case DType::F32:
      return v;
    case DType::BF16:
      return round_bf16(v);
    case DType::F16:
      return round_f16(v);
    default: {
      alignas(8) unsigned char buf[8];
      store_from_f32(buf, t, 0, v);
      return load_as_f32(buf, t, 0);
    }
  }
}

void check_cu_seqlens(const char* op, const char* name, const std::vector<int32_t>& cu,
                      int64_t total) {
  if (cu.empty()) fail("{}: {} is empty (needs B+1 entries)", op, name);
  if (cu[0] != 0) fail("{}: {}[0] = {}, expected 0", op, name, cu[0]);
  for (size_t b = 1; b < cu.size(); ++b)
    if (cu[b] < cu[b - 1])
      fail("{}: {} decreases at {} ({} after {})", op, name, b, cu[b], cu[b - 1]);
  if (cu.back() != total)
    fail("{}: {} ends at {}, but there are {} tokens", op, name, cu.back(), total);
}

void check_slots(const char* op, const std::vector<int32_t>& slots, int64_t pool) {
  std::vector<bool> used(static_cast<size_t>(pool), false);
  for (size_t b = 0; b < slots.size(); ++b) {
    const int32_t s = slots[b];
    if (s < 0 || s >= pool)
      fail("{}: slots[{}] = {} is outside the pool of {} states", op, b, s, pool);
    if (used[static_cast<size_t>(s)])
      fail("{}: slot {} is used by two sequences of one step", op, s);
    used[static_cast<size_t>(s)] = true;
  }
}

}  // namespace strata::ops::host
