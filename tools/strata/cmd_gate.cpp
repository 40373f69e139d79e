// `strata gate`: the per-block numeric gate (model/nemotron_h/block_gate.h). Every block of the
// model runs on the host and on the device from the same prompt-derived input; each block's
// error (relative L2, max abs) is printed against its band (bf16: twice the measured host
// rounding, the "rounding" column) and its scale component against the scale band; the command
// fails when any block is out of either band.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "command.h"
#include "core/check.h"
#include "engine/device.h"
#include "flag_checks.h"
#include "io/atomic_file.h"
#include "model/nemotron_h/block_gate.h"
#include "model_source_flags.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::cli {
namespace {

struct GateFlags {
  ModelSourceFlags src;
  std::string device = "cuda", json_out;
  model::BlockGateOptions opt;
};

void run_gate(const GateFlags& f) {
  const Device device = engine::parse_device(f.device);
  if (device == Device::Host) fail("gate: --device must be a device (the host is the reference)");
  model::LoadOptions lo = load_options(f.src, device, /*sampling=*/false, "gate");
  lo.keep_host_weights = true;  // checkpoints: the host views are the reference weights
  OpContext ctx;
  engine::prepare_device(device, ctx);
  auto m = model::load_model(lo);
  const auto rows = model::run_block_gate(*m, ctx, f.opt);
  std::printf(
      "gate: %s (%s) on %s, prompt %lld tokens + 1 decode token\n", m->load_report().source.c_str(),
      f.src.load_format == "dummy" ? f.src.dtype.c_str() : dtype_name(m->act_dtype()).data(),
      cuda::device_description().c_str(), static_cast<long long>(f.opt.prompt_len));
  std::printf("%5s %-9s %-7s %3s %10s %10s %10s %10s %10s %10s  %s\n", "layer", "block", "phase",
              "fp8", "rel_l2", "max_abs", "rounding", "band", "scale", "scale_band", "");
  int64_t bad = 0;
  double worst = 0;
  for (const auto& r : rows) {
    std::printf("%5lld %-9s %-7s %3lld %10.3e %10.3e %10.3e %10.3e %10.3e %10.3e  %s\n",
                static_cast<long long>(r.layer),
                std::string(model::layer_kind_name(r.kind)).c_str(), r.phase.c_str(),
                static_cast<long long>(r.fp8_linears), r.rel_l2, r.max_abs, r.rounding, r.band,
                r.scale, r.scale_band, r.ok() ? "ok" : "OUT OF BAND");
    bad += r.ok() ? 0 : 1;
    worst = std::max({worst, r.rel_l2 / r.band, std::abs(r.scale) / r.scale_band});
  }
  std::printf("gate: %zu block runs, %lld out of band, worst error/band %.3f\n", rows.size(),
              static_cast<long long>(bad), worst);
  if (!f.json_out.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& r : rows)
      j.push_back({{"layer", r.layer},
                   {"kind", model::layer_kind_name(r.kind)},
                   {"phase", r.phase},
                   {"fp8_linears", r.fp8_linears},
                   {"rel_l2", r.rel_l2},
                   {"max_abs", r.max_abs},
                   {"rounding", r.rounding},
                   {"band", r.band},
                   {"scale", r.scale},
                   {"scale_band", r.scale_band},
                   {"elements", r.elements}});
    io::write_file_atomic(f.json_out, j.dump(1) + "\n");
  }
  if (bad > 0) fail("gate: {} of {} block runs out of band", bad, rows.size());
}

void setup_gate(CLI::App& app) {
  auto f = std::make_shared<GateFlags>();
  CLI::App* sub = app.add_subcommand("gate", "Per-block host vs device numeric gate");
  add_model_source_flags(sub, f->src);
  sub->add_option("--device", f->device, "The device to check (cuda)")->capture_default_str();
  sub->add_option("--prompt-len", f->opt.prompt_len,
                  "Prompt tokens (prefill), then one decode token")
      ->check(int_range(1, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_option("--prompt-seed", f->opt.seed, "Seed of the prompt ids")
      ->check(int_range(0, INT64_MAX))
      ->capture_default_str();
  sub->add_option("--json", f->json_out, "Also write every row as JSON to this file");
  sub->callback([f] { run_gate(*f); });
}

}  // namespace

STRATA_COMMAND(setup_gate);

}  // namespace strata::cli
