#include "model/nemotron_h/synthetic_checkpoint.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "io/modelopt_export.h"
#include "model/nemotron_h/fp8_layout.h"
#include "model/nemotron_h/synthetic_plan.h"

namespace strata::model {

io::WrittenCheckpoint write_synthetic_checkpoint(const std::string& dir, const ModelConfig& c,
                                                 const SyntheticOptions& o,
                                                 size_t max_shard_bytes) {
  const std::vector<SyntheticTensor> plan = synthetic_plan(c, o);
  std::vector<io::TensorToWrite> list;
  list.reserve(plan.size());
  for (const SyntheticTensor& t : plan)
    list.push_back({t.name, t.nbytes()});
  const std::map<std::string, std::string> meta{{"format", "pt"}};
  io::WrittenCheckpoint written = io::write_checkpoint(
      dir, list, [&](size_t i) { return materialize_synthetic(plan[i]); }, max_shard_bytes, meta);

  ModelConfig out_cfg = c;
  out_cfg.dtype = o.dtype;
  nlohmann::json cfg = out_cfg.to_json();
  if (o.fp8) {
    io::ModeloptExport e;
    e.exclude_modules = fp8_excluded_modules(c);
    e.producer_name = "strata make-checkpoint";
    cfg["quantization_config"] = io::quantization_config_json(e);
    io::write_text_file((std::filesystem::path(dir) / "hf_quant_config.json").string(),
                        io::hf_quant_config_json(e).dump(2) + "\n");
  }
  io::write_text_file((std::filesystem::path(dir) / "config.json").string(), cfg.dump(2) + "\n");
  return written;
}

}  // namespace strata::model
