#include "engine/output_processor.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/check.h"
#include "text/detokenizer.h"
#include "text/tokenizer.h"

namespace strata::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Abort:
      return "abort";
    case FinishReason::Error:
      return "error";
    case FinishReason::None:
      break;
  }
  return nullptr;
}

namespace {

// Where a stop string starts in `text`, among matches that end after byte `new_from` (text
// before it was checked when it arrived), earliest first; nullopt when none.
struct StopMatch {
  size_t pos = 0;
  size_t stop_index = 0;
};

std::optional<StopMatch> find_stop(const std::string& text, size_t new_from,
                                   const std::vector<std::string>& stops) {
  std::optional<StopMatch> best;
  for (size_t s = 0; s < stops.size(); ++s) {
    const std::string& stop = stops[s];
    // The earliest start whose match still ends past new_from.
    const size_t from = new_from + 1 > stop.size() ? new_from + 1 - stop.size() : 0;
    const size_t pos = text.find(stop, from);
    if (pos == std::string::npos) continue;
    if (!best || pos < best->pos) best = StopMatch{pos, s};
  }
  return best;
}

// The length of the longest suffix of `text` that is a proper prefix of some stop string: the
// part that must wait for the next token before anyone sees it.
size_t held_suffix(std::string_view text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const std::string& stop : stops) {
    const size_t max_len = std::min(text.size(), stop.size() - 1);
    for (size_t len = max_len; len > best; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

struct Completion {
  std::unique_ptr<text::IncrementalDetokenizer> detok;  // null: ids only
  std::string text;     // the final text so far (cut at a matched stop string)
  size_t released = 0;  // bytes of `text` already in deltas; the rest may start a stop string
  int64_t generated = 0;
  bool finished = false;
};

struct RequestState {
  SamplingParams params;
  std::vector<Completion> completions;
};

}  // namespace

struct OutputProcessor::Impl {
  const text::Tokenizer* tokenizer;
  std::vector<int32_t> eos_ids;
  std::unordered_map<std::string, RequestState> requests;

  RequestState& state(const std::string& id) {
    auto it = requests.find(id);
    if (it == requests.end()) fail("output processor: unknown request \"{}\"", id);
    return it->second;
  }
  Completion& completion(RequestState& r, const std::string& id, int32_t index) {
    if (index < 0 || index >= static_cast<int32_t>(r.completions.size()))
      fail("output processor: request \"{}\" has no completion {}", id, index);
    return r.completions[static_cast<size_t>(index)];
  }
  bool is_eos(int32_t id) const {
    return std::find(eos_ids.begin(), eos_ids.end(), id) != eos_ids.end();
  }

  // Adds final text to the completion and moves what is safe into delta->text. Returns the
  // stop string that matched (index into params.stop), if any; the text is then cut there.
  std::optional<size_t> release(Completion& c, const SamplingParams& p, const std::string& piece,
                                bool check_stops, bool flush, CompletionDelta* delta) {
    const size_t new_from = c.text.size();
    c.text += piece;
    if (check_stops && !p.stop.empty() && !piece.empty()) {
      if (auto m = find_stop(c.text, new_from, p.stop)) {
        size_t end = m->pos;
        if (p.include_stop_str_in_output) end += p.stop[m->stop_index].size();
        end = std::max(end, c.released);  // text already shown stays shown
        delta->text.append(c.text, c.released, end - c.released);
        c.text.resize(end);
        c.released = end;
        return m->stop_index;
      }
    }
    size_t keep = 0;
    if (!flush && !p.include_stop_str_in_output && !p.stop.empty())
      keep = held_suffix(std::string_view(c.text).substr(c.released), p.stop);
    const size_t end = c.text.size() - keep;
    delta->text.append(c.text, c.released, end - c.released);
    c.released = end;
    return std::nullopt;
  }

  // End of a completion: everything still held (the detokenizer's window and the possible
  // stop-string start) is final.
  void flush(Completion& c, const SamplingParams& p, CompletionDelta* delta) {
    std::string rest = c.detok ? c.detok->finish() : std::string();
    release(c, p, rest, /*check_stops=*/false, /*flush=*/true, delta);
    c.finished = true;
  }
};

OutputProcessor::OutputProcessor(const text::Tokenizer* tokenizer, std::vector<int32_t> eos_ids)
    : impl_(std::make_unique<Impl>()) {
  impl_->tokenizer = tokenizer;
  impl_->eos_ids = std::move(eos_ids);
}

OutputProcessor::~OutputProcessor() = default;

void OutputProcessor::add(const EngineRequest& request) {
  const SamplingParams& p = request.params;
  if (impl_->requests.count(request.id)) fail("request id \"{}\" is already in use", request.id);
  if (p.n < 1) fail("n must be >= 1, got {}", p.n);
  const bool text_out = p.detokenize && impl_->tokenizer != nullptr;
  if (!p.stop.empty() && !text_out)
    fail("stop strings need the tokenizer (the server runs without one, or detokenize is off)");
  for (const std::string& s : p.stop)
    if (s.empty()) fail("stop strings must not be empty");
  RequestState r;
  r.params = p;
  r.completions.resize(static_cast<size_t>(p.n));
  if (text_out)
    for (Completion& c : r.completions)
      c.detok =
          std::make_unique<text::IncrementalDetokenizer>(*impl_->tokenizer, p.skip_special_tokens);
  impl_->requests.emplace(request.id, std::move(r));
}

FinishReason OutputProcessor::on_token(const std::string& request_id, int32_t index, int32_t id,
                                       const TokenLogprobs* logprobs, CompletionDelta* delta) {
  RequestState& r = impl_->state(request_id);
  Completion& c = impl_->completion(r, request_id, index);
  if (c.finished)
    fail("output processor: request \"{}\" completion {} has finished", request_id, index);
  const SamplingParams& p = r.params;
  delta->index = index;
  delta->token_ids.push_back(id);
  if (logprobs) delta->logprobs.push_back(*logprobs);
  c.generated += 1;
  delta->num_generated = c.generated;

  // Token-level stops, as vLLM's check_stop: none before min_tokens; EOS (stop_reason null),
  // then the request's stop ids (stop_reason = the id).
  FinishReason finish = FinishReason::None;
  if (c.generated >= p.min_tokens) {
    if (!p.ignore_eos && impl_->is_eos(id)) {
      finish = FinishReason::Stop;
    } else if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) !=
               p.stop_token_ids.end()) {
      finish = FinishReason::Stop;
      delta->stop_reason = std::to_string(id);
      delta->stop_token_id = id;
    }
  }

