#include "cases_util.h"

#include <algorithm>

namespace strata::opstest {

std::vector<int32_t> distinct(Rng& rng, int64_t k, int64_t n) {
  STRATA_CHECK_LE(k, n);
  std::vector<int32_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    all[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  for (int64_t i = 0; i < k; ++i) {  // partial Fisher-Yates
    const int64_t j = i + static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n - i));
    std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(j)]);
  }
  all.resize(static_cast<size_t>(k));
  return all;
}

void set_scan_layout(ops::SsmScanArgs& a, Rng& rng, const ScanLayout& s,
                     const std::vector<int32_t>& lens, const std::vector<int32_t>& has_initial,
                     DType act) {
  std::vector<int32_t> cu{0};
  for (int32_t l : lens)
    cu.push_back(cu.back() + l);
  a.ssm_states = normal_tensor(rng, Shape{s.slots, s.Hm, s.P, s.N}, DType::F32, 0.5f);
  a.cu_seqlens = i32_tensor(cu);
  a.slots = i32_tensor(distinct(rng, static_cast<int64_t>(lens.size()), s.slots));
  a.has_initial = i32_tensor(has_initial);
  a.heads = s.Hm;
  a.head_dim = s.P;
  a.groups = s.G;
  a.state_size = s.N;
  a.chunk_size = s.chunk;
  a.out = Tensor::empty(Shape{cu.back(), s.Hm * s.P}, act);
}

MoeDevicePrep experts_to_device(std::shared_ptr<const std::vector<ops::LinearWeight>> up,
                                std::shared_ptr<const std::vector<ops::LinearWeight>> down) {
  return [up, down](ops::MoeExpertsArgs& dev, std::vector<std::shared_ptr<void>>& keep) {
    auto dup = std::make_shared<std::vector<ops::LinearWeight>>(*up);
    auto ddown = std::make_shared<std::vector<ops::LinearWeight>>(*down);
    for (auto& w : *dup)
      w.weight = w.weight.to(Device::Cuda);
    for (auto& w : *ddown)
      w.weight = w.weight.to(Device::Cuda);
    dev.up = dup.get();
    dev.down = ddown.get();
    keep.push_back(dup);
    keep.push_back(ddown);
  };
}

}  // namespace strata::opstest
