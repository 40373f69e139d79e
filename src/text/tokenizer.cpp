#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/check.h"
#include "core/log.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "text/tokenizer_added.h"
#include "text/tokenizer_bpe.h"
#include "text/tokenizer_json.h"
#include "text/tokenizer_normalizer.h"
#include "text/tokenizer_postprocessor.h"
#include "text/tokenizer_pretokenizer.h"
#include "text/unicode.h"

namespace strata::text {

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<AddedVocabulary> added;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::vector<bool> special;  // by id
  int32_t id_limit = 0;
  std::optional<std::string> bos, eos, pad;
};

namespace {

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  return io::parse_json_strict(text, source, io::kFileJsonMaxDepth);
}

std::vector<AddedToken> read_added_tokens(const nlohmann::json& root, const BpeModel& model,
                                          const std::string& source) {
  std::vector<AddedToken> out;
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return out;
  if (!it->is_array()) fail("{}: added_tokens: expected an array", source);
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string where = fmt::format("{}: added_tokens[{}]", source, i);
    const nlohmann::json& t = (*it)[i];
    AddedToken a;
    a.content = json_string(t, "content", where);
    const int64_t id = json_int(t, "id", -1, where);
    if (id < 0 || id > INT32_MAX) fail("{}.id: expected a non-negative 32-bit id", where);
    a.id = static_cast<int32_t>(id);
    a.single_word = json_bool(t, "single_word", false, where);
    a.lstrip = json_bool(t, "lstrip", false, where);
    a.rstrip = json_bool(t, "rstrip", false, where);
    a.normalized = json_bool(t, "normalized", !json_bool(t, "special", false, where), where);
    a.special = json_bool(t, "special", false, where);
    // HF keeps the model's id for a token the vocabulary already has, and gives the id in the
    // file to one it does not; an id that the model uses for another string is contradictory.
    if (const auto model_id = model.token_to_id(a.content)) {
      if (*model_id != a.id)
        log::warn("{}: \"{}\" has id {} in the vocabulary; using that id", where, a.content,
                  *model_id);
      a.id = *model_id;
    } else if (const std::string* other = model.id_to_token(a.id)) {
      fail("{}: id {} of \"{}\" is already the vocabulary token \"{}\"", where, a.id, a.content,
           *other);
    }
    out.push_back(std::move(a));
  }
  // As for the vocabulary (tokenizer_bpe.h): an added token's id is bounded by the number of
  // tokens the file declares, so tables indexed by id stay sized by the file, not by one id.
  const int64_t declared = static_cast<int64_t>(model.size() + out.size());
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].id >= declared + kTokenIdGapLimit)
      fail(
          "{}: added_tokens[{}].id {} is far beyond the {} tokens the file declares (ids must "
          "stay below {})",
          source, i, out[i].id, declared, declared + kTokenIdGapLimit);
  return out;
}

// tokenizer_config.json spells special tokens as a string or as {"content": ...}.
std::optional<std::string> config_token(const nlohmann::json& cfg, std::string_view key,
                                        const std::string& source) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return json_string(*it, "content", fmt::format("{}: {}", source, key));
  fail("{}: {}: expected a string, an object with \"content\", or null", source, key);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_json_text(std::string_view json_text, const std::string& source) {
  const nlohmann::json root = parse_json(json_text, source);
  if (!root.is_object()) fail("{}: expected a JSON object at the top level", source);
  auto impl = std::make_unique<Impl>();
  for (const char* key : {"truncation", "padding"}) {
    if (root.contains(key) && !root[key].is_null())
      log::warn("{}: \"{}\" is set; strata ignores it (encode never truncates or pads)", source,
                key);
  }
  const auto field = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null_json;
    return root.contains(key) ? root[key] : null_json;
  };
  impl->normalizer = make_normalizer(field("normalizer"), source + ": normalizer");
  impl->pre_tokenizer = make_pre_tokenizer(field("pre_tokenizer"), source + ": pre_tokenizer");
  impl->model = std::make_unique<BpeModel>(json_member(root, "model", source), source + ": model");
  impl->added = std::make_unique<AddedVocabulary>(read_added_tokens(root, *impl->model, source),
                                                  impl->normalizer.get());
  impl->post_processor = make_post_processor(field("post_processor"), source + ": post_processor");
  impl->decoder = make_decoder(field("decoder"), source + ": decoder");

  impl->id_limit = impl->model->id_limit();
  for (const AddedToken& t : impl->added->tokens())
    impl->id_limit = std::max(impl->id_limit, t.id + 1);
  impl->special.assign(static_cast<size_t>(impl->id_limit), false);
  for (const AddedToken& t : impl->added->tokens())
    if (t.special) impl->special[t.id] = true;
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::filesystem::path& tokenizer_json) {
  const std::string path = tokenizer_json.string();
  return from_json_text(io::read_text_file(path, "tokenizer", io::kTokenizerMaxBytes), path);
}

