#include "text/tokenizer_normalizer.h"

#include <optional>
#include <vector>

#include "text/tokenizer_json.h"
#include "text/tokenizer_regex.h"
#include "text/tokenizer_unicode_norm.h"
#include "text/unicode.h"

namespace strata::text {

struct PatternReplacer::Impl {
  std::optional<std::string> literal;  // {"String": s}
  std::optional<Regex> regex;          // {"Regex": r}
  std::string content;
};

PatternReplacer::PatternReplacer(const nlohmann::json& pattern, std::string content,
                                 const std::string& where)
    : impl_(std::make_unique<Impl>()) {
  impl_->content = std::move(content);
  if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    impl_->literal = pattern["String"].get<std::string>();
  } else if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    impl_->regex.emplace(pattern["Regex"].get<std::string>(), where + ".pattern");
  } else {
    fail("{}.pattern: expected {{\"String\": ...}} or {{\"Regex\": ...}}, found {}", where,
         pattern.dump());
  }
}

PatternReplacer::~PatternReplacer() = default;
PatternReplacer::PatternReplacer(PatternReplacer&&) noexcept = default;

std::string PatternReplacer::apply(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  if (impl_->literal) {
    const std::string& lit = *impl_->literal;
    if (lit.empty()) return std::string(text);  // HF: an empty pattern matches nothing
    for (size_t pos = text.find(lit); pos != std::string_view::npos; pos = text.find(lit, prev)) {
      out.append(text.substr(prev, pos - prev)).append(impl_->content);
      prev = pos + lit.size();
    }
  } else {
    for (const auto& [s, e] : impl_->regex->find_all(text)) {
      out.append(text.substr(prev, s - prev)).append(impl_->content);
      prev = e;
    }
  }
  out.append(text.substr(prev));
  return out;
}

namespace {

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& s : steps_)
      s->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Prepends a fixed string to every non-empty piece (Llama/SentencePiece-style "▁").
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  explicit ReplaceNormalizer(PatternReplacer r) : replacer_(std::move(r)) {}
  void normalize(std::string& text) const override { text = replacer_.apply(text); }

 private:
  PatternReplacer replacer_;
};

// Removes Unicode white space at either end.
class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      for (size_t i = 0; i < text.size() && is_unicode_whitespace(utf8_next(text, i));)
        begin = i;
    }
    if (right_) {
      // Walk forward remembering where the current run of white space started.
      size_t run = std::string::npos;
      for (size_t i = begin; i < text.size();) {
        const size_t at = i;
        if (!is_unicode_whitespace(utf8_next(text, i))) {
          run = std::string::npos;
        } else if (run == std::string::npos) {
          run = at;
        }
      }
      if (run != std::string::npos) end = run;
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

// Maps every byte to its byte-level alphabet character (GPT-2 style) at normalization time.
class ByteLevelNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    const auto& alphabet = byte_level_alphabet();
    std::string out;
    out.reserve(text.size() * 2);
    for (char c : text)
      out += alphabet[static_cast<unsigned char>(c)];
    text = std::move(out);
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = json_type(spec, where);
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(spec, "normalizers", where);
    if (!list.is_array()) fail("{}.normalizers: expected an array", where);
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto n = make_normalizer(list[i], fmt::format("{}.normalizers[{}]", where, i));
      if (n) steps.push_back(std::move(n));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  if (type == "Prepend")
    return std::make_unique<PrependNormalizer>(json_string(spec, "prepend", where));
  if (type == "Replace") {
    return std::make_unique<ReplaceNormalizer>(PatternReplacer(
        json_member(spec, "pattern", where), json_string(spec, "content", where), where));
  }
  if (type == "Strip") {
    return std::make_unique<StripNormalizer>(json_bool(spec, "strip_left", true, where),
                                             json_bool(spec, "strip_right", true, where));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelNormalizer>();
  if (auto n = make_unicode_normalizer(type, where)) return n;
  fail(
      "{}: normalizer type '{}' is not supported (supported: Sequence, Prepend, Replace, Strip, "
      "ByteLevel, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents)",
      where, type);
}

}  // namespace strata::text
