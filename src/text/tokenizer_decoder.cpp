#include "text/tokenizer_decoder.h"

#include <nlohmann/json.hpp>

#include "text/tokenizer_json.h"
#include "text/tokenizer_normalizer.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens, bool& fused,
                    const DecodePosition& pos) const override {
    for (const auto& s : steps_)
      s->decode_chain(tokens, fused, pos);
  }
  bool holds_back(const HoldQuery& q) const override {
    for (const auto& s : steps_)
      if (s->holds_back(q)) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

// Byte-level alphabet back to bytes. A token with a character outside the alphabet (an added
// token such as "<|im_end|>" spelled with ordinary characters) contributes its own UTF-8 bytes.
// The bytes of all tokens are then read as UTF-8 with U+FFFD for ill-formed parts.
class ByteLevelDecoder final : public Decoder {
 public:
  static void append_bytes(std::string& bytes, const std::string& token) {
    const size_t mark = bytes.size();
    for (size_t i = 0; i < token.size();) {
      const int b = codepoint_to_byte(utf8_next(token, i));
      if (b < 0) {
        bytes.replace(mark, std::string::npos, token);
        return;
      }
      bytes.push_back(static_cast<char>(b));
    }
  }
  void decode_chain(std::vector<std::string>& tokens, bool& fused,
                    const DecodePosition&) const override {
    std::string bytes;
    for (const std::string& t : tokens)
      append_bytes(bytes, t);
    tokens.assign(1, utf8_replace_invalid(bytes));
    fused = true;
  }
  bool holds_back(const HoldQuery& q) const override {
    // Wait while the bytes end inside a character that the next token may complete. (A U+FFFD
    // for bytes that can never form a character is final and does not wait.)
    std::string tail;
    for (size_t i = q.window.size(); i-- > 0 && tail.size() < 4;) {
      std::string bytes;
      append_bytes(bytes, q.window[i]);
      tail.insert(0, bytes);
    }
    return utf8_ends_incomplete(tail);
  }
};

// <0xXX> tokens (SentencePiece byte fallback) back to bytes. Consecutive byte tokens form one
// group; a group that is not valid UTF-8 becomes one U+FFFD per byte (HF's rule).
class ByteFallbackDecoder final : public Decoder {
 public:
  static int byte_of(std::string_view t) {
    // HF parses the two characters after "<0x" with u8::from_str_radix(.., 16), which also
    // accepts a leading '+' before a single digit.
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    auto hex = [](char c) {
      return c >= '0' && c <= '9'   ? c - '0'
             : c >= 'a' && c <= 'f' ? c - 'a' + 10
             : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                    : -1;
    };
    if (t[3] == '+') return hex(t[4]);
    const int hi = hex(t[3]), lo = hex(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
  void decode_chain(std::vector<std::string>& tokens, bool&, const DecodePosition&) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string group;
    auto flush = [&] {
      if (group.empty()) return;
      if (utf8_is_valid(group)) {
        out.push_back(group);
      } else {
        for (size_t i = 0; i < group.size(); ++i)
          out.emplace_back(kReplacementUtf8);
      }
      group.clear();
    };
    for (std::string& t : tokens) {
      const int b = byte_of(t);
      if (b >= 0) {
        group.push_back(static_cast<char>(b));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    tokens = std::move(out);
  }
  bool holds_back(const HoldQuery& q) const override {
    return !q.window.empty() && byte_of(q.window.back()) >= 0;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens, bool& fused,
                    const DecodePosition&) const override {
    std::string all;
    for (const std::string& t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
    fused = true;
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each entry.
// Once the list is fused its one entry is the whole text: the leading cut belongs to the start
// of the sequence and the trailing cut to its end.
class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(utf8_encode(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens, bool& fused,
                    const DecodePosition& pos) const override {
    const size_t start = !fused || pos.at_start ? start_ : 0;
    const size_t stop = !fused || pos.at_end ? stop_ : 0;
    const std::string_view c = content_;
    for (std::string& t : tokens) {
      std::string_view v = t;
      for (size_t k = 0; k < start && v.substr(0, c.size()) == c; ++k)
        v.remove_prefix(c.size());
      for (size_t k = 0; k < stop && ends_with(v, c); ++k)
        v.remove_suffix(c.size());
      t = std::string(v);
    }
  }
  bool holds_back(const HoldQuery& q) const override {
    return (stop_ > 0 && ends_with(q.decoded, content_)) ||
           (start_ > 0 && q.at_start && q.decoded.empty());
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  explicit ReplaceDecoder(PatternReplacer r) : replacer_(std::move(r)) {}
  void decode_chain(std::vector<std::string>& tokens, bool&, const DecodePosition&) const override {
    for (std::string& t : tokens)
      t = replacer_.apply(t);
  }

 private:
  PatternReplacer replacer_;
};

// "▁" back to spaces; in the first token of a sequence the replacement is dropped instead
// (every occurrence in that token, as HF does) unless prepend_scheme is "never".
class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool drop_first)
      : replacement_(utf8_encode(replacement)), drop_first_(drop_first) {}
  void decode_chain(std::vector<std::string>& tokens, bool&,
                    const DecodePosition& pos) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool drop = i == 0 && pos.at_start && drop_first_;
      std::string out;
      std::string_view t = tokens[i];
      for (size_t at = t.find(replacement_); at != std::string_view::npos;
           at = t.find(replacement_)) {
        out.append(t.substr(0, at));
        if (!drop) out.push_back(' ');
        t.remove_prefix(at + replacement_.size());
      }
      out.append(t);
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool drop_first_;
};

// Word-end suffix (e.g. "</w>") becomes a space, except in the last token of the sequence.
class BpeSuffixDecoder final : public Decoder {
 public:
  explicit BpeSuffixDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens, bool&,
                    const DecodePosition& pos) const override {
    if (suffix_.empty()) return;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const bool last = i + 1 == tokens.size() && pos.at_end;
      std::string out;
      std::string_view t = tokens[i];
      for (size_t at = t.find(suffix_); at != std::string_view::npos; at = t.find(suffix_)) {
        out.append(t.substr(0, at));
        if (!last) out.push_back(' ');
        t.remove_prefix(at + suffix_.size());
      }
      out.append(t);
      tokens[i] = std::move(out);
    }
  }
  bool holds_back(const HoldQuery& q) const override {
    return !suffix_.empty() && !q.window.empty() &&
           q.window.back().find(suffix_) != std::string::npos;
  }

 private:
  std::string suffix_;
};

size_t non_negative(int64_t v, const std::string& where, std::string_view key) {
  if (v < 0) fail("{}.{}: expected a count >= 0, found {}", where, key, v);
  return static_cast<size_t>(v);
}

}  // namespace

std::unique_ptr<Decoder> make_decoder(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = json_type(spec, where);
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(spec, "decoders", where);
    if (!list.is_array()) fail("{}.decoders: expected an array", where);
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto d = make_decoder(list[i], fmt::format("{}.decoders[{}]", where, i));
      if (d) steps.push_back(std::move(d));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    return std::make_unique<StripDecoder>(
        json_char(spec, "content", where),
        non_negative(json_int(spec, "start", 0, where), where, "start"),
        non_negative(json_int(spec, "stop", 0, where), where, "stop"));
  }
  if (type == "Replace") {
    return std::make_unique<ReplaceDecoder>(PatternReplacer(
        json_member(spec, "pattern", where), json_string(spec, "content", where), where));
  }
  if (type == "Metaspace") {
    bool drop_first = json_bool(spec, "add_prefix_space", true, where);
    if (spec.contains("prepend_scheme") && spec["prepend_scheme"].is_string())
      drop_first = drop_first && spec["prepend_scheme"].get<std::string>() != "never";
    return std::make_unique<MetaspaceDecoder>(json_char(spec, "replacement", where), drop_first);
  }
  if (type == "BPEDecoder") {
    std::string suffix = "</w>";
    if (spec.contains("suffix")) suffix = json_string(spec, "suffix", where);
    return std::make_unique<BpeSuffixDecoder>(std::move(suffix));
  }
  fail(
      "{}: decoder type '{}' is not supported (supported: Sequence, ByteLevel, ByteFallback, "
      "Fuse, Strip, Replace, Metaspace, BPEDecoder)",
      where, type);
}

std::string decode_token_strings(const Decoder* decoder, std::vector<std::string> tokens,
                                 const DecodePosition& pos) {
  std::string out;
  if (!decoder) {
    // HF joins with " " when there is no decoder; a continuation needs the separating space.
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || !pos.at_start) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  bool fused = false;
  decoder->decode_chain(tokens, fused, pos);
  for (const std::string& t : tokens)
    out += t;
  return out;
}

}  // namespace strata::text
