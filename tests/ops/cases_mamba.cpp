// Cases: conv1d_prefill, conv1d_update, ssm_scan, ssm_update (packed sequences, state slots,
// chunked-prefill continuations, sequences shorter than the conv window, empty sequences).
#include <algorithm>
#include <cmath>

#include "cases_ssm.h"
#include "cases_util.h"

namespace strata::opstest {
namespace {

using namespace strata::ops;

std::vector<int32_t> offsets_of(const std::vector<int32_t>& lens) {
  std::vector<int32_t> cu{0};
  for (int32_t l : lens)
    cu.push_back(cu.back() + l);
  return cu;
}

int64_t total(const std::vector<int32_t>& lens) {
  return offsets_of(lens).back();
}

// ---- conv1d ----

struct ConvS {
  const char* name;
  int64_t C;
  std::vector<int32_t> lens;  // prefill: tokens per sequence; update: one per entry
  std::vector<int32_t> has_initial;
};

constexpr int64_t kConvK = 4, kSlots = 9;

std::vector<OpCase> conv_cases() {
  const ConvS shapes[] = {
      {"nano3", Nano3::conv_dim, {300}, {0}},
      {"nano3", Nano3::conv_dim, {5, 1, 17, 2}, {1, 0, 1, 1}},
      {"9b", Nano9B::conv_dim, {130, 3}, {1, 0}},
      {"odd", 131, {1, 0, 2, 17, 3}, {1, 1, 0, 1, 1}},
      // Runs of 16 tokens crossing several short sequences (the bf16 run kernel).
      {"9b runs", Nano9B::conv_dim, {1, 2, 3, 15, 16, 33, 1}, {1, 0, 1, 1, 0, 1, 1}},
      // One sequence of odd lengths (partial runs) and a prefill of 512 from the state.
      {"nano3", Nano3::conv_dim, {1}, {1}},
      {"nano3", Nano3::conv_dim, {2}, {0}},
      {"nano3", Nano3::conv_dim, {3}, {1}},
      {"nano3", Nano3::conv_dim, {17}, {1}},
      {"nano3", Nano3::conv_dim, {255}, {0}},
      {"nano3", Nano3::conv_dim, {512}, {1}},
      {"nano3", Nano3::conv_dim, {4097}, {1}},
      // An even width that is not a multiple of 4, runs across sequences.
      {"pairs", 6146, {1, 2, 3, 15, 16, 33, 1}, {1, 0, 1, 1, 0, 1, 1}},
  };
  std::vector<OpCase> out;
  for (const ConvS& s : shapes)
    for (DType act : acts()) {
      out.push_back({"conv1d_prefill",
                     fmt::format("{} C={} K={} lens {} has_initial {} {}", s.name, s.C, kConvK,
                                 fmt::join(s.lens, ","), fmt::join(s.has_initial, ","), dt(act)),
                     true, [s, act](Rng& rng) {
                       Conv1dPrefillArgs a;
                       const int64_t T = total(s.lens), B = static_cast<int64_t>(s.lens.size());
                       a.x = wide_rows(rng, T, s.C, 4096 + 64, 4096, act,
                                       1.f);  // xBC: columns of in_proj rows
                       a.weight = normal_tensor(rng, Shape{s.C, kConvK}, act, 0.5f);
                       a.bias = normal_tensor(rng, Shape{s.C}, act, 0.5f);
                       a.conv_states = normal_tensor(rng, Shape{kSlots, kConvK - 1, s.C}, act, 1.f);
                       a.cu_seqlens = i32_tensor(offsets_of(s.lens));
                       a.slots = i32_tensor(distinct(rng, B, kSlots));
                       a.has_initial = i32_tensor(s.has_initial);
                       a.out = Tensor::empty(Shape{T, s.C}, act);
                       Tolerance tol;  // K products and the bias; silu's exp
                       tol.reduction = kConvK + 1;
                       tol.math = 1;
                       return run_case(a, act, tol);
                     }});
    }
  for (int64_t C : {Nano3::conv_dim, Nano9B::conv_dim, int64_t{131}})
    for (int64_t B : {int64_t{1}, int64_t{3}, int64_t{8}})
      for (DType act : acts())
        out.push_back({"conv1d_update", fmt::format("C={} B={} {}", C, B, dt(act)), true,
                       [C, B, act](Rng& rng) {
                         Conv1dUpdateArgs a;
                         a.x = wide_rows(rng, B, C, 100, 50, act, 1.f);
                         a.weight = normal_tensor(rng, Shape{C, kConvK}, act, 0.5f);
                         a.bias = normal_tensor(rng, Shape{C}, act, 0.5f);
                         a.conv_states = normal_tensor(rng, Shape{kSlots, kConvK - 1, C}, act, 1.f);
                         a.slots = i32_tensor(distinct(rng, B, kSlots));
                         a.out = Tensor::empty(Shape{B, C}, act);
                         Tolerance tol;
                         tol.reduction = kConvK + 1;
                         tol.math = 1;
                         return run_case(a, act, tol);
                       }});
  return out;
}

// ---- ssm ----

struct SsmS {
  const char* name;
  int64_t Hm, P, G, N, chunk;
  std::vector<int32_t> lens;
  std::vector<int32_t> has_initial;
  bool bf16_params;   // D and dt_bias stored in the act dtype (vLLM) instead of f32
  bool tensor_cores;  // bf16 runs must include the tensor-core kernel (shapes of cuda/ssm.h)
};

constexpr const char* kScanMmaKernel = "cuda.ssd_mma";
// The one-pass kernels take the tensor-core shapes with N <= 2 chunk.
constexpr const char* kScanFusedKernels[] = {"cuda.ssd_fused", "cuda.ssd_chain"};

constexpr int64_t kSsmSlots = 5;

// x, B, C and dt as column ranges of one in_proj-like row (the layout the model passes).
template <class A>
void ssm_inputs(A& a, Rng& rng, int64_t T, int64_t Hm, int64_t P, int64_t G, int64_t N, DType act) {
  const int64_t xw = Hm * P, bw = G * N, width = 17 + xw + 2 * bw + Hm;
  Tensor row = normal_tensor(rng, Shape{T, width}, act, 1.f);
  a.x = row.slice(1, 17, xw);
  a.B = row.slice(1, 17 + xw, bw);
  a.C = row.slice(1, 17 + xw + bw, bw);
  a.dt_raw = row.slice(1, 17 + xw + 2 * bw, Hm);
}

// What the harness cannot know about a scan case: that the tensor-core kernel took the bf16
// runs the table marks, and that every kernel that ran compared all of y [T, Hm*P] and the
// whole state tensor [slots, Hm, P, N].
// Whether `name` is one of the comma-separated kernel names (exactly, not as a substring).
bool ran_kernel(const std::string& kernels, const char* name) {
  return ("," + kernels + ",").find("," + std::string(name) + ",") != std::string::npos;
}

Outcome check_scan_coverage(Outcome o, const SsmS& s, DType act, int64_t T) {
  if (o.status != Outcome::Passed) return o;
  if (act == DType::BF16 && s.tensor_cores && !ran_kernel(o.kernels, kScanMmaKernel)) {
    o.status = Outcome::Failed;
    o.detail = fmt::format("{} did not take this bf16 case (ran: {})", kScanMmaKernel, o.kernels);
    return o;
  }
  for (const char* fused : kScanFusedKernels)
    if (act == DType::BF16 && s.tensor_cores && s.N <= 2 * s.chunk &&
        !ran_kernel(o.kernels, fused)) {
      o.status = Outcome::Failed;
      o.detail = fmt::format("{} did not take this bf16 case (ran: {})", fused, o.kernels);
      return o;
    }
  const int64_t runs = 1 + std::count(o.kernels.begin(), o.kernels.end(), ',');
  const int64_t per_run = T * s.Hm * s.P + kSsmSlots * s.Hm * s.P * s.N;
  if (o.compared != runs * per_run) {
    o.status = Outcome::Failed;
    o.detail = fmt::format("compared {} elements, expected {} kernel run(s) x {}", o.compared, runs,
                           per_run);
  }
  return o;
}

std::vector<OpCase> ssm_cases() {
  // Real head/group/state shapes first; lengths around the chunk (1, Q-1, Q, Q+1, several
  // chunks) with and without initial states. The "odd" shapes cover the f32-math kernel's
  // generality (head_dim and state sizes off the mma tiles) and the tensor-core kernel's limits.
  const SsmS scans[] = {
      {"nano3",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {300},
       {0},
       false,
       true},
      {"nano3",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {5, 1, 11},
       {1, 0, 1},
       true,
       true},
      {"nano3",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {1, 127, 128, 129, 300},
       {1, 0, 1, 0, 1},
       true,
       true},
      // Long sequences (the one-pass kernel's chain of 17 chunks per head) around 2,048 tokens,
      // with a 1-token and a fresh 0-token sequence (state cleared) between them; 8 of nano3's
      // heads keep the host reference short.
      {"nano3 heads, long",
       8,
       Nano3::head_dim,
       1,
       Nano3::state,
       128,
       {2047, 1, 0, 2049},
       {1, 0, 0, 1},
       false,
       true},
      {"nano3 decode-sized",
       Nano3::heads,
       Nano3::head_dim,
       Nano3::groups,
       Nano3::state,
       128,
       {1},
       {1},
       false,
       true},
      {"9b",
       Nano9B::heads,
       Nano9B::head_dim,
       Nano9B::groups,
       Nano9B::state,
       128,
       {130},
       {1},
       false,
       true},
      {"9b",
       Nano9B::heads,
       Nano9B::head_dim,
       Nano9B::groups,
       Nano9B::state,
       128,
       {129, 1, 385, 128, 127},
       {0, 1, 1, 0, 1},
       true,
       true},
      {"47b/56b state N=256 (32 of 256 heads)", 32, 64, 8, 256, 128, {257, 3}, {1, 0}, false, true},
      {"odd", 6, 5, 3, 7, 16, {40, 3, 0, 17}, {1, 0, 1, 0}, true, false},
      {"odd N=64 chunk 64", 8, 16, 2, 64, 64, {130, 64}, {1, 1}, false, false},
      {"odd N=256 chunk 32", 4, 24, 1, 256, 32, {70}, {1}, false, false},
      {"mma chunk 32 N=64", 4, 80, 2, 64, 32, {70, 31, 32, 33, 1}, {1, 0, 1, 0, 0}, false, true},
      {"mma chunk 16 N=16", 2, 64, 1, 16, 16, {40, 15, 0}, {0, 1, 1}, true, true},
      {"mma chunk 48 N=48", 2, 64, 2, 48, 48, {100, 47}, {1, 0}, false, true},
      {"chunk 256 (f32-math kernel only)", 2, 64, 1, 128, 256, {300}, {1}, false, false},
  };
  std::vector<OpCase> out;
  for (const SsmS& s : scans)
    for (DType act : acts())
      out.push_back(
          {"ssm_scan",
           fmt::format("{} heads={}x{} groups={} N={} chunk={} lens {} has_initial {} {}{}", s.name,
                       s.Hm, s.P, s.G, s.N, s.chunk, fmt::join(s.lens, ","),
                       fmt::join(s.has_initial, ","), dt(act), s.bf16_params ? " act params" : ""),
           true, [s, act](Rng& rng) {
             SsmScanArgs a;
             const int64_t T = total(s.lens);
             ssm_inputs(a, rng, T, s.Hm, s.P, s.G, s.N, act);
             ssm_params(a, rng, s.Hm, s.bf16_params ? act : DType::F32);
             set_scan_layout(a, rng, {s.Hm, s.P, s.G, s.N, s.chunk, kSsmSlots}, s.lens,
                             s.has_initial, act);
             Tolerance tol = ssm_tolerance(s.chunk, s.N);
             tol.extra_rel = scan_decay_rel(a, s.lens);
             add_bf16_operand_rounding(tol, act);
             Outcome o = run_case(a, act, tol);
             return check_scan_coverage(std::move(o), s, act, T);
           }});
  struct U {
    const char* name;
    int64_t Hm, P, G, N, B;
  };
  const U updates[] = {{"nano3", Nano3::heads, Nano3::head_dim, Nano3::groups, Nano3::state, 1},
                       {"nano3", Nano3::heads, Nano3::head_dim, Nano3::groups, Nano3::state, 3},
                       {"9b", Nano9B::heads, Nano9B::head_dim, Nano9B::groups, Nano9B::state, 1},
                       {"9b", Nano9B::heads, Nano9B::head_dim, Nano9B::groups, Nano9B::state, 2},
                       {"odd", 6, 5, 3, 7, 3},
                       {"N=64", 8, 16, 2, 64, 2},
                       {"N=256", 4, 24, 1, 256, 1}};
  for (const U& s : updates)
    for (DType act : acts())
      out.push_back(
          {"ssm_update",
           fmt::format("{} heads={}x{} groups={} N={} B={} {}", s.name, s.Hm, s.P, s.G, s.N, s.B,
                       dt(act)),
           true, [s, act](Rng& rng) {
             SsmUpdateArgs a;
             ssm_inputs(a, rng, s.B, s.Hm, s.P, s.G, s.N, act);
             ssm_params(a, rng, s.Hm, DType::F32);
             a.ssm_states = normal_tensor(rng, Shape{kSsmSlots, s.Hm, s.P, s.N}, DType::F32, 0.5f);
             a.slots = i32_tensor(distinct(rng, s.B, kSsmSlots));
             a.heads = s.Hm;
             a.head_dim = s.P;
             a.groups = s.G;
             a.state_size = s.N;
             a.out = Tensor::empty(Shape{s.B, s.Hm * s.P}, act);
             return run_case(a, act, ssm_tolerance(1, s.N));
           }});
  return out;
}

std::vector<OpCase> all() {
  std::vector<OpCase> out = conv_cases();
  for (auto& c : ssm_cases())
    out.push_back(std::move(c));
  return out;
}

}  // namespace

STRATA_OP_CASES(all);

}  // namespace strata::opstest
