// `strata make-checkpoint (--preset NAME | --config config.json) [--dtype bf16|f32|fp8] OUT`:
// writes a synthetic checkpoint of real shapes in the official layout and format (see
// model/nemotron_h/synthetic_plan.h for the scale rules), sharded when large, so real sizes can
// be loaded and timed without downloads.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "command.h"
#include "core/check.h"
#include "flag_checks.h"
#include "model/nemotron_h/synthetic_checkpoint.h"
#include "model_source_flags.h"

namespace strata::cli {
namespace {

struct MakeCheckpointFlags {
  std::string preset, config, dtype = "bf16", out, max_shard = "5GB";
  uint64_t seed = 1;
  bool force = false;
};

void run_make_checkpoint(const MakeCheckpointFlags& f) {
  const model::ModelConfig c = config_from_preset_or_file(f.preset, f.config, "make-checkpoint");
  const model::SyntheticOptions o = synthetic_options(f.dtype, f.seed, "make-checkpoint");
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(f.out, ec) && !fs::is_empty(f.out, ec) && !f.force)
    fail("make-checkpoint: {} exists and is not empty (use --force to write into it)", f.out);
  const size_t shard = parse_byte_size(f.max_shard, "--max-shard-size");
  const auto written = model::write_synthetic_checkpoint(f.out, c, o, shard);
  std::printf("wrote %s: %s, %s, %zu file(s), %.3f GB of tensors\n", f.out.c_str(),
              c.source.c_str(), f.dtype.c_str(), written.files.size(),
              static_cast<double>(written.total_bytes) / 1e9);
}

void setup_make_checkpoint(CLI::App& app) {
  auto f = std::make_shared<MakeCheckpointFlags>();
  CLI::App* sub = app.add_subcommand("make-checkpoint",
                                     "Write a synthetic checkpoint of a preset or config.json");
  sub->add_option("--preset", f->preset, "Built-in configuration (strata inspect --presets)");
  sub->add_option("--config", f->config, "A config.json to take the architecture from");
  sub->add_option("--dtype", f->dtype,
                  "bf16, f32 or fp8 (ModelOpt FP8, the official selective layout)")
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "Seed of the random weights")
      ->check(int_range(0, INT64_MAX))
      ->capture_default_str();
  sub->add_option("--max-shard-size", f->max_shard, "Largest shard, e.g. 5GB, 500MB")
      ->capture_default_str();
  sub->add_flag("--force", f->force, "Write into a non-empty directory");
  sub->add_option("out", f->out, "Output directory")->required();
  sub->callback([f] { run_make_checkpoint(*f); });
}

}  // namespace

STRATA_COMMAND(setup_make_checkpoint);

}  // namespace strata::cli
