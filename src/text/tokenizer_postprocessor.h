// Post-processors of tokenizer.json: what encode(..., add_special_tokens=true) adds around the
// ids of a single sequence. Supported: TemplateProcessing (its "single" template: special
// token pieces and the sequence), ByteLevel (changes offsets only, so no ids), BertProcessing
// and RobertaProcessing ([cls] ids [sep]) and Sequence. Pair templates are not used by strata.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::text {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

// nullptr for JSON null. `where` names the file and field for error messages.
std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& spec,
                                                   const std::string& where);

}  // namespace strata::text
