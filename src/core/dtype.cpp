#include "core/dtype.h"

#include <cmath>
#include <limits>

#include "core/check.h"

namespace strata {

double unit_roundoff(DType t) {
  switch (t) {
    case DType::F64:
      return std::ldexp(1.0, -53);
    case DType::F32:
      return std::ldexp(1.0, -24);
    case DType::F16:
      return std::ldexp(1.0, -11);
    case DType::BF16:
      return std::ldexp(1.0, -8);
    case DType::F8E4M3:
      return std::ldexp(1.0, -4);
    default:
      return 0.0;
  }
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F64:
      return 8;
    case DType::F16:
      return 2;
    case DType::BF16:
      return 2;
    case DType::F8E4M3:
      return 1;
    case DType::U8:
      return 1;
    case DType::I8:
      return 1;
    case DType::I32:
      return 4;
    case DType::I64:
      return 8;
    case DType::Bool:
      return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "f32";
    case DType::F64:
      return "f64";
    case DType::F16:
      return "f16";
    case DType::BF16:
      return "bf16";
    case DType::F8E4M3:
      return "f8e4m3";
    case DType::U8:
      return "u8";
    case DType::I8:
      return "i8";
    case DType::I32:
      return "i32";
    case DType::I64:
      return "i64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

namespace {
struct SafetensorsName {
  std::string_view name;
  DType dtype;
};
constexpr SafetensorsName kSafetensorsNames[] = {
    {"F32", DType::F32},        {"F64", DType::F64},   {"F16", DType::F16}, {"BF16", DType::BF16},
    {"F8_E4M3", DType::F8E4M3}, {"U8", DType::U8},     {"I8", DType::I8},   {"I32", DType::I32},
    {"I64", DType::I64},        {"BOOL", DType::Bool},
};
}  // namespace

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  for (const auto& e : kSafetensorsNames)
    if (e.name == s) return e.dtype;
  return std::nullopt;
}

std::string_view dtype_to_safetensors(DType t) {
  for (const auto& e : kSafetensorsNames)
    if (e.dtype == t) return e.name;
  return "?";
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp == 0) {
    // zero or subnormal: value = man * 2^-24, exact in f32
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t f16_from_f32(float f) {
  const uint32_t u = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // result is subnormal (or zero): round abs * 2^24 to an integer, ties to even
    const float scaled = f32_from_bits(abs) * 16777216.0f;  // exact: power-of-two scaling
    const float r = std::nearbyint(scaled);                 // default FE_TONEAREST: ties to even
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(r));
  }
  // normal: rebias exponent and round the 13 dropped mantissa bits to nearest even
  uint32_t v = abs - (112u << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

float fp8e4m3_to_f32(uint8_t v) {
  const bool neg = v & 0x80u;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t man = v & 0x7u;
  float r;
  if (exp == 0xf && man == 0x7) {
    r = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    r = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
  } else {
    r = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, static_cast<int>(exp) - 7);
  }
  return neg ? -r : r;
}

uint8_t fp8e4m3_from_f32(float f) {
  const uint32_t u = f32_bits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7fffffffu;
  // Same decision points as c10::detail::fp8e4m3fn_from_fp32_value: |x| >= 480 (and inf, NaN)
  // give NaN; [448, 480) rounds to 448 by ties-to-even.
  if (abs >= 0x43f00000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (abs < (121u << 23)) {
    // below the smallest normal (2^-6): round abs / 2^-9 to an integer, ties to even
    const float scaled = f32_from_bits(abs) * 512.0f;
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::nearbyint(scaled)));
  }
  uint32_t v = abs - (120u << 23);  // rebias 127 -> 7
  v += 0x7ffffu + ((v >> 20) & 1u);
  return static_cast<uint8_t>(sign | (v >> 20));
}

uint8_t fp8e4m3_from_f32_sat(float f) {
  if (std::isnan(f)) return 0x7f;
  if (f > kFp8E4M3Max) f = kFp8E4M3Max;
  if (f < -kFp8E4M3Max) f = -kFp8E4M3Max;
  return fp8e4m3_from_f32(f);
}

float e2m1_to_f32(uint8_t code) {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMag[code & 0x7u];
  return (code & 0x8u) ? -m : m;
}

uint8_t e2m1_from_f32(float f) {
  const uint8_t sign = std::signbit(f) ? 0x8u : 0x0u;
  const float a = std::fabs(f);
  if (std::isnan(a)) return 0x7u;
  // Midpoints between neighbours; at an exact midpoint pick the even code (ties to even).
  uint8_t code;
  if (a <= 0.25f)
    code = 0;  // tie 0.25 -> 0 (even)
  else if (a < 0.75f)
    code = 1;  // tie 0.75 -> 1.0 (code 2, even)
  else if (a <= 1.25f)
    code = 2;  // tie 1.25 -> 1.0
  else if (a < 1.75f)
    code = 3;  // tie 1.75 -> 2.0
  else if (a <= 2.5f)
    code = 4;  // tie 2.5 -> 2.0
  else if (a < 3.5f)
    code = 5;  // tie 3.5 -> 4.0
  else if (a <= 5.0f)
    code = 6;  // tie 5.0 -> 4.0
  else
    code = 7;  // saturate at 6
  return static_cast<uint8_t>(sign | code);
}

float load_as_f32(const void* base, DType t, size_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(base)[i];
    case DType::F64:
      return static_cast<float>(static_cast<const double*>(base)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::BF16:
      return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::F8E4M3:
      return fp8e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    case DType::I32:
      return static_cast<float>(static_cast<const int32_t*>(base)[i]);
    default:
      fail("load_as_f32: unsupported dtype {}", dtype_name(t));
  }
}

double load_as_f64(const void* base, DType t, size_t i) {
  if (t == DType::F64) return static_cast<const double*>(base)[i];
  return static_cast<double>(load_as_f32(base, t, i));
}

void store_from_f32(void* base, DType t, size_t i, float v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(base)[i] = v;
      return;
    case DType::F64:
      static_cast<double*>(base)[i] = v;
      return;
    case DType::F16:
      static_cast<uint16_t*>(base)[i] = f16_from_f32(v);
      return;
    case DType::BF16:
      static_cast<uint16_t*>(base)[i] = f32_to_bf16(v);
      return;
    case DType::F8E4M3:
      static_cast<uint8_t*>(base)[i] = fp8e4m3_from_f32(v);
      return;
    default:
      fail("store_from_f32: unsupported dtype {}", dtype_name(t));
  }
}

}  // namespace strata
