// `strata inspect DIR`: what a model directory holds (config summary, layer pattern,
// parameter count, every tensor with dtype, shape and bytes). `--presets` lists the built-in
// configurations; `--preset NAME` summarizes one.
#include <cstdio>
#include <memory>
#include <string>

#include "command.h"
#include "core/check.h"
#include "engine/device.h"
#include "io/checkpoint.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/load.h"

namespace strata::cli {
namespace {

using model::ModelConfig;

struct InspectFlags {
  std::string dir, preset, load, device = "cpu";
  bool presets = false, summary = false;
};

// --load DIR: load the model for a run on --device and print the load report.
void run_inspect_load(const InspectFlags& f) {
  const Device device = engine::parse_device(f.device);
  OpContext ctx;
  engine::prepare_device(device, ctx);
  auto m = model::load_model(f.load, device, /*sampling=*/false);
  fmt::print("{}", m->load_report().text());
}

std::string human_count(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1'000) return fmt::format("{:.1f}K", n / 1e3);
  return std::to_string(n);
}

void print_config(const ModelConfig& c) {
  fmt::print("layers: {} (M {} / * {} / - {} / E {})\n", c.num_layers(), c.num_mamba,
             c.num_attention, c.num_mlp, c.num_moe);
  fmt::print("pattern: {}\n", c.pattern());
  fmt::print("hidden {}, vocab {}, dtype {}, norm eps {:g}, tied embeddings {}\n", c.hidden_size,
             c.vocab_size, c.dtype ? model::torch_dtype_name(*c.dtype) : "unset", c.norm_eps,
             c.tie_word_embeddings ? "yes" : "no");
  if (c.num_mamba)
    fmt::print(
        "mamba: {} heads x {} (d_inner {}), {} groups, d_state {}, conv {}, chunk {}, conv_dim {}, "
        "in_proj rows {}, "
        "ssm cache {}\n",
        c.mamba_num_heads, c.mamba_head_dim, c.d_inner, c.n_groups, c.ssm_state_size, c.conv_kernel,
        c.chunk_size, c.conv_dim, c.in_proj_rows, model::torch_dtype_name(c.mamba_ssm_cache_dtype));
  if (c.num_attention)
    fmt::print("attention: {} q heads, {} kv heads, head_dim {} (no positional encoding)\n",
               c.num_attention_heads, c.num_key_value_heads, c.head_dim);
  if (c.num_mlp) {
    std::string widths;
    for (int64_t w : c.mlp_intermediate_sizes)
      widths += (widths.empty() ? "" : ",") + std::to_string(w);
    fmt::print("mlp: relu2, width {}\n", widths);
  }
  if (c.num_moe)
    fmt::print(
        "moe: {} experts, top-{}, width {}, shared width {}, groups {} keep {}, scale {:g}, "
        "renormalize {}\n",
        c.n_routed_experts, c.num_experts_per_tok, c.moe_intermediate_size, c.shared_intermediate,
        c.n_group, c.topk_group, c.routed_scaling_factor, c.norm_topk_prob ? "yes" : "no");
  std::string eos;
  for (int32_t id : c.eos_token_ids)
    eos += (eos.empty() ? "" : ",") + std::to_string(id);
  fmt::print("eos ids: {}\n", eos.empty() ? "none" : eos);
}

void run_inspect(const InspectFlags& f) {
  if (!f.load.empty()) return run_inspect_load(f);
  if (f.presets) {
    for (const std::string& name : ModelConfig::preset_names()) {
      const ModelConfig c = ModelConfig::preset(name);
      fmt::print("{:<26} {:>3} layers  hidden {:>5}  params {:>7}  {}\n", name, c.num_layers(),
                 c.hidden_size, human_count(model::parameter_count(c)), c.pattern());
    }
    return;
  }
  if (!f.preset.empty()) {
    const ModelConfig c = ModelConfig::preset(f.preset);
    fmt::print("preset: {}\n", f.preset);
    print_config(c);
    fmt::print("parameters: {} ({})\n", model::parameter_count(c),
               human_count(model::parameter_count(c)));
    return;
  }
  if (f.dir.empty()) fail("inspect: give a model directory, --preset NAME or --presets");
  const ModelConfig c = ModelConfig::load_dir(f.dir);
  const io::Checkpoint ckpt = io::Checkpoint::open(f.dir);
  fmt::print("model: {}\n", f.dir);
  print_config(c);
  int64_t params = 0;
  size_t bytes = 0;
  for (const std::string& n : ckpt.names()) {
    params += ckpt.info(n).shape.numel();
    bytes += ckpt.info(n).nbytes;
  }
  fmt::print("parameters: {} ({}) in the checkpoint, {} implied by the config\n", params,
             human_count(params), model::parameter_count(c));
  fmt::print("tensors: {}, {} bytes in {} file(s), {} bytes mapped\n", ckpt.size(), bytes,
             ckpt.files().size(), ckpt.mapped_bytes());
  if (f.summary) return;
  for (const std::string& n : ckpt.names()) {
    const io::TensorInfo& t = ckpt.info(n);
    fmt::print("  {:<56} {:<6} {:<18} {:>12}\n", n, dtype_name(t.dtype), t.shape.str(), t.nbytes);
  }
}

void setup_inspect(CLI::App& app) {
  auto f = std::make_shared<InspectFlags>();
  CLI::App* sub = app.add_subcommand("inspect", "Describe a model directory or a built-in preset");
  sub->add_option("dir", f->dir, "Model directory");
  sub->add_flag("--presets", f->presets, "List the built-in presets");
  sub->add_option("--preset", f->preset, "Describe one built-in preset");
  sub->add_flag("--summary", f->summary, "Omit the tensor list");
  sub->add_option("--load", f->load,
                  "Load this model directory and print the load report (bytes, phases)");
  sub->add_option("--device", f->device, "--load: cpu or cuda")->capture_default_str();
  sub->callback([f] { run_inspect(*f); });
}

}  // namespace

STRATA_COMMAND(setup_inspect);

}  // namespace strata::cli
