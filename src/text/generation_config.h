// generation_config.json (HF transformers): the model's default sampling settings and the
// token ids that end generation. Also the one place that decides which ids stop a generation.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace strata::text {

class Tokenizer;

struct GenerationConfig {
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;  // "eos_token_id": an int or a list; empty when absent
  std::optional<int32_t> pad_token_id;
  std::optional<bool> do_sample;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> repetition_penalty;
  std::optional<int32_t> max_new_tokens;

  // Throws strata::Error naming the file and field when the file is malformed.
  static GenerationConfig from_file(const std::filesystem::path& path);
  // DIR/generation_config.json, or an empty config when the file does not exist.
  static GenerationConfig from_dir(const std::filesystem::path& model_dir);
};

// The ids that end a generation for the model in `model_dir`, sorted and without duplicates:
// every eos_token_id of generation_config.json, the eos_token_id of config.json (int or list),
// the tokenizer's eos token (tokenizer_config.json), and, when the prompt is a chat, the
// tokenizer's "<|im_end|>" (the end of a chat turn) if it has one.
std::vector<int32_t> stop_token_ids(const std::filesystem::path& model_dir,
                                    const Tokenizer* tokenizer, bool chat);

}  // namespace strata::text
