#include "harness.h"

#include <cmath>
#include <cstring>
#include <map>

#include "ops/cuda/cuda_backend.h"

namespace strata::opstest {

// ---- random inputs ----

Tensor uniform_tensor(Rng& rng, const Shape& shape, DType dtype, float lo, float hi) {
  Tensor t = Tensor::empty(shape, dtype, Device::Host);
  const int64_t n = t.numel();
  void* p = t.raw();
  if (dtype == DType::BF16) {
    auto* q = static_cast<uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i)
      q[i] = f32_to_bf16(rng.uniform(lo, hi));
  } else if (dtype == DType::F32) {
    auto* q = static_cast<float*>(p);
    for (int64_t i = 0; i < n; ++i)
      q[i] = rng.uniform(lo, hi);
  } else {
    for (int64_t i = 0; i < n; ++i)
      store_from_f32(p, dtype, static_cast<size_t>(i), rng.uniform(lo, hi));
  }
  return t;
}

Tensor normal_tensor(Rng& rng, const Shape& shape, DType dtype, float stddev) {
  Tensor t = Tensor::empty(shape, dtype, Device::Host);
  const int64_t n = t.numel();
  void* p = t.raw();
  if (dtype == DType::BF16) {
    auto* q = static_cast<uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i)
      q[i] = f32_to_bf16(rng.normal() * stddev);
  } else if (dtype == DType::F32) {
    auto* q = static_cast<float*>(p);
    for (int64_t i = 0; i < n; ++i)
      q[i] = rng.normal() * stddev;
  } else {
    for (int64_t i = 0; i < n; ++i)
      store_from_f32(p, dtype, static_cast<size_t>(i), rng.normal() * stddev);
  }
  return t;
}

Tensor i32_tensor(const std::vector<int32_t>& values) {
  return i32_tensor(values, Shape{static_cast<int64_t>(values.size())});
}

Tensor i32_tensor(const std::vector<int32_t>& values, const Shape& shape) {
  STRATA_CHECK_EQ(shape.numel(), static_cast<int64_t>(values.size()));
  Tensor t = Tensor::empty(shape, DType::I32, Device::Host);
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(int32_t));
  return t;
}

Tensor fp8_weight(Rng& rng, const Shape& shape, float stddev, float* scale_out) {
  // Codes of values uniform in +-173 (standard deviation 100, 4096 bins) within the e4m3 range:
  // the scale maps them back to `stddev`. A table and five codes per draw keep gigabytes of
  // expert weights cheap to make.
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> v(4096);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = fp8e4m3_from_f32_sat((2.f * (static_cast<float>(i) + 0.5f) / 4096.f - 1.f) * 173.2f);
    return v;
  }();
  Tensor t = Tensor::empty(shape, DType::F8E4M3, Device::Host);
  auto* q = static_cast<uint8_t*>(t.raw());
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n;) {
    uint64_t z = rng.next();
    for (int j = 0; j < 5 && i < n; ++j, ++i, z >>= 12)
      q[i] = table[z & 4095u];
  }
  *scale_out = stddev / 100.f;
  return t;
}

Tensor fp8_codes(Rng& rng, const Shape& shape, bool small, float stddev, float* scale_out) {
  Tensor t = Tensor::empty(shape, DType::F8E4M3, Device::Host);
  auto* q = static_cast<uint8_t*>(t.raw());
  double sq = 0.0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    auto b = static_cast<uint8_t>(rng.next() >> 56);
    if (small) b &= 0x8f;            // sign, exponent field 0 or 1, mantissa
    if ((b & 0x7f) == 0x7f) b ^= 1;  // NaN -> +-448
    q[i] = b;
    const double v = fp8e4m3_to_f32(b);
    sq += v * v;
  }
  const double rms = std::sqrt(sq / static_cast<double>(std::max<int64_t>(1, t.numel())));
  *scale_out = static_cast<float>(stddev / std::max(rms, 1e-30));
  return t;
}

