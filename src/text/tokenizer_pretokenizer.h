// Pre-tokenizers of tokenizer.json: they cut each normalized piece into the words the model
// tokenizes one at a time. Supported: Sequence, Split (regex or string pattern, every delimiter
// behaviour, invert), ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), Digits,
// Metaspace (prepend_scheme always / first / never, split) and WhitespaceSplit.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <vector>

namespace strata::text {

// A word in the making. `at_origin` says the piece starts at offset 0 of the original input,
// which is what Metaspace's prepend_scheme "first" looks at.
struct PreToken {
  std::string text;
  bool at_origin = false;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces; empty pieces never survive (as in HF).
  virtual void pre_tokenize(std::vector<PreToken>& pieces) const = 0;
};

// nullptr for JSON null. `where` names the file and field for error messages.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec,
                                                 const std::string& where);

// The pattern GPT-2's ByteLevel pre-tokenizer splits on when use_regex is true.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace strata::text
