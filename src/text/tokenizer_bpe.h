// The BPE model of tokenizer.json: vocabulary, ranked merges, and HF's way of turning one
// pre-tokenized word into ids (unk_token with fuse_unk, byte_fallback to <0xXX> tokens,
// continuing_subword_prefix / end_of_word_suffix, ignore_merges). Merges are applied by rank
// with a priority queue over adjacent pairs and a linked list of symbols: O(n log n) per word.
// Results are cached per word, so a word seen before costs one hash lookup.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::text {

// Ids may leave gaps, but no id may be this far beyond the number of tokens its file declares
// (vocabulary entries, or vocabulary plus added tokens): id tables stay proportional to the file.
inline constexpr int64_t kTokenIdGapLimit = 65536;

// unordered_map keyed by std::string that can be queried with a std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object (type BPE). `where` names it for errors.
  BpeModel(const nlohmann::json& model, const std::string& where);
  ~BpeModel();

  // Appends the ids of one word (a pre-tokenized piece) to `out`.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // nullptr when no vocabulary entry has this id.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  size_t merge_count() const { return merges_.size(); }
  size_t size() const { return vocab_.size(); }  // vocabulary entries

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void apply_merges(std::vector<int32_t>& symbols) const;

  StringIdMap vocab_;
  std::vector<const std::string*> id_to_token_;  // points into vocab_ keys
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<std::string> unk_token_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_token_ids_{};  // id of "<0xXX>" per byte, -1 when absent

  // Word cache. HF caches up to 10,000 words shorter than 256 bytes; so do we.
  static constexpr size_t kCacheCapacity = 10000;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace strata::text
