#include "model/nemotron_h/residency.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/log.h"

namespace strata::model {
namespace {

// A contiguous copy of `t` on `device`. A strided host view is staged into a contiguous host
// buffer first (freed when this returns); device-side strided views cannot occur (every copy
// made here is contiguous).
Tensor copy_tensor(const Tensor& t, Device device, TransferStats* stats) {
  const auto t0 = std::chrono::steady_clock::now();
  Tensor src = t;
  if (!t.is_contiguous()) {
    if (t.device() != Device::Host)
      fail("weights: cannot copy the strided device tensor {}", t.str());
    src = t.contiguous();  // staging
    stats->staging_peak = std::max(stats->staging_peak, src.nbytes());
  }
  Tensor out = src.to(device);
  stats->tensors += 1;
  stats->bytes += out.nbytes();
  stats->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

template <class W>
void move_all(W& w, Device device, TransferStats* stats) {
  w.for_each_tensor([&](const std::string&, Tensor& t) {
    if (t.defined() && t.device() != device) t = copy_tensor(t, device, stats);
  });
}

}  // namespace

ModelWeights copy_weights_to(const ModelWeights& w, Device device, TransferStats* stats) {
  ModelWeights out = w;  // tensors are handles: the copy shares everything until replaced
  move_all(out, device, stats);
  return out;
}

LayerWeights copy_layer_to(const LayerWeights& layer, Device device, TransferStats* stats) {
  // A one-layer ModelWeights visits exactly this layer's tensors (plus the empty top-level ones).
  ModelWeights one;
  one.layers.push_back(layer);
  move_all(one, device, stats);
  return std::move(one.layers[0]);
}

bool WeightResidency::all_on(Device device) const {
  bool all = true;
  const_cast<ModelWeights&>(loaded_).for_each_tensor(
      [&](const std::string&, Tensor& t) { all = all && (!t.defined() || t.device() == device); });
  return all;
}

const ModelWeights& WeightResidency::on(Device device) {
  if (all_on(device)) return loaded_;
  auto it = copies_.find(device);
  if (it != copies_.end()) return it->second;
  TransferStats& s = stats_[device];
  ModelWeights copy = copy_weights_to(loaded_, device, &s);
  log::info("weights: {} tensors ({:.1f} MiB) copied to {} in {:.2f} s", s.tensors,
            s.bytes / 1048576.0, device_name(device), s.seconds);
  return copies_.emplace(device, std::move(copy)).first->second;
}

void WeightResidency::make_resident(Device device) {
  ModelWeights keep = on(device);
  copies_.clear();
  loaded_ = std::move(keep);
}

size_t WeightResidency::bytes_on(Device device) const {
  size_t b = 0;
  auto count = [&](const ModelWeights& w) {
    const_cast<ModelWeights&>(w).for_each_tensor([&](const std::string&, Tensor& t) {
      if (t.defined() && t.device() == device) b += t.nbytes();
    });
  };
  auto it = copies_.find(device);
  count(it != copies_.end() ? it->second : loaded_);
  return b;
}

const TransferStats& WeightResidency::transfers(Device device) const {
  static const TransferStats none;
  auto it = stats_.find(device);
  return it == stats_.end() ? none : it->second;
}

}  // namespace strata::model
