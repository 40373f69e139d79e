#include "text/tokenizer_bpe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <queue>
#include <utility>

#include "core/check.h"
#include "io/json_strict.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

std::optional<std::string> optional_string(const nlohmann::json& j, std::string_view key,
                                           const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) fail("{}.{}: expected a string or null, found {}", where, key, it->dump());
  return it->get<std::string>();
}

// One merge rule as its two parts: ["a", "b"] or the older "a b" spelling.
std::pair<std::string, std::string> parse_merge(const nlohmann::json& m, const std::string& where) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return {s.substr(0, space), s.substr(space + 1)};
  }
  fail("{}: expected \"a b\" or [\"a\", \"b\"], found {}", where, m.dump());
}

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& where) {
  const std::string type = model.contains("type") ? json_type(model, where) : "BPE";
  if (type != "BPE") {
    fail(
        "{}: model type '{}' is not supported (only BPE: WordPiece, Unigram and WordLevel "
        "tokenizers are not)",
        where, type);
  }
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      (!dropout->is_number() || dropout->get<double>() != 0.0))
    fail("{}.dropout: BPE dropout is a training-time option; inference needs null or 0", where);

  const nlohmann::json& vocab = json_member(model, "vocab", where);
  if (!vocab.is_object()) fail("{}.vocab: expected an object of token -> id", where);
  int32_t max_id = -1;
  vocab_.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      fail("{}.vocab[{}]: expected a non-negative 32-bit id, found {}", where,
           io::quote_name(token), io::quote_name(id.dump()));
    const auto v = static_cast<int32_t>(id.get<int64_t>());
    vocab_.emplace(token, v);
    max_id = std::max(max_id, v);
  }
  // The id table is indexed by id: bound ids by what the file declares, so memory follows the
  // file's size and never one id's value (a vocabulary of 3 tokens with id 10^9 would be 8 GB).
  if (static_cast<int64_t>(max_id) >= static_cast<int64_t>(vocab.size()) + kTokenIdGapLimit)
    fail("{}.vocab: id {} is far beyond the {} tokens it declares (ids must stay below {})", where,
         max_id, vocab.size(), static_cast<int64_t>(vocab.size()) + kTokenIdGapLimit);
  id_to_token_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab_) {
    // Two spellings for one id would make decoding ambiguous; the first one read wins.
    if (!id_to_token_[id]) id_to_token_[id] = &token;
  }

  unk_token_ = optional_string(model, "unk_token", where);
  continuing_subword_prefix_ =
      optional_string(model, "continuing_subword_prefix", where).value_or("");
  end_of_word_suffix_ = optional_string(model, "end_of_word_suffix", where).value_or("");
  fuse_unk_ = json_bool(model, "fuse_unk", false, where);
  byte_fallback_ = json_bool(model, "byte_fallback", false, where);
  ignore_merges_ = json_bool(model, "ignore_merges", false, where);
  for (unsigned b = 0; b < 256; ++b) {
    const auto id = token_to_id(fmt::format("<0x{:02X}>", b));
    byte_token_ids_[b] = id ? *id : -1;
  }

  const nlohmann::json& merges = json_member(model, "merges", where);
  if (!merges.is_array()) fail("{}.merges: expected an array", where);
  merges_.reserve(merges.size());
  const size_t prefix_len = continuing_subword_prefix_.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string at = fmt::format("{}.merges[{}]", where, rank);
    const auto [a, b] = parse_merge(merges[rank], at);
    const auto a_id = token_to_id(a);
    const auto b_id = token_to_id(b);
    if (!a_id) fail("{}: token \"{}\" is not in the vocabulary", at, a);
    if (!b_id) fail("{}: token \"{}\" is not in the vocabulary", at, b);
    // The merged token drops the right part's continuing-subword prefix, as HF builds it.
    const std::string merged =
        a + (b.compare(0, prefix_len, continuing_subword_prefix_) == 0 ? b.substr(prefix_len) : b);
    const auto new_id = token_to_id(merged);
    if (!new_id) fail("{}: merged token \"{}\" is not in the vocabulary", at, merged);
    // A repeated pair keeps its last rank (HF collects the list into a map).
    merges_[pair_key(*a_id, *b_id)] = Merge{static_cast<uint32_t>(rank), *new_id};
  }
}

BpeModel::~BpeModel() = default;

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit()) return nullptr;
  return id_to_token_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    // Llama-3 style: a word that is itself a token is never split.
    if (const auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(ids));
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& symbols) const {
  // Initial symbols: one per character, looked up with the subword prefix / word suffix that
  // apply to it; characters outside the vocabulary become byte tokens or unk (HF order).
  std::optional<int32_t> pending_unk;
  const std::optional<int32_t> unk_id = unk_token_ ? token_to_id(*unk_token_) : std::nullopt;
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    const size_t begin = i;
    i += utf8_lead_length(static_cast<unsigned char>(word[i]));
    piece.clear();
    if (begin != 0) piece += continuing_subword_prefix_;
    piece.append(word.substr(begin, i - begin));
    if (i >= word.size()) piece += end_of_word_suffix_;

    if (const auto id = token_to_id(piece)) {
      if (pending_unk) symbols.push_back(*std::exchange(pending_unk, std::nullopt));
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (char c : piece)
        all_bytes = all_bytes && byte_token_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all_bytes) {
        // HF does not flush a pending unk here: it lands after these byte tokens.
        for (char c : piece)
          symbols.push_back(byte_token_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_token_) {
      if (!unk_id)
        fail("tokenizer.json: model.unk_token \"{}\" is not in the vocabulary", *unk_token_);
      if (pending_unk && !fuse_unk_) symbols.push_back(*pending_unk);
      pending_unk = *unk_id;  // fused: consecutive unknown characters stay one unk
    }
    // Without an unk token an unknown character is dropped, as in HF.
  }
  if (pending_unk) symbols.push_back(*pending_unk);
  apply_merges(symbols);
}

void BpeModel::apply_merges(std::vector<int32_t>& ids) const {
  const auto n = static_cast<int32_t>(ids.size());
  if (n < 2) return;
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;  // -1 at the ends
    bool alive;
  };
  std::vector<Symbol> sym(n);
  for (int32_t i = 0; i < n; ++i)
    sym[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  struct Candidate {
    uint32_t rank;
    int32_t pos;  // left symbol of the pair
    int32_t new_id;
    // priority_queue pops the largest: invert so the lowest rank, then leftmost, comes first.
    bool operator<(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> queue;
  auto push_pair = [&](int32_t left) {
    const int32_t right = sym[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges_.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    push_pair(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // Entries go stale when a neighbour merged since they were queued: re-check the pair.
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0 && i < n; i = sym[i].next)
    ids.push_back(sym[i].id);
}

}  // namespace strata::text