  // Text: a stop token's own text is left out unless include_stop_str_in_output. Stop
  // strings are looked for only after min_tokens tokens (vLLM: more than min_tokens).
  if (c.detok && (finish == FinishReason::None || p.include_stop_str_in_output)) {
    const std::string piece = c.detok->push(id);
    const bool check = finish == FinishReason::None && c.generated > p.min_tokens;
    if (auto s = impl_->release(c, p, piece, check, /*flush=*/false, delta)) {
      finish = FinishReason::Stop;
      delta->stop_reason = p.stop[*s];
      c.finished = true;  // the text after the stop string is dropped with the window
      c.detok->finish();
    }
  }
  if (finish == FinishReason::None && c.generated >= p.max_tokens) finish = FinishReason::Length;
  if (finish != FinishReason::None) {
    if (!c.finished) impl_->flush(c, p, delta);
    c.finished = true;
    delta->finish = finish;
  }
  return finish;
}

void OutputProcessor::finish(const std::string& request_id, int32_t index, FinishReason reason,
                             CompletionDelta* delta) {
  RequestState& r = impl_->state(request_id);
  Completion& c = impl_->completion(r, request_id, index);
  delta->index = index;
  delta->num_generated = c.generated;
  if (c.finished) return;
  impl_->flush(c, r.params, delta);
  delta->finish = reason;
}

void OutputProcessor::remove(const std::string& request_id) {
  impl_->requests.erase(request_id);
}

std::vector<int32_t> OutputProcessor::masked_stop_ids(const std::string& request_id,
                                                      int32_t index) const {
  RequestState& r = impl_->state(request_id);
  const Completion& c = impl_->completion(r, request_id, index);
  // As vLLM's min-tokens processor: stop ids are masked while fewer than min_tokens tokens
  // exist, so the first min_tokens tokens are never stops.
  if (c.generated >= r.params.min_tokens) return {};
  std::vector<int32_t> ids = r.params.stop_token_ids;
  if (!r.params.ignore_eos) ids.insert(ids.end(), impl_->eos_ids.begin(), impl_->eos_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace strata::engine
