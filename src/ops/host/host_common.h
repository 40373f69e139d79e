// Shared pieces of the host reference kernels: argument checks for supports(), row views of
// 2-D activations (row stride >= width, innermost stride 1), loads to f32 and rounded stores,
// validation of index tensors, and the scalar math every family uses.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace strata::ops::host {

// Collects the first reason a kernel cannot take its arguments. Each check returns ok() so
// supports() can read as a chain: `return c.on_host(x, "x") && c.rows(x, "x", T, H) && ...`.
class ArgCheck {
 public:
  ArgCheck(const char* op, std::string* why) : op_(op), why_(why) {}

  template <class... A>
  bool fail(fmt::format_string<A...> f, A&&... a) {
    if (ok_ && why_) *why_ = fmt::format("{}: {}", op_, fmt::format(f, std::forward<A>(a)...));
    ok_ = false;
    return false;
  }
  bool ok() const { return ok_; }

  bool that(bool cond, const char* what);  // generic condition, `what` says what must hold
  bool defined(const Tensor& t, const char* name);
  // defined, on the host
  bool host(const Tensor& t, const char* name);
  bool dtype_in(const Tensor& t, const char* name, std::initializer_list<DType> allowed);
  bool float_act(const Tensor& t, const char* name);  // f32 | bf16 | f16
  // rank 2 [rows, cols], innermost stride 1, row stride >= cols (views into wider rows).
  bool rows(const Tensor& t, const char* name, int64_t rows, int64_t cols);
  // rank 1 [n], contiguous.
  bool vec(const Tensor& t, const char* name, int64_t n);
  // i32, rank 1 [n], contiguous.
  bool index_vec(const Tensor& t, const char* name, int64_t n);
  // Contiguous in every dimension but the first (pools indexed by slot / block), given shape.
  bool inner_contiguous(const Tensor& t, const char* name, std::initializer_list<int64_t> shape);

 private:
  const char* op_;
  std::string* why_;
  bool ok_ = true;
};

// A 2-D activation (or a 1-D vector seen as one row): row r starts at element r * row_stride.
struct RowsView {
  char* base = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, row_stride = 0;

  explicit RowsView(const Tensor& t);
  // Reads n values of row r from column c0 into dst as f32.
  void load(int64_t r, int64_t c0, int64_t n, float* dst) const;
  void load(int64_t r, float* dst) const { load(r, 0, cols, dst); }
  // Writes n values to row r from column c0, rounding to the view's dtype.
  void store(int64_t r, int64_t c0, int64_t n, const float* src) const;
  void store(int64_t r, const float* src) const { store(r, 0, cols, src); }
};

// Reads or writes n contiguous elements of dtype `t` at `p` (typed fast paths for f32, bf16).
void load_f32(const void* p, DType t, int64_t n, float* dst);
void store_f32(void* p, DType t, int64_t n, const float* src);

// A contiguous float vector as f32 (parameters: weights, biases, A, D, ...).
std::vector<float> load_vector(const Tensor& t);
// A contiguous i32 tensor copied out (index tensors live next to the data: host here).
std::vector<int32_t> load_indices(const Tensor& t);

// Address of element (i0, i1, ...) of t through its strides.
char* element_ptr(const Tensor& t, std::initializer_list<int64_t> index);

// Value after a store to `t` and a load back: the "stored in act" rounding point.
float round_to(DType t, float v);

// The quantized output of a producer op (ops::QuantizedOut): checks that `out` or `out_q` is
// given and out_q (when given) is host [rows, cols] e4m3 rows with a scale > 0.
bool quantized_out_ok(ArgCheck& c, const Tensor& out, const Tensor& out_q, float scale,
                      int64_t rows, int64_t cols);
// Row r of out_q from n f32 values v (the op's output values before their store to act):
// e4m3_sat(round_to(act, v[i]) / scale), the division and saturation of the W8A8 quantizer.
void store_quantized_row(const Tensor& out_q, float scale, DType act, int64_t r, int64_t n,
                         const float* v);

// Index validation of packed-sequence ops; they throw strata::Error naming op and field.
// cu_seqlens: starts at 0, non-decreasing, ends at `total`.
void check_cu_seqlens(const char* op, const char* name, const std::vector<int32_t>& cu,
                      int64_t total);
// slots: each in [0, pool) and no slot twice (two sequences cannot write one state).
void check_slots(const char* op, const std::vector<int32_t>& slots, int64_t pool);

// Sum of a[i] * b[i] in f32 with eight interleaved partial sums combined pairwise: a fixed
// order (independent of threads), and one the compiler can vectorize.
inline float dot_f32(const float* a, const float* b, int64_t n) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] += a[i + j] * b[i + j];
  float tail = 0.f;
  for (; i < n; ++i)
    tail += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

inline float silu(float v) {
  return v / (1.0f + std::exp(-v));
}
inline float sigmoid(float v) {
  return 1.0f / (1.0f + std::exp(-v));
}
// As vLLM / Triton: identity above 20, log1p(exp(v)) below.
inline float softplus(float v) {
  return v > 20.0f ? v : std::log1p(std::exp(v));
}

}  // namespace strata::ops::host
