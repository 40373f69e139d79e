// Host emulation helpers for checks of one kernel's own arithmetic (cases_ssd_mma_exact.cpp,
// cases_moe_w8a8.cpp): a value computed in float64 travels with a bound on how far the device's
// f32 value may lie from it, and a rounding to a narrow dtype keeps that bound honest: it is 0
// when no rounding boundary lies within the bound (every value the device may hold rounds to the
// same result) and otherwise the distance to the farthest result it may round to.
#pragma once

#include <algorithm>
#include <cmath>

namespace strata::opstest {

// f32 unit roundoff 2^-24.
constexpr double kU32 = 1.0 / 16777216.0;

// An f32 sum on the device (K terms, any order, tensor-core or CUDA-core adders), emulated in
// float64. Each device addition errs by at most 2 u |partial| (2 u, not u: tensor-core adders
// truncate). Taking the partial sums of this sequential order as the partials' scale and the
// errors as independent (random signs), the total error has standard deviation at most
// 2 u sqrt(sum_k S_k^2 / 3); kSigmas of them bound it: about sqrt(K) u times the sum's scale,
// where a worst-case (same-sign) bound would be K u times the sum of |terms| and would cover
// any moved bf16 rounding in long sums. `carried` adds the terms' own bounds (worst case,
// linear): the inputs' uncertainty is not random.
struct F32Sum {
  static constexpr double kSigmas = 10.0;
  double v = 0.0, sq = 0.0, carried = 0.0;
  explicit F32Sum(double start = 0.0, double start_err = 0.0) : v(start), carried(start_err) {}
  void add(double t, double t_err = 0.0) {
    v += t;
    sq += v * v;
    carried += t_err;
  }
  double err() const { return carried + kSigmas * 2.0 * kU32 * std::sqrt(sq / 3.0); }
};

// Nearest bf16 to a double (ties to even), subnormals included; no overflow in these checks.
inline double round_bf16_f64(double v) {
  if (v == 0.0 || !std::isfinite(v)) return v;
  int ex = 0;
  std::frexp(v, &ex);                       // v = m 2^ex, 0.5 <= |m| < 1
  ex = std::max(ex, -125);                  // below 2^-126 the quantum stays 2^-133
  const double q = std::ldexp(1.0, ex - 8);  // 8 significant bits
  return std::nearbyint(v / q) * q;         // default rounding mode: to nearest, ties to even
}

// Half the bf16 spacing at v (for reporting err / band: the rounding of a result adds this).
inline double half_ulp_bf16(double v) {
  int ex = 0;
  std::frexp(v, &ex);
  return std::ldexp(1.0, std::max(ex, -125) - 9);
}

// A value held in a narrow dtype and how far the device's may lie from it.
struct Bounded {
  double v = 0.0, e = 0.0;
};

// bf16(v) where the device holds v within e before rounding.
inline Bounded round_bf16_bounded(double v, double e) {
  const double r = round_bf16_f64(v);
  if (e == 0.0) return {r, 0.0};
  const double lo = round_bf16_f64(v - e), hi = round_bf16_f64(v + e);
  return {r, std::max(r - lo, hi - r)};
}

// Whether a device output d (bf16, already rounded) may come from a pre-rounding value within
// e of v: rounding is monotone, so d must lie between the roundings of v - e and v + e.
inline bool bf16_within(double d, double v, double e) {
  return d >= round_bf16_f64(v - e) && d <= round_bf16_f64(v + e);
}

}  // namespace strata::opstest
