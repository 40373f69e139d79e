// Normalizers of tokenizer.json. They rewrite each piece of text that is not an added token
// before pre-tokenization. Supported: Sequence, Prepend, Replace (string or regex pattern),
// Strip, ByteLevel, and through ICU NFC, NFD, NFKC, NFKD, Lowercase and StripAccents
// (text/tokenizer_unicode_norm.h). Any other type fails to load with a message naming it,
// rather than tokenizing differently from HF.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace strata::text {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Builds the normalizer described by `spec` (a tokenizer.json "normalizer" value); nullptr for
// JSON null. `where` names the file and field for error messages.
std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec, const std::string& where);

// Replaces every occurrence of `pattern` (a tokenizer.json {"String": s} or {"Regex": r}) in
// text by `content`, left to right without overlap. Shared by the Replace normalizer and the
// Replace decoder.
class PatternReplacer {
 public:
  PatternReplacer(const nlohmann::json& pattern, std::string content, const std::string& where);
  ~PatternReplacer();
  PatternReplacer(PatternReplacer&&) noexcept;
  std::string apply(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::text