Tokenizer Tokenizer::from_dir(const std::filesystem::path& model_dir) {
  const auto json_path = model_dir / "tokenizer.json";
  if (!std::filesystem::exists(json_path))
    fail("{}: no tokenizer.json in this directory (strata reads HF fast tokenizers only)",
         model_dir.string());
  Tokenizer tok = from_file(json_path);
  const auto cfg_path = model_dir / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    const std::string source = cfg_path.string();
    const nlohmann::json cfg =
        io::parse_json_file(source, "tokenizer config", io::kTemplateMaxBytes);
    if (!cfg.is_object()) fail("{}: expected a JSON object at the top level", source);
    tok.set_special_names(config_token(cfg, "bos_token", source),
                          config_token(cfg, "eos_token", source),
                          config_token(cfg, "pad_token", source));
  }
  return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  const Impl& m = *impl_;
  std::string replaced;
  if (!utf8_is_valid(input)) {
    replaced = utf8_replace_invalid(input);
    input = replaced;
  }
  std::vector<int32_t> ids;
  ids.reserve(input.size() / 3 + 4);
  std::vector<PreToken> words;
  for (const AddedSplit& raw : m.added->split(input, /*normalized=*/false)) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    if (raw.begin == raw.end) continue;  // HF drops empty pieces before normalizing
    std::string piece(input.substr(raw.begin, raw.end - raw.begin));
    if (m.normalizer) m.normalizer->normalize(piece);
    for (const AddedSplit& norm : m.added->split(piece, /*normalized=*/true)) {
      if (norm.id >= 0) {
        ids.push_back(norm.id);
        continue;
      }
      if (norm.begin == norm.end) continue;
      words.assign(1, PreToken{piece.substr(norm.begin, norm.end - norm.begin),
                               raw.begin == 0 && norm.begin == 0});
      if (m.pre_tokenizer) m.pre_tokenizer->pre_tokenize(words);
      for (const PreToken& w : words)
        m.model->tokenize(w.text, ids);
    }
  }
  if (m.post_processor) m.post_processor->process(ids, add_special_tokens);
  return ids;
}

const std::string* Tokenizer::token_string(int32_t id) const {
  if (const AddedToken* t = impl_->added->find(id)) return &t->content;
  return impl_->model->id_to_token(id);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* s = token_string(id);
    if (!s || (skip_special_tokens && is_special(id))) continue;
    tokens.push_back(*s);
  }
  return decode_token_strings(impl_->decoder.get(), std::move(tokens), DecodePosition{});
}

std::string Tokenizer::decode_strings(std::vector<std::string> tokens,
                                      const DecodePosition& pos) const {
  return decode_token_strings(impl_->decoder.get(), std::move(tokens), pos);
}

bool Tokenizer::decode_holds_back(const HoldQuery& query) const {
  return impl_->decoder && impl_->decoder->holds_back(query);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added->token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const std::string* s = token_string(id);
  if (!s) return std::nullopt;
  return *s;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->id_limit && impl_->special[id];
}

int32_t Tokenizer::vocab_size() const {
  return impl_->id_limit;
}

const std::optional<std::string>& Tokenizer::bos_token() const {
  return impl_->bos;
}
const std::optional<std::string>& Tokenizer::eos_token() const {
  return impl_->eos;
}
const std::optional<std::string>& Tokenizer::pad_token() const {
  return impl_->pad;
}

std::optional<int32_t> Tokenizer::bos_token_id() const {
  return impl_->bos ? token_to_id(*impl_->bos) : std::nullopt;
}
std::optional<int32_t> Tokenizer::eos_token_id() const {
  return impl_->eos ? token_to_id(*impl_->eos) : std::nullopt;
}
std::optional<int32_t> Tokenizer::pad_token_id() const {
  return impl_->pad ? token_to_id(*impl_->pad) : std::nullopt;
}

void Tokenizer::set_special_names(std::optional<std::string> bos, std::optional<std::string> eos,
                                  std::optional<std::string> pad) {
  impl_->bos = std::move(bos);
  impl_->eos = std::move(eos);
  impl_->pad = std::move(pad);
}

}  // namespace strata::text
