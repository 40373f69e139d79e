// `strata logits`: one prefill of the given token ids; writes the f32 logits of every
// position as a NumPy .npy file [tokens, vocab].
#include <cmath>
#include <memory>
#include <optional>
#include <string>

#include "command.h"
#include "core/check.h"
#include "engine/device.h"
#include "engine/executor.h"
#include "engine/token_ids.h"
#include "flag_checks.h"
#include "io/npy.h"
#include "model/nemotron_h/load.h"
#include "model_source_flags.h"

namespace strata::cli {
namespace {

struct LogitsFlags {
  ModelSourceFlags src;  // --model DIR or --load-format dummy
  std::string prompt_ids, out, device = "cpu";
  int64_t prefill_chunk = 0;
};

struct NonFinite {
  int64_t row, col;
  float value;
};

// all: [T, V] f32 on the host.
std::optional<NonFinite> first_non_finite_row(const Tensor& all) {
  const float* p = all.data<float>();
  const int64_t T = all.shape()[0], V = all.shape()[1];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t v = 0; v < V; ++v)
      if (!std::isfinite(p[t * V + v])) return NonFinite{t, v, p[t * V + v]};
  return std::nullopt;
}

void run_logits(const LogitsFlags& f) {
  const std::vector<int32_t> ids = engine::parse_token_id_list(f.prompt_ids, "--prompt-ids");
  const Device device = engine::parse_device(f.device);
  OpContext probe;
  engine::prepare_device(device, probe);  // fail before loading anything
  if (f.prefill_chunk < 0) fail("--prefill-chunk must be >= 0, got {}", f.prefill_chunk);
  auto model = load_from_flags(f.src, device, /*sampling=*/false, "logits");
  const model::ModelConfig& c = model->config();
  engine::validate_token_ids(ids, c.vocab_size, "--prompt-ids");
  // The same context check as generate: the prompt must fit the model's positions.
  if (c.max_position_embeddings > 0 && static_cast<int64_t>(ids.size()) > c.max_position_embeddings)
    fail("--prompt-ids: {} tokens exceed the model's context length ({}, max_position_embeddings)",
         ids.size(), c.max_position_embeddings);

  const int64_t T = static_cast<int64_t>(ids.size());
  engine::ExecutorConfig ec;
  ec.device = device;
  ec.max_num_seqs = 1;
  ec.max_model_len = T;  // checked against the model's context length
  ec.cache_plan = cache::plan_cache_for_tokens(c, 1, T, 16, model->act_dtype());
  ec.cuda_graphs = false;
  engine::Executor executor(*model, ec);
  engine::ExecutorSequence seq(executor, T);

  // One prefill (or several chunks of it, each continuing from the cached state).
  Tensor all = Tensor::empty(Shape{T, c.vocab_size}, DType::F32, Device::Host);  // [T, V]
  const int64_t chunk = f.prefill_chunk > 0 ? f.prefill_chunk : T;
  for (int64_t done = 0; done < T; done += chunk) {
    const int64_t len = std::min(chunk, T - done);
    Tensor logits = seq.forward(std::vector<int32_t>(ids.begin() + done, ids.begin() + done + len),
                                engine::LogitRows::All);  // [len, V] f32
    if (logits.device() != Device::Host) {
      logits = logits.to(Device::Host);
      ++executor.context().d2h_copies;
    }
    all.slice(0, done, len).copy_from(logits);
  }
  // NaN or inf is never written as a result: name the first position that has one.
  if (const auto bad = first_non_finite_row(all))
    fail(
        "logits: position {} (token id {}) has a non-finite logit ({} at vocab index {}); nothing "
        "was written to {}",
        bad->row, ids[static_cast<size_t>(bad->row)], bad->value, bad->col, f.out);
  io::write_npy(f.out, all);
}

void setup_logits(CLI::App& app) {
  auto f = std::make_shared<LogitsFlags>();
  CLI::App* sub =
      app.add_subcommand("logits", "Write the f32 logits of every prompt position as .npy");
  add_model_source_flags(sub, f->src);
  sub->add_option("--prompt-ids", f->prompt_ids, "Comma-separated token ids, e.g. 1,2,3")
      ->required();
  sub->add_option("--out", f->out, "Output .npy file [tokens, vocab] float32")->required();
  sub->add_option("--device", f->device, "cpu or cuda")->capture_default_str();
  sub->add_option("--prefill-chunk", f->prefill_chunk,
                  "Prefill in chunks of this many tokens; 0 = all at once")
      ->check(int_range(0, kMaxFlagTokens))
      ->capture_default_str();
  sub->callback([f] { run_logits(*f); });
}

}  // namespace

STRATA_COMMAND(setup_logits);

}  // namespace strata::cli
