// The op harness: every CUDA kernel against the host reference kernel on the same random
// inputs. For one case (op, shapes, dtypes) it
//   1. mirrors every tensor of the host arguments onto the device, each storage in a buffer
//      with guard bytes on both sides (sentinel 0xA5); storages only written by the op are
//      poisoned first (0xFF: NaN in f32/bf16, -1 in i32), others get the host's input bytes;
//   2. runs the host kernel (the reference) on the host arguments;
//   3. runs every CUDA kernel whose supports() accepts the arguments (re-initializing the
//      device buffers before each), synchronizes, and checks: no index errors counted, guards
//      untouched, bytes of poisoned storages outside the output views untouched, no NaN/inf,
//      every output element written, and each element within the case's tolerance;
//   4. reports "unsupported: <reasons>" when no CUDA kernel takes the case.
// Tolerances are derived from dtypes and reduction lengths (Tolerance, below).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/ops.h"

namespace strata::opstest {

// ---- random inputs ----

// splitmix64-based generator: fast enough to fill gigabytes of expert weights.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(next() >> 40) * (1.0f / 16777216.0f);
  }
  // Sum of four uniforms, scaled to unit variance: bell-shaped, bounded, cheap.
  float normal() {
    float s = 0.f;
    for (int i = 0; i < 4; ++i)
      s += uniform(-1.f, 1.f);
    return s * 0.8660254f;  // sqrt(3 / 4)
  }
  int32_t int_in(int32_t lo, int32_t hi) {  // inclusive
    return lo + static_cast<int32_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t s_;
};

// Host tensors of random values (stored in `dtype` with its rounding). Values are drawn away
// from zero's neighbourhood only by chance: zeros would hide unwritten outputs.
Tensor uniform_tensor(Rng& rng, const Shape& shape, DType dtype, float lo, float hi);
Tensor normal_tensor(Rng& rng, const Shape& shape, DType dtype, float stddev);
Tensor i32_tensor(const std::vector<int32_t>& values);
Tensor i32_tensor(const std::vector<int32_t>& values, const Shape& shape);
// e4m3 weight whose dequantized values (code * scale) are ~N(0, stddev^2): codes span the range.
Tensor fp8_weight(Rng& rng, const Shape& shape, float stddev, float* scale_out);
// e4m3 weight drawn uniformly over codes: every finite code, or (small) only those with exponent
// field 0 or 1 (the subnormals and the smallest normals, which a conversion that flushed
// subnormals would get visibly wrong). The scale makes the dequantized rms `stddev`.
Tensor fp8_codes(Rng& rng, const Shape& shape, bool small, float stddev, float* scale_out);
// A [rows, cols] view into a wider random tensor ([rows, cols + pad], starting at column
// `offset`): the row-view convention of the op table.
Tensor wide_rows(Rng& rng, int64_t rows, int64_t cols, int64_t pad, int64_t offset, DType dtype,
                 float stddev);

// ---- tolerance ----

// How far a device result may lie from the host result, per element:
//   |dev - host| <= rel * |host| + abs,
//   rel = 2 u_out                 the two results may round to neighbouring values of the
//                                 output dtype (one ulp <= 2 u |v|)
//       + 2 u_act * roundings     each act rounding upstream inside the op may flip by one ulp
//       + 4 u_f32 * (math + 1)    CUDA expf/log1pf/sqrt-based paths err by <= 2 ulp each
//       + extra_rel
//   abs = rms(host) * (8 sqrt(K) u_f32 + 2 u_act * roundings_before_sum)
//                                 f32 sums of K terms in another order differ by ~ sqrt(K) u
//                                 times the size of the sum (random signs: the sum's scale is
//                                 the output's rms); 8 = eight standard deviations. Inputs of
//                                 the sum that were rounded to act inside the op may flip by
//                                 an ulp; random signs keep that under 2 u_act * rms.
//   + rms(host) * 2^-10 when `fp8_mma`: Hopper's FP8 tensor cores keep ~14 bits in their
//                                 partial sums (cuBLASLt promotes them to f32 per k-block), so
//                                 an FP8 GEMM output carries ~2^-14 of the output scale per block
//                                 sum; 2^-10 leaves 16 standard deviations (measured on the
//                                 H200: up to 2^-11.5 of rms at K = 15680).
// + extra_abs[i] per element when `extra_abs` is set (a host tensor shaped like the output,
//                                 contiguous): a data-dependent bound the case derives itself.
// When `rel_l2` is set the case is judged by ||dev - host|| / ||host|| <= rel_l2 instead
// (W8A8 vs the W8A16 reference, where activation quantization makes elementwise bounds moot).
struct Tolerance {
  int64_t reduction = 1;
  int roundings = 0;
  int roundings_before_sum = 0;
  int math = 0;
  double extra_rel = 0.0;
  double rel_l2 = 0.0;
  bool fp8_mma = false;
  Tensor extra_abs;
};

// ---- cases ----

struct Outcome {
  enum Status { Passed, Failed, Unsupported } status = Passed;
  std::string detail;    // failures: what and where; unsupported: the kernels' reasons
  std::string kernels;   // kernels that ran
  int64_t compared = 0;  // output elements compared
  double worst = 0.0;    // largest |err| / tol over elements (passes are < 1)
};

struct OpCase {
  std::string op;
  std::string label;  // shapes and dtypes
  bool expect_supported = true;
  std::function<Outcome(Rng&)> run;
};

