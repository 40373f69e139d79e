#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "core/log.h"
#include "ops/ops.h"

namespace strata::ops::bounce {
namespace {

// Elements from the first to the last element of `t` (strides are non-negative here).
int64_t span_elements(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t last = 0;
  for (int d = 0; d < t.rank(); ++d)
    last += (t.dim(d) - 1) * t.stride(d);
  return last + 1;
}

std::array<int64_t, kMaxDims> strides_of(const Tensor& t) {
  std::array<int64_t, kMaxDims> s{};
  for (int d = 0; d < t.rank(); ++d)
    s[static_cast<size_t>(d)] = t.stride(d);
  return s;
}

}  // namespace

Tensor download(const Tensor& t, OpContext& ctx) {
  for (int d = 0; d < t.rank(); ++d)
    if (t.stride(d) < 0) fail("host bounce: tensor {} has a negative stride", t.str());
  const int64_t span = span_elements(t);
  Tensor flat = Tensor::empty(Shape{span}, t.dtype(), Device::Host);
  if (span > 0) {
    device_allocator(t.device())
        ->copy(flat.raw(), Device::Host, t.raw(), t.device(),
               static_cast<size_t>(span) * dtype_size(t.dtype()));
    ctx.d2h_copies.fetch_add(1);
  }
  return flat.with_shape_strides(t.shape(), strides_of(t));
}

void upload(const Tensor& h, const Tensor& d, OpContext& ctx) {
  // The host copy spans the same elements as the device tensor, gaps included; the gaps hold
  // the bytes downloaded a moment ago and nothing on the device wrote them since (the bounce
  // is synchronous on the run's stream), so writing the whole span back is exact.
  const int64_t span = span_elements(d);
  if (span == 0) return;
  device_allocator(d.device())
      ->copy(d.raw(), d.device(), h.raw(), Device::Host,
             static_cast<size_t>(span) * dtype_size(d.dtype()));
  ctx.h2d_copies.fetch_add(1);
}

void note(const char* op, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  if (seen.insert(op).second)
    log::info(
        "host bounce: op {} runs on the host kernel with device tensors copied ({}); counted per "
        "run",
        op, why);
}

}  // namespace strata::ops::bounce

namespace strata::ops {

const std::vector<std::string>& op_names() {
  static const std::vector<std::string> names = {
      EmbeddingArgs::kName,     RmsNormArgs::kName,      LinearArgs::kName,
      Conv1dPrefillArgs::kName, Conv1dUpdateArgs::kName, SsmScanArgs::kName,
      SsmUpdateArgs::kName,     GatedRmsNormArgs::kName, KvCacheWriteArgs::kName,
      AttentionArgs::kName,     Relu2Args::kName,        AddArgs::kName,
      MoeRouteArgs::kName,      MoeExpertsArgs::kName,   CastArgs::kName,
      SampleArgs::kName};
  return names;
}

std::set<std::string> parse_op_list(const std::string& text, const char* what) {
  std::set<std::string> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    std::string item = text.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    pos = comma + 1;
    if (item.empty()) continue;
    const auto& known = op_names();
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      std::string list;
      for (const auto& k : known)
        list += (list.empty() ? "" : ", ") + k;
      fail("{}: unknown op {:?} (ops: {})", what, item, list);
    }
    out.insert(item);
  }
  return out;
}

namespace {
std::mutex g_forced_mu;
std::optional<std::set<std::string>> g_forced;  // set by the flag
}  // namespace

void set_forced_host_ops(const std::string& comma_separated) {
  std::set<std::string> ops = parse_op_list(comma_separated, "--force-host-ops");
  std::lock_guard<std::mutex> lock(g_forced_mu);
  g_forced = std::move(ops);
}

std::set<std::string> forced_host_ops() {
  {
    std::lock_guard<std::mutex> lock(g_forced_mu);
    if (g_forced) return *g_forced;
  }
  const char* env = std::getenv("STRATA_FORCE_HOST_OPS");
  return env ? parse_op_list(env, "STRATA_FORCE_HOST_OPS") : std::set<std::string>{};
}

}  // namespace strata::ops
