// `strata bench prefill`: prefill tokens/s per prompt length (tools/bench/prefill_bench.h), on
// dummy weights of a preset or config.json (`--load-format dummy`) or a checkpoint directory.
// Prints one markdown table (and with --profile-ops the per-op device time of one step per
// length); --json writes the numbers too.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>

#include "bench/prefill_bench.h"
#include "cmd_bench_prefill.h"
#include "core/check.h"
#include "engine/device.h"
#include "model_source_flags.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::cli {
namespace {

struct PrefillFlags {
  ModelSourceFlags src;
  std::string device = "cuda", json_out, label;
  bench::PrefillOptions opt;
};

void print_profile(const bench::PrefillRow& row) {
  const bench::OpProfile& p = row.profile;
  std::printf(
      "\nop profile: prefill of %lld x %lld tokens, one eager step, kernels back to back (a "
      "spinning kernel holds the stream while the step is enqueued); sum %.1f us\n",
      static_cast<long long>(row.batch), static_cast<long long>(row.prompt_len), p.step_us);
  std::printf("%s", bench::op_profile_table(p).c_str());
}

void run_bench_prefill(PrefillFlags& f) {
  const Device device = engine::parse_device(f.device);
  OpContext probe;
  engine::prepare_device(device, probe);
  auto m = load_from_flags(f.src, device, /*sampling=*/false, "bench prefill");
  const std::vector<bench::PrefillRow> rows = bench::run_prefill_bench(*m, device, f.opt);
  const std::string gpu = device == Device::Cuda ? cuda::device_description() : "host";
  const std::string what = m->load_report().source + " " + f.src.dtype;
  std::printf("prefill bench: %s on %s%s%s; batch %lld, median of %lld steps\n", what.c_str(),
              gpu.c_str(), f.label.empty() ? "" : ", ", f.label.c_str(),
              static_cast<long long>(f.opt.batch), static_cast<long long>(f.opt.repeats));
  std::printf("| prompt tokens | batch | ms/step | tokens/s |\n|---|---|---|---|\n");
  for (const bench::PrefillRow& r : rows)
    std::printf("| %lld | %lld | %.3f | %.1f |\n", static_cast<long long>(r.prompt_len),
                static_cast<long long>(r.batch), r.ms, r.tokens_per_s);
  for (const bench::PrefillRow& r : rows)
    if (r.profile.steps > 0) print_profile(r);
  if (f.json_out.empty()) return;
  nlohmann::json j;
  j["bench"] = "prefill";
  j["model"] = what;
  j["gpu"] = gpu;
  j["label"] = f.label;
  j["repeats"] = f.opt.repeats;
  for (const bench::PrefillRow& r : rows) {
    nlohmann::json row = {{"prompt_len", r.prompt_len}, {"batch", r.batch},
                          {"ms_per_step", r.ms},        {"tokens_per_s", r.tokens_per_s},
                          {"repeat_ms", r.repeat_ms}};
    for (const bench::OpProfileRow& p : r.profile.rows)
      row["profile_us"].push_back({{"op", p.op}, {"calls", p.calls}, {"us", p.us}});
    j["rows"].push_back(row);
  }
  std::ofstream(f.json_out) << j.dump(2) << "\n";
}

}  // namespace

CLI::App* setup_bench_prefill(CLI::App* bench) {
  auto f = std::make_shared<PrefillFlags>();
  CLI::App* sub =
      bench->add_subcommand("prefill", "Prefill tokens/s per prompt length (one step each)");
  add_model_source_flags(sub, f->src);
  sub->add_option("--device", f->device, "cuda or cpu")->capture_default_str();
  sub->add_option("--prompt-len", f->opt.prompt_lens, "Prompt lengths, comma separated")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--batch", f->opt.batch, "Prompts prefilled together in one step")
      ->capture_default_str();
  sub->add_option("--repeats", f->opt.repeats, "Timed steps per length (median reported)")
      ->capture_default_str();
  sub->add_option("--warmup", f->opt.warmup, "Untimed steps per length first")
      ->capture_default_str();
  sub->add_flag("--profile-ops", f->opt.profile_ops,
                "Also time one step per length op by op (CUDA events per op)");
  sub->add_option("--json", f->json_out, "Also write the numbers as JSON to this file");
  sub->add_option("--label", f->label, "Free text printed with the results (commit, notes)");
  sub->callback([f] { run_bench_prefill(*f); });
  return sub;
}

}  // namespace strata::cli
