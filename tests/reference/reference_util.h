// Helpers of the reference tests: host ops against naive float64 code written in the tests.
// Inputs are random (seeded) and rounded to their dtype before use, so the kernel and the
// float64 reference read exactly the same values; outputs are poisoned with NaN first, so an
// element the kernel forgot stays NaN and fails the comparison; every comparison is counted.
//
// Tolerances come from the dtype (classical first-order rounding-error bounds):
// - storing a value in dtype d rounds it with relative error <= unit_roundoff(d)
//   (f32 2^-24, f16 2^-11, bf16 2^-8);
// - a sum of n products computed in f32 (any order) is within n * 2^-24 * sum|terms| of the
//   exact sum (Higham's gamma_n), which is what f32_band() returns.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/ops.h"

namespace strata::reftest {

// Bound on the f32 rounding error of a computation with `ops` sequential roundings over
// terms whose absolute values sum to `mag`.
inline double f32_band(double mag, int64_t ops) {
  return static_cast<double>(ops) * std::ldexp(1.0, -24) * mag;
}

// Element (i0, i1, ...) of any float tensor, through its strides, as double.
inline double get(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx)
    off += i * t.stride(d++);
  return load_as_f64(t.raw(), t.dtype(), static_cast<size_t>(off));
}
inline void set(const Tensor& t, std::initializer_list<int64_t> idx, double v) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx)
    off += i * t.stride(d++);
  store_from_f32(t.raw(), t.dtype(), static_cast<size_t>(off), static_cast<float>(v));
}

// Fills every element of a (contiguous) tensor with N(0, sigma) values rounded to its dtype.
inline void fill_normal(Tensor& t, std::mt19937_64& rng, double sigma = 1.0, double mean = 0.0) {
  std::normal_distribution<double> dist(mean, sigma);
  for (int64_t i = 0; i < t.numel(); ++i)
    store_from_f32(t.raw(), t.dtype(), static_cast<size_t>(i), static_cast<float>(dist(rng)));
}
inline void fill_uniform(Tensor& t, std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i)
    store_from_f32(t.raw(), t.dtype(), static_cast<size_t>(i), static_cast<float>(dist(rng)));
}
inline Tensor random_tensor(const Shape& s, DType d, std::mt19937_64& rng, double sigma = 1.0) {
  Tensor t = Tensor::empty(s, d);
  fill_normal(t, rng, sigma);
  return t;
}

// Every byte 0xff: NaN in f32, f16, bf16 and f8e4m3. Poisons the whole underlying storage,
// so for a view the columns outside it are NaN too (and must stay so: guards).
inline void poison(const Tensor& t) {
  std::memset(t.storage()->data, 0xff, t.storage()->bytes);
}

// A [rows, cols] view at column `col0` of a fresh NaN-poisoned [rows, cols + pad] buffer (row
// stride > width, as the op table's row views into wider projections).
struct WideRows {
  Tensor wide;
  Tensor view;
  int64_t col0 = 0;
  // Elements outside the view that are no longer NaN (writes past the view's columns).
  int64_t touched_guards() const {
    int64_t bad = 0;
    for (int64_t r = 0; r < wide.dim(0); ++r)
      for (int64_t c = 0; c < wide.dim(1); ++c)
        if ((c < col0 || c >= col0 + view.dim(1)) && !std::isnan(get(wide, {r, c}))) ++bad;
    return bad;
  }
};
inline WideRows wide_rows(int64_t rows, int64_t cols, int64_t pad, int64_t col0, DType d) {
  WideRows w;
  w.wide = Tensor::empty({rows, cols + pad}, d);
  poison(w.wide);
  w.view = w.wide.slice(1, col0, cols);
  w.col0 = col0;
  return w;
}

// A contiguous copy that never shares storage with `t`.
inline Tensor clone(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype());
  const size_t es = dtype_size(t.dtype());
  const Tensor src = t.contiguous();
  std::memcpy(c.raw(), src.raw(), static_cast<size_t>(t.numel()) * es);
  return c;
}

inline Tensor i32_tensor(const std::vector<int32_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

// Counts compared elements and reports the first failures with their place.
struct Comparison {
  int64_t compared = 0;
  int64_t failed = 0;
  double worst = 0.0;  // largest |got - want| / tol seen

  // STRATA_REFTEST_VERBOSE=1 prints how much of each band was used (to judge tightness).
  ~Comparison() {
    if (std::getenv("STRATA_REFTEST_VERBOSE"))
      std::fprintf(stderr, "compared %lld, worst err/tol %.3g\n", static_cast<long long>(compared),
                   worst);
  }

  void check(double got, double want, double tol, const std::string& where) {
    ++compared;
    const double err = std::fabs(got - want);
    if (!(err <= tol)) {  // NaN-safe: an unwritten (NaN) element fails
      if (++failed <= 8)
        ADD_FAILURE() << where << ": got " << got << ", want " << want << ", |err| " << err
                      << " > tol " << tol;
    } else if (tol > 0) {
      worst = std::max(worst, err / tol);
    }
  }
};

}  // namespace strata::reftest
