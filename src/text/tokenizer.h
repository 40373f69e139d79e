// A tokenizer read from HF's tokenizer.json (BPE models: byte-level BPE as in Nemotron, GPT-2,
// Llama-3, Qwen2, and SentencePiece-style BPE with byte fallback). encode and decode give the
// ids and text that HF tokenizers' Tokenizer.encode / .decode give for the same file:
//   text -> (invalid UTF-8 replaced by U+FFFD, as Python's errors='replace')
//        -> added tokens cut out (raw ones, then normalized ones in the normalized text)
//        -> normalizer -> pre-tokenizer -> BPE per word -> post-processor.
// A Tokenizer is immutable after loading; encode and decode may be called from many threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer_decoder.h"

namespace strata::text {

class Tokenizer {
 public:
  // Loads tokenizer.json. bos/eos/pad are unknown (nullopt) unless set_special_names is used.
  static Tokenizer from_file(const std::filesystem::path& tokenizer_json);
  // Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json for the bos, eos and
  // pad token names. Throws strata::Error naming the file and field on any problem.
  static Tokenizer from_dir(const std::filesystem::path& model_dir);
  // Parses the text of a tokenizer.json; `source` names it in error messages.
  static Tokenizer from_json_text(std::string_view json_text, const std::string& source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // HF's encode(text, add_special_tokens).ids. Bytes that are not valid UTF-8 are read as
  // U+FFFD first (maximal subparts, as Python's bytes.decode(errors='replace')).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // HF's decode(ids, skip_special_tokens). Ids that name no token are skipped, as HF does.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of an id (added tokens first, then the model vocabulary); nullopt when
  // no token has this id.
  std::optional<std::string> id_to_token(int32_t id) const;
  // Whether the id is an added token marked special (what skip_special_tokens removes).
  bool is_special(int32_t id) const;
  // One past the largest id of any token (model vocabulary or added token). Ids below it may
  // still be unassigned in sparse vocabularies.
  int32_t vocab_size() const;

  // From tokenizer_config.json (from_dir): the token strings and their ids.
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  const std::optional<std::string>& pad_token() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  std::optional<int32_t> pad_token_id() const;
  // Sets the names by hand (for a tokenizer.json without a tokenizer_config.json).
  void set_special_names(std::optional<std::string> bos, std::optional<std::string> eos,
                         std::optional<std::string> pad);

  // --- The pieces of decode, for the incremental detokenizer (text/detokenizer.h). ---
  // The raw string of an id, nullptr when no token has it.
  const std::string* token_string(int32_t id) const;
  // Decodes token strings that sit at `pos` in a longer sequence.
  std::string decode_strings(std::vector<std::string> tokens, const DecodePosition& pos) const;
  // Whether text decoded from a window of tokens could still change if more tokens followed.
  bool decode_holds_back(const HoldQuery& query) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::text
