#include "text/tokenizer_pretokenizer.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <utility>

#include "text/tokenizer_json.h"
#include "text/tokenizer_regex.h"
#include "text/tokenizer_split.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

// Cuts every piece with `cut` (piece text -> kept byte ranges) and drops empty results. A
// sub-piece keeps `at_origin` only when it starts where its parent started.
void split_pieces(std::vector<PreToken>& pieces,
                  const std::function<std::vector<std::pair<size_t, size_t>>(std::string&)>& cut) {
  std::vector<PreToken> out;
  out.reserve(pieces.size());
  for (PreToken& p : pieces) {
    for (const auto& [b, e] : cut(p.text)) {
      if (b == e) continue;
      out.push_back({p.text.substr(b, e - b), p.at_origin && b == 0});
    }
  }
  pieces = std::move(out);
}

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& s : steps_)
      s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(Regex regex, SplitBehavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](std::string& text) {
      std::vector<Span> spans = regex_.spans(text);
      if (invert_) invert_spans(spans);
      return apply_split_behavior(spans, behavior_);
    });
  }

 private:
  Regex regex_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space),
        regex_(use_regex ? std::make_unique<Regex>(kGpt2SplitPattern, "ByteLevel pre-tokenizer")
                         : nullptr) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [&](std::string& text) -> std::vector<std::pair<size_t, size_t>> {
      if (text.empty()) return {};
      if (add_prefix_space_ && text.front() != ' ') text.insert(0, " ");
      if (!regex_) return {{0, text.size()}};
      return apply_split_behavior(regex_->spans(text), SplitBehavior::Isolated);
    });
    // Then every byte of every piece is spelled with the byte-level alphabet.
    const auto& alphabet = byte_level_alphabet();
    for (PreToken& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (char c : p.text)
        mapped += alphabet[static_cast<unsigned char>(c)];
      p.text = std::move(mapped);
    }
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

// Numbers apart from the rest: each digit alone, or runs of digits (Unicode \p{N}, which is
// Rust's char::is_numeric).
class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual)
      : regex_(individual ? R"(\p{N})" : R"(\p{N}+)", "Digits pre-tokenizer") {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    // A run of per-character matches merged Contiguous equals one match of \p{N}+ Isolated.
    split_pieces(pieces, [&](std::string& text) {
      return apply_split_behavior(regex_.spans(text), SplitBehavior::Isolated);
    });
  }

 private:
  Regex regex_;
};

enum class PrependScheme { Always, First, Never };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), rep_(utf8_encode(replacement)), scheme_(scheme), split_(split) {}
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (PreToken& p : pieces) {
      std::string replaced;
      replaced.reserve(p.text.size() + rep_.size());
      for (char c : p.text) {
        if (c == ' ') {
          replaced += rep_;
        } else {
          replaced.push_back(c);
        }
      }
      const bool starts_with_rep = replaced.compare(0, rep_.size(), rep_) == 0;
      if (!starts_with_rep &&
          (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_origin))) {
        replaced.insert(0, rep_);
      }
      p.text = std::move(replaced);
    }
    if (!split_) return;
    split_pieces(pieces, [&](std::string& text) {
      return apply_split_behavior(char_spans(text, [&](char32_t c) { return c == replacement_; }),
                                  SplitBehavior::MergedWithNext);
    });
  }

 private:
  char32_t replacement_;
  std::string rep_;
  PrependScheme scheme_;
  bool split_;
};

class WhitespaceSplitPreTokenizer final : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    split_pieces(pieces, [](std::string& text) {
      return apply_split_behavior(char_spans(text, is_unicode_whitespace), SplitBehavior::Removed);
    });
  }
};

std::unique_ptr<PreTokenizer> make_split(const nlohmann::json& spec, const std::string& where) {
  const nlohmann::json& pattern = json_member(spec, "pattern", where);
  std::string regex;
  if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
    regex = pattern["Regex"].get<std::string>();
  } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
    regex = Regex::escape(pattern["String"].get<std::string>());
  } else {
    fail("{}.pattern: expected {{\"String\": ...}} or {{\"Regex\": ...}}, found {}", where,
         pattern.dump());
  }
  return std::make_unique<SplitPreTokenizer>(
      Regex(regex, where + ".pattern"),
      parse_split_behavior(json_string(spec, "behavior", where), where + ".behavior"),
      json_bool(spec, "invert", false, where));
}

std::unique_ptr<PreTokenizer> make_metaspace(const nlohmann::json& spec, const std::string& where) {
  PrependScheme scheme = PrependScheme::Always;
  if (spec.contains("prepend_scheme") && !spec["prepend_scheme"].is_null()) {
    const std::string s = json_string(spec, "prepend_scheme", where);
    if (s == "always") {
      scheme = PrependScheme::Always;
    } else if (s == "first") {
      scheme = PrependScheme::First;
    } else if (s == "never") {
      scheme = PrependScheme::Never;
    } else {
      fail("{}.prepend_scheme: expected always, first or never, found '{}'", where, s);
    }
  }
  // Files written before prepend_scheme existed say add_prefix_space instead.
  if (!json_bool(spec, "add_prefix_space", true, where)) scheme = PrependScheme::Never;
  return std::make_unique<MetaspacePreTokenizer>(json_char(spec, "replacement", where), scheme,
                                                 json_bool(spec, "split", true, where));
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& spec,
                                                 const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = json_type(spec, where);
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(spec, "pretokenizers", where);
    if (!list.is_array()) fail("{}.pretokenizers: expected an array", where);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_pre_tokenizer(list[i], fmt::format("{}.pretokenizers[{}]", where, i));
      if (p) steps.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "Split") return make_split(spec, where);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(json_bool(spec, "add_prefix_space", true, where),
                                                   json_bool(spec, "use_regex", true, where));
  }
  if (type == "Digits") {
    return std::make_unique<DigitsPreTokenizer>(json_bool(spec, "individual_digits", false, where));
  }
  if (type == "Metaspace") return make_metaspace(spec, where);
  if (type == "WhitespaceSplit") return std::make_unique<WhitespaceSplitPreTokenizer>();
  fail(
      "{}: pre-tokenizer type '{}' is not supported (supported: Sequence, Split, ByteLevel, "
      "Digits, Metaspace, WhitespaceSplit)",
      where, type);
}

}  // namespace strata::text
