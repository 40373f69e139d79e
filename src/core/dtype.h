// Element types and scalar conversions. Conversions round exactly as PyTorch's casts do
// (round to nearest, ties to even; NaN and infinity handled per format), so host results
// can be compared bit for bit with tensors produced by PyTorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace strata {

enum class DType : uint8_t {
  F32,
  F64,
  F16,
  BF16,
  F8E4M3,  // float8_e4m3fn: no infinities, one NaN pattern per sign (S.1111.111), max 448
  U8,      // raw bytes; NVFP4 weights pack two e2m1 codes per byte (low nibble first)
  I8,
  I32,
  I64,
  Bool,
};

size_t dtype_size(DType t);
// Unit roundoff of a float dtype (half an ulp at 1): 2^-53 (f64), 2^-24 (f32), 2^-11 (f16),
// 2^-8 (bf16), 2^-4 (e4m3); 0 for the integer and raw types. Tolerances are derived from it.
double unit_roundoff(DType t);
std::string_view dtype_name(DType t);  // "f32", "bf16", ...
// safetensors spellings: "F32", "BF16", "F8_E4M3", ... ; nullopt when unknown.
std::optional<DType> dtype_from_safetensors(std::string_view s);
std::string_view dtype_to_safetensors(DType t);

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16: the top 16 bits of an f32. NaN stays NaN (quiet, 0x7fc0 with its sign).
inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// Round an f32 to the nearest bf16-representable value (the "store in model dtype" point).
inline float round_bf16(float f) {
  return bf16_to_f32(f32_to_bf16(f));
}

// IEEE half.
float f16_to_f32(uint16_t h);
uint16_t f16_from_f32(float f);
inline float round_f16(float f) {
  return f16_to_f32(f16_from_f32(f));
}

// float8_e4m3fn. f32 -> e4m3 as torch's `.to(torch.float8_e4m3fn)`: values whose magnitude
// rounds above 448 (|x| >= 464 after rounding, i.e. |x| >= 480 in torch's bit test) become NaN,
// as do inf and NaN. The _sat variant clamps to +-448 first (what quantizers do).
float fp8e4m3_to_f32(uint8_t v);
uint8_t fp8e4m3_from_f32(float f);
uint8_t fp8e4m3_from_f32_sat(float f);
constexpr float kFp8E4M3Max = 448.0f;

// e2m1 (NVFP4 element): 4-bit code, sign in bit 3, magnitudes {0,.5,1,1.5,2,3,4,6}.
// Rounding is to nearest with ties to even and saturates at +-6. e2m1 has no NaN; a NaN
// input gives +6 (quantizers clamp before rounding, so it cannot arise from valid data).
float e2m1_to_f32(uint8_t code);
uint8_t e2m1_from_f32(float f);

// Generic element access for reference code: read any float dtype as f32 / write with rounding.
float load_as_f32(const void* base, DType t, size_t index);
void store_from_f32(void* base, DType t, size_t index, float v);
double load_as_f64(const void* base, DType t, size_t index);

inline bool is_float(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16 ||
         t == DType::F8E4M3;
}

}  // namespace strata