Tensor wide_rows(Rng& rng, int64_t rows, int64_t cols, int64_t pad, int64_t offset, DType dtype,
                 float stddev) {
  STRATA_CHECK(offset + cols <= cols + pad, "wide_rows: offset {} + cols {} beyond width {}",
               offset, cols, cols + pad);
  Tensor wide = normal_tensor(rng, Shape{rows, cols + pad}, dtype, stddev);
  return wide.slice(1, offset, cols);
}

// ---- cases ----

std::vector<OpCase>& cases() {
  static std::vector<OpCase> c;
  return c;
}

namespace detail {

constexpr size_t kGuard = 256;  // bytes on each side; keeps the interior 256-byte aligned
constexpr uint8_t kSentinel = 0xA5;
constexpr uint8_t kPoison = 0xFF;

struct Buffer {
  const Storage* host = nullptr;
  size_t bytes = 0;
  Tensor dev;                    // U8 [kGuard + bytes + kGuard] on the device
  std::vector<uint8_t> initial;  // the host bytes when mirrored (inputs, in/out state)
  std::vector<std::pair<Tensor, ops::Role>> views;  // host views onto this storage
  std::vector<uint8_t> last;                        // the device bytes at the last verify
  bool poisoned() const {
    for (const auto& v : views)
      if (v.second != ops::Role::Out) return false;
    return true;
  }
};

class Mirror {
 public:
  std::vector<std::unique_ptr<Buffer>> buffers;
  Buffer* find(const Storage* s) {
    for (auto& b : buffers)
      if (b->host == s) return b.get();
    return nullptr;
  }
  // The buffer whose interior holds device address p (views wrap the buffer in new storages).
  Buffer* find_dev(const void* p) {
    const auto* c = static_cast<const char*>(p);
    for (auto& b : buffers) {
      const auto* lo = static_cast<const char*>(b->dev.raw()) + kGuard;
      if (c >= lo && c <= lo + b->bytes) return b.get();
    }
    return nullptr;
  }
};

namespace {
std::array<int64_t, kMaxDims> strides_of(const Tensor& t) {
  std::array<int64_t, kMaxDims> s{};
  for (int i = 0; i < t.rank(); ++i)
    s[static_cast<size_t>(i)] = t.stride(i);
  return s;
}

size_t offset_in_storage(const Tensor& t) {
  return static_cast<size_t>(static_cast<const char*>(t.raw()) -
                             static_cast<const char*>(t.storage()->data));
}

// Calls f(element offset from the view's start) for every element of t.
template <class F>
void for_each_element(const Tensor& t, F&& f) {
  const int64_t n = t.numel();
  if (n == 0) return;
  std::array<int64_t, kMaxDims> idx{};
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    for (int d = 0; d < t.rank(); ++d)
      off += idx[static_cast<size_t>(d)] * t.stride(d);
    f(i, off);
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < t.dim(d)) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

std::string index_str(const Tensor& t, int64_t flat) {
  std::string s = "[";
  std::vector<int64_t> idx(static_cast<size_t>(t.rank()));
  for (int d = t.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % t.dim(d);
    flat /= t.dim(d);
  }
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + std::to_string(idx[d]);
  return s + "]";
}
}  // namespace

Runner::Runner() : m(std::make_unique<Mirror>()) {}
Runner::~Runner() = default;

Tensor Runner::mirror(const Tensor& host, ops::Role role) {
  if (!host.defined()) return host;
  STRATA_CHECK(host.device() == Device::Host, "harness: argument {} must start on the host",
               host.str());
  Buffer* b = m->find(host.storage().get());
  if (!b) {
    auto nb = std::make_unique<Buffer>();
    nb->host = host.storage().get();
    nb->bytes = host.storage()->bytes;
    nb->dev =
        Tensor::empty(Shape{static_cast<int64_t>(nb->bytes + 2 * kGuard)}, DType::U8, Device::Cuda);
    nb->initial.resize(nb->bytes);
    std::memcpy(nb->initial.data(), host.storage()->data, nb->bytes);
    b = nb.get();
    m->buffers.push_back(std::move(nb));
  }
  b->views.emplace_back(host, role);
  char* base = static_cast<char*>(b->dev.raw()) + kGuard + offset_in_storage(host);
  std::shared_ptr<void> keep = b->dev.storage();
  return Tensor::wrap(base, host.shape(), host.dtype(), Device::Cuda, keep)
      .with_shape_strides(host.shape(), strides_of(host));
}

void Runner::prepare() {
  for (auto& b : m->buffers) {
    Tensor img =
        Tensor::empty(Shape{static_cast<int64_t>(b->bytes + 2 * kGuard)}, DType::U8, Device::Host);
    auto* p = static_cast<uint8_t*>(img.raw());
    std::memset(p, kSentinel, kGuard);
    if (b->poisoned())
      std::memset(p + kGuard, kPoison, b->bytes);
    else
      std::memcpy(p + kGuard, b->initial.data(), b->bytes);
    std::memset(p + kGuard + b->bytes, kSentinel, kGuard);
    b->dev.copy_from(img);
  }
}

std::string Runner::verify_guards_and_gaps() {
  std::string problems;
  for (auto& b : m->buffers) {
    Tensor img = b->dev.to(Device::Host);
    const auto* p = static_cast<const uint8_t*>(img.raw());
    b->last.assign(p, p + b->bytes + 2 * kGuard);
    int64_t bad_front = 0, bad_back = 0;
    for (size_t i = 0; i < kGuard; ++i) {
      bad_front += p[i] != kSentinel;
      bad_back += p[kGuard + b->bytes + i] != kSentinel;
    }
    const std::string what = describe(b->views.front().first);
    if (bad_front || bad_back)
      problems += fmt::format("guard bytes overwritten around {}: {} before, {} after\n", what,
                              bad_front, bad_back);
    if (!b->poisoned()) continue;
    // Bytes of an output storage outside its views (row gaps of strided outputs) stay poison.
    std::vector<uint8_t> covered(b->bytes, 0);
    for (const auto& [v, role] : b->views) {
      const size_t es = dtype_size(v.dtype()), off0 = offset_in_storage(v);
      for_each_element(v, [&](int64_t, int64_t off) {
        std::memset(covered.data() + off0 + static_cast<size_t>(off) * es, 1, es);
      });
    }
    int64_t gaps = 0;
    for (size_t i = 0; i < b->bytes; ++i)
      gaps += !covered[i] && p[kGuard + i] != kPoison;
    if (gaps)
      problems += fmt::format("{} bytes outside the output view {} were written\n", gaps, what);
  }
  return problems;
}

Tensor Runner::download(const Tensor& host_view, const Tensor& dev_view) {
  Buffer* b = m->find_dev(dev_view.raw());
  if (!b) {  // a tensor mirrored by a case hook: plain copy of its bytes
    STRATA_CHECK(dev_view.is_contiguous(), "harness: cannot read back {}", dev_view.str());
    return dev_view.to(Device::Host);
  }
  auto img = std::make_shared<std::vector<uint8_t>>(
      b->last.begin() + kGuard, b->last.begin() + kGuard + static_cast<int64_t>(b->bytes));
  char* base = reinterpret_cast<char*>(img->data()) + offset_in_storage(host_view);
  return Tensor::wrap(base, host_view.shape(), host_view.dtype(), Device::Host, img)
      .with_shape_strides(host_view.shape(), strides_of(host_view));
}

void bind_cuda(OpContext& ctx) {
  cuda::bind(ctx);
}

std::string sync_and_errors() {
  try {
    cuda::synchronize();
  } catch (const std::exception& e) {
    return e.what();
  }
  const int64_t bad = cuda::take_index_errors();
  if (bad) return fmt::format("the kernel counted {} out-of-range indices on valid inputs", bad);
  return "";
}

std::string describe(const Tensor& t) {
  std::string s = fmt::format("{}{}", dtype_name(t.dtype()), t.shape().str());
  if (!t.is_contiguous()) {
    s += " strides (";
    for (int i = 0; i < t.rank(); ++i)
      s += (i ? ", " : "") + std::to_string(t.stride(i));
    s += ")";
  }
  return s;
}

void compare_output(int index, const Tensor& host, const Tensor& dev, DType act,
                    const Tolerance& tol, const OutputCheck& check, Outcome& out) {
  const std::string name = fmt::format("output #{} {}", index, describe(host));
  if (check) {
    const std::string err = check(index, host, dev);
    if (err != "skip") {
      out.compared += host.numel();
      if (!err.empty()) {
        out.status = Outcome::Failed;
        out.detail += "  " + name + ": " + err + "\n";
      }
      return;
    }
  }
  const DType dt = host.dtype();
  int64_t bad = 0;
  std::string first;
  auto note = [&](int64_t flat, const std::string& what) {
    if (++bad <= 5) first += fmt::format("    at {}: {}\n", index_str(host, flat), what);
  };
  if (!is_float(dt)) {
    for_each_element(host, [&](int64_t flat, int64_t off) {
      const double h = load_as_f64(host.raw(), dt, static_cast<size_t>(off));
      const double d = load_as_f64(dev.raw(), dt, static_cast<size_t>(off));
      if (h != d) note(flat, fmt::format("device {} host {}", d, h));
    });
  } else {
    double sum2 = 0.0, err2 = 0.0;
    bool finite_ref = true;
    for_each_element(host, [&](int64_t, int64_t off) {
      const double h = load_as_f64(host.raw(), dt, static_cast<size_t>(off));
      if (!std::isfinite(h)) finite_ref = false;
      sum2 += h * h;
    });
    if (!finite_ref) {
      out.status = Outcome::Failed;
      out.detail += "  " + name + ": the host reference is not finite (bad case inputs)\n";
      return;
    }
    const int64_t n = host.numel();
    const double rms = n ? std::sqrt(sum2 / static_cast<double>(n)) : 0.0;
    const double u32 = unit_roundoff(DType::F32), ua = unit_roundoff(act), uo = unit_roundoff(dt);
    const double rel = 2 * uo + 2 * ua * tol.roundings + 4 * u32 * (tol.math + 1) + tol.extra_rel;
    const double abs =
        rms * (8 * std::sqrt(static_cast<double>(tol.reduction)) * u32 +
               2 * ua * tol.roundings_before_sum + (tol.fp8_mma ? std::ldexp(1.0, -10) : 0.0)) +
        1e-30;
    const bool extra = tol.extra_abs.defined();
    if (extra && (tol.extra_abs.numel() != n || !tol.extra_abs.is_contiguous() ||
                  tol.extra_abs.device() != Device::Host)) {
      out.status = Outcome::Failed;
      out.detail += "  " + name + ": extra_abs is not a contiguous host tensor of its size\n";
      return;
    }
    for_each_element(host, [&](int64_t flat, int64_t off) {
      const double h = load_as_f64(host.raw(), dt, static_cast<size_t>(off));
      const double d = load_as_f64(dev.raw(), dt, static_cast<size_t>(off));
      if (!std::isfinite(d)) {
        note(flat, fmt::format("device {} (NaN: never written, or a NaN computed), host {}", d, h));
        return;
      }
      err2 += (d - h) * (d - h);
      if (tol.rel_l2 > 0) return;
      const double lim = rel * std::fabs(h) + abs +
                         (extra ? load_as_f64(tol.extra_abs.raw(), tol.extra_abs.dtype(),
                                              static_cast<size_t>(flat))
                                : 0.0);
      const double ratio = std::fabs(d - h) / lim;
      out.worst = std::max(out.worst, ratio);
      if (ratio > 1.0)
        note(flat, fmt::format("device {:.9g} host {:.9g} |diff| {:.3g} > tol {:.3g}", d, h,
                               std::fabs(d - h), lim));
    });
    if (tol.rel_l2 > 0 && bad == 0) {
      const double r = sum2 > 0 ? std::sqrt(err2 / sum2) : std::sqrt(err2);
      out.worst = std::max(out.worst, r / tol.rel_l2);
      if (r > tol.rel_l2) {
        bad = 1;
        first += fmt::format("    relative L2 error {:.4g} > bound {:.4g}\n", r, tol.rel_l2);
      }
    }
  }
  out.compared += host.numel();
  if (bad) {
    out.status = Outcome::Failed;
    out.detail +=
        fmt::format("  {}: {} of {} elements wrong; first:\n{}", name, bad, host.numel(), first);
  }
}

}  // namespace detail
}  // namespace strata::opstest
