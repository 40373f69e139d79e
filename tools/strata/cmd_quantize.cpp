// `strata quantize --format fp8 IN OUT`: writes a ModelOpt-format FP8 checkpoint from a BF16
// one (model/nemotron_h/quantize_fp8.h: per-tensor weight scales, input scales calibrated on
// the host forward, the official selective layout).
#include <cstdio>
#include <memory>
#include <string>

#include "command.h"
#include "core/check.h"
#include "flag_checks.h"
#include "model/nemotron_h/quantize_fp8.h"
#include "model_source_flags.h"

namespace strata::cli {
namespace {

struct QuantizeFlags {
  std::string format, in, out, max_shard = "5GB";
  model::QuantizeOptions opt;
};

void run_quantize(QuantizeFlags& f) {
  if (f.format != "fp8")
    fail("quantize: --format must be fp8 (ModelOpt FP8), got \"{}\"", f.format);
  if (f.opt.calib_sequences < 1 || f.opt.calib_length < 1)
    fail("quantize: --calib-sequences and --calib-length must be >= 1");
  f.opt.max_shard_bytes = parse_byte_size(f.max_shard, "--max-shard-size");
  const auto s = model::quantize_fp8(f.in, f.out, f.opt);
  std::printf(
      "quantized %s -> %s: %lld linears in FP8 (%lld experts took their layer's input scale), %lld "
      "tensors "
      "copied, %.3f GB -> %.3f GB\n",
      f.in.c_str(), f.out.c_str(), static_cast<long long>(s.quantized),
      static_cast<long long>(s.uncalibrated), static_cast<long long>(s.kept),
      static_cast<double>(s.bytes_in) / 1e9, static_cast<double>(s.bytes_out) / 1e9);
}

void setup_quantize(CLI::App& app) {
  auto f = std::make_shared<QuantizeFlags>();
  CLI::App* sub =
      app.add_subcommand("quantize", "Write an FP8 (ModelOpt) checkpoint from a BF16 one");
  sub->add_option("--format", f->format, "fp8")->required();
  sub->add_option("--calib-sequences", f->opt.calib_sequences, "Calibration sequences")
      ->check(int_range(1, 4096))
      ->capture_default_str();
  sub->add_option("--calib-length", f->opt.calib_length, "Tokens per calibration sequence")
      ->check(int_range(1, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_option("--max-shard-size", f->max_shard, "Largest shard, e.g. 5GB")
      ->capture_default_str();
  sub->add_option("in", f->in, "BF16 checkpoint directory")->required();
  sub->add_option("out", f->out, "Output directory (new or empty)")->required();
  sub->callback([f] { run_quantize(*f); });
}

}  // namespace

STRATA_COMMAND(setup_quantize);

}  // namespace strata::cli
