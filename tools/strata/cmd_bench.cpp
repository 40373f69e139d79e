// `strata bench`: batch-1 decode tokens/s (tools/bench/decode_bench.h), on dummy weights of a
// preset or config.json (`--load-format dummy`) or a checkpoint directory. Prints one
// markdown table (eager and CUDA-graph rows) with the bytes a token touches and the fraction
// of the read-bandwidth ceiling; --json writes the numbers too.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "bench/batch_decode_bench.h"
#include "bench/decode_bench.h"
#include "bench/op_profile.h"
#include "cmd_bench_prefill.h"
#include "command.h"
#include "core/check.h"
#include "engine/device.h"
#include "flag_checks.h"
#include "io/atomic_file.h"
#include "model_source_flags.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::cli {
namespace {

struct BenchFlags {
  ModelSourceFlags src;
  std::string device = "cuda", json_out, label;
  bench::BenchOptions opt;
  bool no_graph = false;
  int64_t profile_steps = 0;  // > 0: also profile this many eager steps op by op
  std::vector<int64_t> batches;  // non-empty: the batched decode benchmark instead
};

void run_batch_bench(BenchFlags& f) {
  const Device device = engine::parse_device(f.device);
  OpContext probe;
  engine::prepare_device(device, probe);
  auto m = load_from_flags(f.src, device, /*sampling=*/true, "bench");
  bench::BatchDecodeOptions o;
  o.batches = f.batches;
  o.prompt_len = f.opt.prompt_len;
  o.warmup = f.opt.warmup;
  o.repeats = f.opt.repeats;
  o.steps = std::min<int64_t>(f.opt.steps, 16);
  o.ceiling_bytes_per_s = f.opt.ceiling_bytes_per_s;
  o.eager_only = f.no_graph;
  o.profile_steps = f.profile_steps;
  const std::vector<bench::BatchDecodeRow> rows = bench::run_batch_decode_bench(*m, device, o);
  const std::string gpu = device == Device::Cuda ? cuda::device_description() : "host";
  const std::string what = m->load_report().source + " " + f.src.dtype;
  std::printf("batched decode bench: %s on %s%s%s; prompt %lld, %lld steps x %lld repeats\n",
              what.c_str(), gpu.c_str(), f.label.empty() ? "" : ", ", f.label.c_str(),
              static_cast<long long>(o.prompt_len), static_cast<long long>(o.steps),
              static_cast<long long>(o.repeats));
  std::printf(
      "step: the engine's decode step (Executor::step, greedy sampling and the ids' copy to the "
      "host; %s); eager: the forward alone (no sampling, no graph). Roofline fraction from %s.\n",
      device == Device::Cuda ? "a CUDA graph per batch-size bucket, captured in warm-up"
                             : "eager on the host",
      o.eager_only ? "the eager forward (--enforce-eager)" : "the step");
  std::printf(
      "| batch | step ms | eager ms | tokens/s (%s) | bytes (GB) | bytes at %.2f TB/s (ms) | "
      "FLOPs at peak (ms) | of roofline | eager of roofline |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      o.eager_only ? "eager" : "step", o.ceiling_bytes_per_s / 1e12);
  for (const auto& r : rows) {
    const std::string step =
        o.eager_only ? "-" : fmt::format("{:.3f} ({})", r.step_ms, r.step_mode);
    std::printf("| %lld | %s | %.3f | %.1f | %.3f | %.3f | %.3f | %.1f%% | %.1f%% |\n",
                static_cast<long long>(r.batch), step.c_str(), r.eager_ms, r.tokens_per_s,
                r.bytes / 1e9, r.bytes_ms, r.flops_ms, 100 * r.fraction, 100 * r.eager_fraction);
  }
  for (const auto& r : rows)
    if (!r.step_note.empty())
      std::printf("batch %lld: %s\n", static_cast<long long>(r.batch), r.step_note.c_str());
  for (const auto& r : rows)
    if (r.profile.steps > 0)
      std::printf(
          "\nop profile, batch %lld: %lld eager decode steps of %lld tokens, kernels back to back "
          "(a spinning kernel holds the stream while the step is enqueued); sum %.1f us/step\n%s",
          static_cast<long long>(r.batch), static_cast<long long>(r.profile.steps),
          static_cast<long long>(r.batch), r.profile.step_us,
          bench::op_profile_table(r.profile).c_str());
  if (f.json_out.empty()) return;
  nlohmann::json j;
  j["bench"] = "batch_decode";
  j["model"] = what;
  j["gpu"] = gpu;
  j["label"] = f.label;
  j["roofline_of"] = o.eager_only ? "eager forward" : "engine step";
  for (const auto& r : rows) {
    nlohmann::json row = {{"batch", r.batch},
                          {"ms_per_step", r.ms_per_step},
                          {"roofline_of", r.roofline_of},
                          {"tokens_per_s", r.tokens_per_s},
                          {"eager_ms_per_step", r.eager_ms},
                          {"eager_repeat_ms_per_step", r.eager_repeat_ms},
                          {"eager_fraction_of_roofline", r.eager_fraction},
                          {"bytes", r.bytes},
                          {"bytes_ms", r.bytes_ms},
                          {"flops_ms", r.flops_ms},
                          {"fraction_of_roofline", r.fraction}};
    if (!o.eager_only) {
      row["step_ms_per_step"] = r.step_ms;
      row["step_mode"] = r.step_mode;
      row["step_repeat_ms_per_step"] = r.step_repeat_ms;
      if (!r.step_note.empty()) row["step_note"] = r.step_note;
    }
    for (const bench::OpProfileRow& p : r.profile.rows)
      row["profile_us"].push_back({{"op", p.op}, {"calls", p.calls}, {"us", p.us}});
    j["rows"].push_back(row);
  }
  io::write_file_atomic(f.json_out, j.dump(2) + "\n");
}

void print_op_profile(model::NemotronHModel& m, Device device, const BenchFlags& f) {
  if (device != Device::Cuda)
    fail("bench --profile-ops needs --device cuda (it times CUDA events)");
  const bench::OpProfile p =
      bench::profile_decode_ops(m, f.opt.prompt_len, f.opt.warmup, f.profile_steps);
  std::printf(
      "\nop profile: %lld eager decode steps, kernels back to back (a spinning kernel holds the "
      "stream while the step is enqueued); sum %.1f us/step\n",
      static_cast<long long>(p.steps), p.step_us);
  std::printf("%s", bench::op_profile_table(p).c_str());
}

void run_bench(BenchFlags& f) {
  const Device device = engine::parse_device(f.device);
  OpContext probe;
  engine::prepare_device(device, probe);
  auto m = load_from_flags(f.src, device, /*sampling=*/true, "bench");
  f.opt.graph = !f.no_graph;
  const bench::BenchResult r = bench::run_decode_bench(*m, device, f.opt);
  const std::string gpu = device == Device::Cuda ? cuda::device_description() : "host";
  const std::string what = m->load_report().source + " " + f.src.dtype;
  std::printf("decode bench: %s on %s%s%s\n", what.c_str(), gpu.c_str(),
              f.label.empty() ? "" : ", ", f.label.c_str());
  std::printf(
      "bytes/token: %.3f GB (weights %.3f, state %.3f, KV %.4f); prompt %lld, %lld steps x %lld "
      "repeats\n",
      r.bytes.total() / 1e9, r.bytes.weights / 1e9, r.bytes.state / 1e9, r.bytes.kv / 1e9,
      static_cast<long long>(f.opt.prompt_len), static_cast<long long>(f.opt.steps),
      static_cast<long long>(f.opt.repeats));
  std::printf("| mode | ms/token | tokens/s | of %.2f TB/s |\n|---|---|---|---|\n",
              f.opt.ceiling_bytes_per_s / 1e12);
  for (const auto& row : r.rows) {
    if (row.tokens_per_s > 0)
      std::printf("| %s | %.3f | %.1f | %.1f%% |\n", row.mode.c_str(), row.ms_per_token,
                  row.tokens_per_s, 100 * row.fraction);
    else
      std::printf("| %s | - | - | %s |\n", row.mode.c_str(), row.note.c_str());
  }
  const bool both = !r.tokens_eager.empty() && !r.tokens_graph.empty();
  if (both)
    std::printf("graph tokens equal eager tokens: %s\n",
                r.tokens_eager == r.tokens_graph ? "yes" : "NO");
  if (!f.json_out.empty()) {
    nlohmann::json j;
    j["model"] = what;
    j["gpu"] = gpu;
    j["label"] = f.label;
    j["bytes_per_token"] = {{"weights", r.bytes.weights},
                            {"state", r.bytes.state},
                            {"kv", r.bytes.kv},
                            {"total", r.bytes.total()}};
    j["prompt_len"] = f.opt.prompt_len;
    j["steps"] = f.opt.steps;
    j["repeats"] = f.opt.repeats;
    for (const auto& row : r.rows)
      j["rows"].push_back({{"mode", row.mode},
                           {"ms_per_token", row.ms_per_token},
                           {"tokens_per_s", row.tokens_per_s},
                           {"fraction_of_ceiling", row.fraction},
                           {"repeat_ms_per_token", row.repeat_ms},
                           {"note", row.note}});
    if (both) j["graph_tokens_equal_eager"] = r.tokens_eager == r.tokens_graph;
    io::write_file_atomic(f.json_out, j.dump(2) + "\n");
  }
  if (both && r.tokens_eager != r.tokens_graph)
    fail("bench: the graph replay produced other tokens than the eager steps");
  if (f.profile_steps > 0) print_op_profile(*m, device, f);
}

void setup_bench(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* sub = app.add_subcommand("bench", "Batch-1 decode tokens/s (eager and CUDA graph)");
  add_model_source_flags(sub, f->src);
  sub->add_option("--device", f->device, "cuda or cpu")->capture_default_str();
  sub->add_option("--prompt-len", f->opt.prompt_len, "Prompt tokens prefilled first")
      ->check(int_range(1, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_option("--steps", f->opt.steps, "Decode steps per timed repeat")
      ->check(int_range(1, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_option("--repeats", f->opt.repeats, "Timed repeats (the median is reported)")
      ->check(int_range(1, 1000))
      ->capture_default_str();
  sub->add_option("--warmup", f->opt.warmup, "Untimed decode steps first")
      ->check(int_range(0, kMaxFlagTokens))
      ->capture_default_str();
  sub->add_flag("--no-graph,--enforce-eager", f->no_graph,
                "Only the eager decode step (with --batch: no engine-step / graph column)");
  sub->add_option("--profile-ops", f->profile_steps,
                  "Then time this many eager decode steps op by op (CUDA events per op; with "
                  "--batch, steps of B tokens per batch size)")
      ->check(int_range(0, 100000));
  sub->add_option("--json", f->json_out, "Also write the numbers as JSON to this file");
  sub->add_option("--label", f->label, "Free text printed with the results (commit, notes)");
  sub->add_option("--batch", f->batches,
                  "Batched decode instead: the engine step's time (graph) and the eager forward's, "
                  "and the roofline fraction, per batch size (comma separated; at most 16 steps "
                  "per repeat)")
      ->delimiter(',');
  setup_bench_prefill(sub);
  // `strata bench latency|throughput|prefill|serve ...`; plain `strata bench` is the decode bench.
  for (auto& setup : bench_setups())
    setup(*sub);
  sub->require_subcommand(0, 1);
  sub->callback([f, sub] {
    if (!sub->get_subcommands().empty()) return;
    if (!f->batches.empty())
      run_batch_bench(*f);
    else
      run_bench(*f);
  });
}

}  // namespace

STRATA_COMMAND(setup_bench);

}  // namespace strata::cli
