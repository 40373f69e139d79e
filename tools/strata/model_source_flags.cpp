#include "model_source_flags.h"

#include <cctype>
#include <cmath>

#include "core/check.h"
#include "io/json_strict.h"

namespace strata::cli {

model::ModelConfig config_from_preset_or_file(const std::string& preset, const std::string& config_path,
                                              const char* cmd) {
  if (preset.empty() == config_path.empty())
    fail("{}: give exactly one of --preset NAME and --config config.json", cmd);
  if (!preset.empty()) return model::ModelConfig::preset(preset);
  return model::ModelConfig::from_json_text(io::read_text_file(config_path), config_path);
}

model::SyntheticOptions synthetic_options(const std::string& dtype, uint64_t seed, const char* cmd) {
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

size_t parse_byte_size(const std::string& text, const char* flag) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
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
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "KiB") mult = 1024.0;
  else if (unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else fail("{}: unknown unit \"{}\" in \"{}\" (B, KB, MB, GB, KiB, MiB, GiB)", flag, unit, text);
  const double bytes = v * mult;
  if (!(bytes >= 1) || bytes > 1e15) fail("{}: size {} out of range", flag, text);
  return static_cast<size_t>(std::llround(bytes));
}

}  // namespace strata::cli
