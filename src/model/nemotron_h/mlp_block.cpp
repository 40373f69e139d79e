// Dense relu² MLP (spec 3.4) and the MoE block (spec 3.5): router logits in f32, sigmoid
// routing with the correction bias used only for selection, the routed experts as one grouped
// op, plus the unweighted shared expert.
#include "model/nemotron_h/blocks.h"
#include "ops/side_branch.h"

namespace strata::model {

void mlp_block(OpContext& ctx, const MlpWeights& w, const BlockInput& in, Tensor& out) {
  const int64_t T = in.rows(), I = w.up.out_features();
  Tensor h = workspace(ctx, Shape{T, I}, in.act);  // [T, I]
  ops::LinearArgs up;
  up.x = in.x_for(w.up);
  up.w = w.up;
  up.out = h;
  ops::run(ctx, up);
  // In place; or, for a W8A8 down, only its e4m3 input ([T, I], 1 byte per value).
  ops::Relu2Args relu2;
  relu2.x = h;
  if (!quantize_for(ctx, w.down, T, I, relu2)) relu2.out = h;
  ops::run(ctx, relu2);
  ops::LinearArgs down;
  down.x = relu2.out_q.defined() ? relu2.out_q : h;
  down.w = w.down;
  down.out = out;
  ops::run(ctx, down);
}

void moe_block(OpContext& ctx, const ModelConfig& c, const MoeWeights& w, const BlockInput& in,
               Tensor& out, Tensor* shared_out) {
  const Tensor& a = in.a;  // the router and the routed experts read act
  const int64_t T = a.dim(0), E = c.n_routed_experts, K = c.num_experts_per_tok;
  // The shared expert reads only `a`: on CUDA it runs on the context's side stream while the
  // router and the routed experts run on the step stream (it is enqueued first, so both are in
  // flight together).
  Tensor shared;
  ops::SideBranch side(ctx);
  if (w.has_shared) {
    shared = workspace(ctx, a.shape(), a.dtype());  // [T, H]
    side.run([&] { mlp_block(ctx, w.shared, in, shared); });
  }

  Tensor logits = workspace(ctx, Shape{T, E}, DType::F32);  // [T, E] router logits, f32 out
  ops::LinearArgs gate;
  gate.x = a;
  gate.w = w.router;
  gate.out = logits;
  ops::run(ctx, gate);

  Tensor ids = workspace(ctx, Shape{T, K}, DType::I32);      // [T, K] chosen experts
  Tensor weights = workspace(ctx, Shape{T, K}, DType::F32);  // [T, K] their weights
  ops::MoeRouteArgs route;
  route.logits = logits;
  route.correction_bias = w.correction_bias;
  route.top_k = K;
  route.n_group = c.n_group;
  route.topk_group = c.topk_group;
  route.norm_topk_prob = c.norm_topk_prob;
  route.routed_scaling_factor = c.routed_scaling_factor;
  route.ids = ids;
  route.weights = weights;
  ops::run(ctx, route);

  const bool add_here = w.has_shared && shared_out == nullptr;
  Tensor routed = add_here ? workspace(ctx, a.shape(), a.dtype()) : out;  // [T, H]
  ops::MoeExpertsArgs experts;
  experts.x = a;
  experts.up = &w.up;
  experts.down = &w.down;
  experts.ids = ids;
  experts.weights = weights;
  experts.out = routed;
  ops::run(ctx, experts);
  side.join();
  if (!w.has_shared) return;
  if (!add_here) {
    *shared_out = shared;
    return;
  }

  ops::AddArgs add;
  add.a = routed;
  add.b = shared;
  add.out = out;
  ops::run(ctx, add);
}

}  // namespace strata::model
