// The host bounce (DESIGN principle 1): an op of a device run executed by its host kernel.
// Every device tensor the op holds (Args::visit, plus the weight lists of ops that keep them
// outside visit: Args::visit_weight_lists) is copied to the host, the host kernel runs on the
// copies, and the tensors the op writes (Role::Out / InOut) are copied back. Each bounce is
// counted in OpContext::host_bounces (and its transfers in h2d_copies / d2h_copies) and logged
// once per op and process. ops::run takes this path for ops in OpContext::force_host_ops, and,
// when OpContext::allow_host_bounce is set, for ops no device kernel supports; nothing bounces
// silently or without being allowed.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ops/registry.h"

// Included by ops.h after the argument structs (Role, LinearWeight are complete here).
namespace strata::ops {

namespace bounce {

// A host copy of a device tensor (any strides: the span from its first to its last element is
// copied, so a row view into a wider tensor keeps its strides).
Tensor download(const Tensor& t, OpContext& ctx);
// Writes the host copy `h` (made by download) back over device tensor `d`.
void upload(const Tensor& h, const Tensor& d, OpContext& ctx);
// Logs the first bounce of `op` in this process (info), with `why`.
void note(const char* op, const std::string& why);

}  // namespace bounce

// Every op name of the op table (ops.h), for validating user lists.
const std::vector<std::string>& op_names();
// The ops a user forces onto host kernels for device runs: the list given to
// set_forced_host_ops (the --force-host-ops flag) when one was, else the environment variable
// STRATA_FORCE_HOST_OPS; comma-separated op names, "" = none. Unknown names throw.
void set_forced_host_ops(const std::string& comma_separated);
std::set<std::string> forced_host_ops();
std::set<std::string> parse_op_list(const std::string& comma_separated, const char* what);

// Runs `a` (whose tensors may live on ctx.device) on the host kernel that supports its host
// copies. `why` says why the op bounces (forced, or the device kernels' refusals).
template <class Args>
void run_host_bounce(OpContext& ctx, Args& a, const std::string& why) {
  Args h = a;  // tensors are handles: replacing them in h leaves a untouched
  std::vector<std::pair<Tensor, Tensor>> write_back;  // (host copy, device tensor)
  h.visit([&](Tensor& t, Role role) {
    if (!t.defined() || t.device() == Device::Host) return;
    Tensor host = bounce::download(t, ctx);
    if (role != Role::In) write_back.emplace_back(host, t);
    t = std::move(host);
  });
  // Ops that hold weight lists by pointer (MoE experts): host copies of every device weight.
  std::vector<std::unique_ptr<std::vector<LinearWeight>>> lists;
  if constexpr (requires { h.visit_weight_lists([](const std::vector<LinearWeight>*&) {}); }) {
    h.visit_weight_lists([&](const std::vector<LinearWeight>*& list) {
      if (list == nullptr) return;
      auto copy = std::make_unique<std::vector<LinearWeight>>(*list);
      for (auto& w : *copy)
        if (w.weight.defined() && w.weight.device() != Device::Host)
          w.weight = bounce::download(w.weight, ctx);
      list = copy.get();
      lists.push_back(std::move(copy));
    });
  }
  OpContext host_ctx;  // host kernels run with a host context
  host_ctx.device = Device::Host;
  const Kernel<Args>& k = select_kernel(h, host_ctx);
  k.run(h, host_ctx);
  for (const auto& [host, dev] : write_back)
    bounce::upload(host, dev, ctx);
  ctx.host_bounces.fetch_add(1);
  bounce::note(Args::kName, why);
}

}  // namespace strata::ops