std::vector<OpCase>& cases();
struct CaseRegistrar {
  explicit CaseRegistrar(std::vector<OpCase> (*make)()) {
    for (auto& c : make())
      cases().push_back(std::move(c));
  }
};
#define STRATA_OP_CASES(fn) static ::strata::opstest::CaseRegistrar strata_cases_##fn(fn)

// ---- running one case ----

// A custom check of an output pair (host reference, device result; `index` = position in
// visit order), for outputs compared by another rule than the tolerance (ids near ties):
// returns "" when acceptable, "skip" to use the default comparison, else what is wrong.
using OutputCheck = std::function<std::string(int index, const Tensor& host, const Tensor& dev)>;

namespace detail {
class Mirror;  // host storage -> guarded device buffer

struct Runner {
  Runner();
  ~Runner();
  Tensor mirror(const Tensor& host, ops::Role role);  // device view of a host tensor
  void prepare();  // (re)initializes every device buffer: inputs, poison, guards
  std::string verify_guards_and_gaps();
  Tensor download(const Tensor& host_view, const Tensor& dev_view);  // host copy, same layout
  std::unique_ptr<Mirror> m;
};

// Binds ctx to the CUDA backend's stream.
void bind_cuda(OpContext& ctx);
// Synchronizes; returns "" or what went wrong (an asynchronous fault, counted index errors).
std::string sync_and_errors();

// Compares one output (any dtype; floats by `tol`), appends to `out`.
void compare_output(int index, const Tensor& host, const Tensor& dev, DType act,
                    const Tolerance& tol, const OutputCheck& check, Outcome& out);
std::string describe(const Tensor& t);
}  // namespace detail

// Runs every CUDA kernel for `host_args` against the host kernel. `to_device` may mirror
// tensors that visit() does not list (expert weights). `only_kernel`: run just the CUDA kernel
// of that name (a check written for one kernel's arithmetic).
template <class Args>
Outcome run_case(
    Args host_args, DType act, const Tolerance& tol,
    const std::function<void(Args& dev, std::vector<std::shared_ptr<void>>& keep)>& to_device = {},
    const OutputCheck& check = {}, const std::string& only_kernel = "") {
  Outcome out;
  detail::Runner runner;
  std::vector<std::pair<Tensor, ops::Role>> host_ts;
  host_args.visit([&](Tensor& t, ops::Role r) { host_ts.emplace_back(t, r); });
  Args dev_args = host_args;
  dev_args.visit([&](Tensor& t, ops::Role r) { t = runner.mirror(t, r); });
  std::vector<std::shared_ptr<void>> keep;
  if (to_device) to_device(dev_args, keep);
  std::vector<Tensor> dev_ts;
  dev_args.visit([&](Tensor& t, ops::Role) { dev_ts.push_back(t); });

  // The reference.
  OpContext host_ctx;
  host_ctx.device = Device::Host;
  const Kernel<Args>* host_kernel = nullptr;
  std::string host_why;
  for (const auto& k : OpTable<Args>::kernels()) {
    if (k.device != Device::Host) continue;
    std::string why;
    if (k.supports(host_args, &why)) {
      host_kernel = &k;
      break;
    }
    host_why += " [" + std::string(k.name) + ": " + why + "]";
  }
  if (!host_kernel) {
    out.status = Outcome::Failed;
    out.detail = "no host reference kernel takes the case:" +
                 (host_why.empty() ? std::string(" none registered") : host_why);
    return out;
  }
  try {
    host_kernel->run(host_args, host_ctx);
  } catch (const std::exception& e) {
    out.status = Outcome::Failed;
    out.detail = std::string("the host reference threw: ") + e.what();
    return out;
  }

  std::string reasons;
  bool any = false;
  for (const auto& k : OpTable<Args>::kernels()) {
    if (k.device != Device::Cuda) continue;
    if (!only_kernel.empty() && only_kernel != k.name) continue;
    std::string why;
    if (!k.supports(dev_args, &why)) {
      reasons += " [" + std::string(k.name) + ": " + why + "]";
      continue;
    }
    any = true;
    out.kernels += (out.kernels.empty() ? "" : ",") + std::string(k.name);
    try {
      runner.prepare();
      OpContext ctx;
      detail::bind_cuda(ctx);
      k.run(dev_args, ctx);
      const std::string err = detail::sync_and_errors();
      if (!err.empty()) {
        out.status = Outcome::Failed;
        out.detail += std::string(k.name) + ": " + err + "\n";
        continue;
      }
      const std::string g = runner.verify_guards_and_gaps();  // also snapshots the device bytes
      if (!g.empty()) {
        out.status = Outcome::Failed;
        out.detail += std::string(k.name) + ": " + g + "\n";
      }
      Outcome one;
      for (size_t i = 0; i < host_ts.size(); ++i) {
        if (host_ts[i].second == ops::Role::In) continue;
        const Tensor got = runner.download(host_ts[i].first, dev_ts[i]);
        detail::compare_output(static_cast<int>(i), host_ts[i].first, got, act, tol, check, one);
      }
      out.compared += one.compared;
      out.worst = std::max(out.worst, one.worst);
      if (one.status == Outcome::Failed) {
        out.status = Outcome::Failed;
        out.detail += std::string(k.name) + ":\n" + one.detail;
      }
    } catch (const std::exception& e) {
      out.status = Outcome::Failed;
      out.detail += std::string(k.name) + " threw: " + e.what() + "\n";
    }
  }
  if (!any) {
    out.status = Outcome::Unsupported;
    out.detail = reasons;
  }
  return out;
}

}  // namespace strata::opstest
