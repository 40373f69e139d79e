// token_mask: the CUDA kernel against the host reference, bit-exact (a masked logit is
// kMaskedLogit, every other one untouched), on random logits and random masks of every
// density, including row views of wider logits, a V that is not a multiple of 32, and
// all-ones / all-zero rows.
#include <cstring>

#include "cases_util.h"
#include "ops/token_mask_args.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

// Exact comparison, counting the masked logits (a case that masks none or all tests nothing).
std::string exact_logits(int, const Tensor& host, const Tensor& dev) {
  const int64_t B = host.dim(0), V = host.dim(1);
  int64_t wrong = 0, masked = 0;
  std::string first;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t v = 0; v < V; ++v) {
      const float h = host.data<float>()[b * host.stride(0) + v];
      const float d = dev.data<float>()[b * dev.stride(0) + v];
      masked += h == kMaskedLogit ? 1 : 0;
      if (std::memcmp(&h, &d, sizeof h) != 0 && ++wrong == 1)
        first = fmt::format("at [{}, {}]: device {} host {}", b, v, d, h);
    }
  if (wrong) return fmt::format("{} of {} logits differ; first {}", wrong, B * V, first);
  if (masked == 0 || masked == B * V) return "the case masks none or all: it tests nothing";
  return "";
}

std::vector<OpCase> token_mask_cases() {
  struct S {
    const char* name;
    int64_t B, V, pad;
  };
  const S shapes[] = {{"nano3 vocab", 4, Nano3::vocab, 0},
                      {"odd V, row views", 7, 1031, 9},
                      {"one row", 1, 4096, 0},
                      {"V < 32", 3, 20, 3}};
  std::vector<OpCase> out;
  for (const S& s : shapes)
    out.push_back({"token_mask",
                   fmt::format("{} B={} V={}{}", s.name, s.B, s.V, s.pad ? " logits-view" : ""),
                   true, [s](Rng& rng) {
                     TokenMaskArgs a;
                     a.logits = s.pad ? wide_rows(rng, s.B, s.V, s.pad, s.pad / 2, DType::F32, 2.f)
                                      : normal_tensor(rng, Shape{s.B, s.V}, DType::F32, 2.f);
                     const int64_t W = (s.V + 31) / 32;
                     a.mask = Tensor::empty(Shape{s.B, W}, DType::I32);
                     auto* words = reinterpret_cast<uint32_t*>(a.mask.data<int32_t>());
                     for (int64_t b = 0; b < s.B; ++b) {
                       // Row densities: random first (so a one-row case masks some and
                       // keeps some), then all allowed, none, sparse (a grammar outside
                       // strings), dense (inside a string).
                       const int kind = static_cast<int>((b + 4) % 5);
                       for (int64_t w = 0; w < W; ++w) {
                         uint32_t x = static_cast<uint32_t>(rng.next());
                         if (kind == 0) x = ~0u;
                         if (kind == 1) x = 0u;
                         const auto r1 = static_cast<uint32_t>(rng.next());
                         const auto r2 = static_cast<uint32_t>(rng.next());
                         if (kind == 2) x &= r1 & r2;
                         if (kind == 3) x |= r1;
                         words[b * W + w] = x;
                       }
                     }
                     return run_case(a, DType::F32, Tolerance{}, {}, exact_logits);
                   }});
  return out;
}

}  // namespace

STRATA_OP_CASES(token_mask_cases);

}  // namespace strata::opstest
