// Helpers of the checkpoint-writing tests (make-checkpoint, quantize, load): a scratch
// directory, a tiny configuration with every layer kind, and running the strata binary.
#pragma once

#include "../common/scratch_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "model/nemotron_h/config.h"

namespace strata::model::test {

using ScratchDir = ::strata::test_util::ScratchDir;

// Every layer kind, with a Mamba layer feeding each attention layer (the FP8 guard rule) and
// one that does not: pattern "M*M-ME", odd widths so nothing lines up by accident.
inline ModelConfig tiny_hybrid_config(DType dtype = DType::BF16) {
  ModelConfig c;
  c.source = "tiny hybrid";
  for (char ch : std::string("MM*-ME"))
    c.layers.push_back(layer_kind_from_char(ch, c.source, 0));
  c.hidden_size = 24;
  c.vocab_size = 37;
  c.dtype = dtype;
  c.mamba_num_heads = 4;
  c.mamba_head_dim = 6;
  c.ssm_state_size = 5;
  c.n_groups = 2;
  c.conv_kernel = 4;
  c.chunk_size = 8;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 8;
  c.mlp_intermediate_sizes = {40};
  c.n_routed_experts = 5;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 16;
  c.moe_shared_expert_intermediate_size = 20;
  c.routed_scaling_factor = 2.5f;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  c.finalize();
  return c;
}

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr together
};

// Runs the strata binary with `args` (shell-quoted by the caller).
inline CommandResult run_strata(const std::string& args) {
  CommandResult r;
  const std::string cmd = std::string(STRATA_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.output.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace strata::model::test
