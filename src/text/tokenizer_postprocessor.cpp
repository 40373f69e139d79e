#include "text/tokenizer_postprocessor.h"

#include <nlohmann/json.hpp>

#include "text/tokenizer_json.h"

namespace strata::text {
namespace {

// One piece of a template: a run of special-token ids, or the sequence itself (empty ids).
struct TemplatePiece {
  bool is_sequence = false;
  std::vector<int32_t> ids;
};

class TemplateProcessor final : public PostProcessor {
 public:
  explicit TemplateProcessor(std::vector<TemplatePiece> single) : single_(std::move(single)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;  // special pieces are dropped, the sequence stays as is
    std::vector<int32_t> out;
    out.reserve(ids.size() + 8);
    for (const TemplatePiece& p : single_) {
      if (p.is_sequence) {
        out.insert(out.end(), ids.begin(), ids.end());
      } else {
        out.insert(out.end(), p.ids.begin(), p.ids.end());
      }
    }
    ids = std::move(out);
  }

 private:
  std::vector<TemplatePiece> single_;
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& s : steps_)
      s->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

// ByteLevel as a post-processor only trims offsets; ids are untouched.
class NoIdChange final : public PostProcessor {
 public:
  void process(std::vector<int32_t>&, bool) const override {}
};

int32_t checked_id(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    fail("{}: expected a non-negative 32-bit token id, found {}", where, v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

std::unique_ptr<PostProcessor> make_template(const nlohmann::json& spec, const std::string& where) {
  const nlohmann::json& single = json_member(spec, "single", where);
  if (!single.is_array()) fail("{}.single: expected an array of template pieces", where);
  const nlohmann::json& specials =
      spec.contains("special_tokens") ? spec["special_tokens"] : nlohmann::json::object();
  std::vector<TemplatePiece> pieces;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string at = fmt::format("{}.single[{}]", where, i);
    const nlohmann::json& piece = single[i];
    if (piece.is_object() && piece.contains("Sequence")) {
      pieces.push_back({true, {}});
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      const std::string name = json_string(piece["SpecialToken"], "id", at + ".SpecialToken");
      const std::string sat = fmt::format("{}.special_tokens[\"{}\"]", where, name);
      if (!specials.is_object() || !specials.contains(name))
        fail("{}: special token \"{}\" is not defined in {}.special_tokens", at, name, where);
      const nlohmann::json& ids = json_member(specials[name], "ids", sat);
      if (!ids.is_array()) fail("{}.ids: expected an array of ids", sat);
      TemplatePiece p;
      for (size_t k = 0; k < ids.size(); ++k)
        p.ids.push_back(checked_id(ids[k], fmt::format("{}.ids[{}]", sat, k)));
      pieces.push_back(std::move(p));
    } else {
      fail("{}: expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}, found {}", at,
           piece.dump());
    }
  }
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

// Bert / Roberta: "cls" and "sep" are [token, id] pairs; a single sequence is cls ids sep.
std::unique_ptr<PostProcessor> make_cls_sep(const nlohmann::json& spec, const std::string& where) {
  auto id_of = [&](std::string_view key) {
    const nlohmann::json& pair = json_member(spec, key, where);
    if (!pair.is_array() || pair.size() != 2) fail("{}.{}: expected [token, id]", where, key);
    return checked_id(pair[1], fmt::format("{}.{}[1]", where, key));
  };
  std::vector<TemplatePiece> pieces{{false, {id_of("cls")}}, {true, {}}, {false, {id_of("sep")}}};
  return std::make_unique<TemplateProcessor>(std::move(pieces));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const nlohmann::json& spec,
                                                   const std::string& where) {
  if (spec.is_null()) return nullptr;
  const std::string type = json_type(spec, where);
  if (type == "TemplateProcessing") return make_template(spec, where);
  if (type == "ByteLevel") return std::make_unique<NoIdChange>();
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(spec, where);
  if (type == "Sequence") {
    const nlohmann::json& list = json_member(spec, "processors", where);
    if (!list.is_array()) fail("{}.processors: expected an array", where);
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = make_post_processor(list[i], fmt::format("{}.processors[{}]", where, i));
      if (p) steps.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  fail(
      "{}: post-processor type '{}' is not supported (supported: TemplateProcessing, ByteLevel, "
      "BertProcessing, RobertaProcessing, Sequence)",
      where, type);
}

}  // namespace strata::text
