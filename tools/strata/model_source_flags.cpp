#include "model_source_flags.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "flag_checks.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "ops/ops.h"

namespace strata::cli {

namespace {
std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = std::min(text.find('\n', pos), text.size());
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}
}  // namespace

model::ModelConfig config_from_preset_or_file(const std::string& preset,
                                              const std::string& config_path, const char* cmd) {
  if (preset.empty() == config_path.empty())
    fail("{}: give exactly one of --preset NAME and --config config.json", cmd);
  if (!preset.empty()) return model::ModelConfig::preset(preset);
  return model::ModelConfig::from_json_text(
      io::read_text_file(config_path, "model config", io::kConfigMaxBytes), config_path);
}

model::SyntheticOptions synthetic_options(const std::string& dtype, uint64_t seed,
                                          const char* cmd) {
  model::SyntheticOptions o;
  o.seed = seed;
  if (dtype == "bf16") {
    o.dtype = DType::BF16;
  } else if (dtype == "f32") {
    o.dtype = DType::F32;
  } else if (dtype == "fp8") {
    o.dtype = DType::BF16;
    o.fp8 = true;
  } else {
    fail("{}: --dtype must be bf16, f32 or fp8, got \"{}\"", cmd, dtype);
  }
  return o;
}

void add_model_source_flags(CLI::App* sub, ModelSourceFlags& f) {
  sub->add_option("--model", f.model, "Model directory (config.json + safetensors)");
  sub->add_option("--load-format", f.load_format,
                  "auto (the --model directory) or dummy (random weights, no files)")
      ->capture_default_str();
  sub->add_option("--preset", f.preset,
                  "dummy: a built-in configuration (strata inspect --presets)");
  sub->add_option("--config", f.config, "dummy: the architecture of this config.json");
  sub->add_option("--dtype", f.dtype, "dummy: bf16, f32 or fp8 (the official selective FP8 layout)")
      ->capture_default_str();
  sub->add_option("--dummy-seed", f.dummy_seed, "dummy: seed of the random weights")
      ->check(int_range(0, INT64_MAX))
      ->capture_default_str();
  sub->add_option("--force-host-ops", f.force_host_ops,
                  "Device runs: run these ops (comma-separated names) on host kernels through a "
                  "counted bounce; "
                  "default: env STRATA_FORCE_HOST_OPS");
}

model::LoadOptions load_options(const ModelSourceFlags& f, Device device, bool sampling,
                                const char* cmd) {
  if (!f.force_host_ops.empty()) ops::set_forced_host_ops(f.force_host_ops);
  model::LoadOptions o;
  o.device = device;
  o.sampling = sampling;
  if (f.load_format == "auto" || f.load_format == "safetensors") {
    if (f.model.empty())
      fail("{}: give --model DIR (or --load-format dummy with --preset or --config)", cmd);
    if (!f.preset.empty() || !f.config.empty())
      fail(
          "{}: --preset and --config choose dummy weights' architecture; use them with "
          "--load-format dummy",
          cmd);
    o.format = model::LoadFormat::Safetensors;
    o.dir = f.model;
  } else if (f.load_format == "dummy") {
    if (!f.model.empty()) fail("{}: --load-format dummy reads no files; drop --model", cmd);
    o.format = model::LoadFormat::Dummy;
    o.dummy_config = config_from_preset_or_file(f.preset, f.config, cmd);
    o.dummy = synthetic_options(f.dtype, f.dummy_seed, cmd);
    o.dummy_config.dtype = o.dummy.dtype;
  } else {
    fail("{}: --load-format must be auto or dummy, got \"{}\"", cmd, f.load_format);
  }
  return o;
}

std::unique_ptr<model::NemotronHModel> load_from_flags(const ModelSourceFlags& f, Device device,
                                                       bool sampling, const char* cmd) {
  auto m = model::load_model(load_options(f, device, sampling, cmd));
  for (const auto& line : split_lines(m->load_report().text()))
    log::info("{}", line);
  return m;
}

size_t parse_byte_size(const std::string& text, const char* flag) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string num = text.substr(0, i), unit = text.substr(i);
  double v = 0;
  try {
    size_t used = 0;
    v = std::stod(num, &used);
    if (used != num.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    fail("{}: \"{}\" is not a size (e.g. 5GB, 500MB, 1048576)", flag, text);
  }
  double mult = 0;
  if (unit.empty() || unit == "B")
    mult = 1;
  else if (unit == "KB")
    mult = 1e3;
  else if (unit == "MB")
    mult = 1e6;
  else if (unit == "GB")
    mult = 1e9;
  else if (unit == "KiB")
    mult = 1024.0;
  else if (unit == "MiB")
    mult = 1024.0 * 1024;
  else if (unit == "GiB")
    mult = 1024.0 * 1024 * 1024;
  else
    fail("{}: unknown unit \"{}\" in \"{}\" (B, KB, MB, GB, KiB, MiB, GiB)", flag, unit, text);
  const double bytes = v * mult;
  if (!(bytes >= 1) || bytes > 1e15) fail("{}: size {} out of range", flag, text);
  return static_cast<size_t>(std::llround(bytes));
}

}  // namespace strata::cli
