// The output processor against an independent reference: the full decode of the ids so far
// (tokenizer.decode), searched for stop strings with std::string::find. Streams run through the
// hand-made gpt2_mini tokenizer (byte b is token b, so every multi-byte stop string and
// character is split across tokens) and the demo model's tokenizer.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/check.h"
#include "engine/output_processor.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace strata::engine {
namespace {

text::Tokenizer handmade() {
  return text::Tokenizer::from_dir(std::string(STRATA_SOURCE_DIR) +
                                   "/tests/fixtures/tokenizers_handmade/gpt2_mini");
}
text::Tokenizer demo() {
  return text::Tokenizer::from_dir(std::string(STRATA_SOURCE_DIR) + "/models/demo");
}

// What one completion streamed: the deltas' texts, one per token, and how it ended.
struct Streamed {
  std::vector<std::string> chunks;  // delta text after each token
  std::string text;
  std::vector<int32_t> ids;
  FinishReason finish = FinishReason::None;
  std::string stop_reason;
  std::optional<int32_t> stop_token_id;
  size_t tokens_fed = 0;
};

Streamed feed(OutputProcessor& op, const std::string& rid, int32_t index,
              const std::vector<int32_t>& ids, int64_t already_generated = 0) {
  Streamed r;
  for (int32_t id : ids) {
    CompletionDelta d;
    const FinishReason f = op.on_token(rid, index, id, nullptr, &d);
    EXPECT_EQ(d.finish, f);
    EXPECT_TRUE(text::utf8_is_valid(d.text)) << "delta text is not complete UTF-8";
    r.chunks.push_back(d.text);
    r.text += d.text;
    r.ids.insert(r.ids.end(), d.token_ids.begin(), d.token_ids.end());
    ++r.tokens_fed;
    EXPECT_EQ(d.num_generated, already_generated + static_cast<int64_t>(r.tokens_fed));
    if (f != FinishReason::None) {
      r.finish = f;
      r.stop_reason = d.stop_reason;
      r.stop_token_id = d.stop_token_id;
      break;
    }
  }
  return r;
}

EngineRequest request(const std::string& id, SamplingParams p) {
  EngineRequest r;
  r.id = id;
  r.prompt = {1};
  r.params = std::move(p);
  return r;
}

// The reference for stop strings: the first k whose decode(ids[:k]) contains a stop string
// (searching only after min_tokens tokens, and only for matches that end in the text the k-th
// token added), and the text cut before the earliest such match.
struct Expected {
  size_t finish_at = 0;  // tokens consumed; 0 = no stop string matched
  std::string text;
  std::string stop;
};

Expected reference(const text::Tokenizer& tok, const std::vector<int32_t>& ids,
                   const std::vector<std::string>& stops, bool include, int64_t min_tokens) {
  size_t prev_final = 0;  // bytes of the previous decode that are final (shared with this one)
  for (size_t k = 1; k <= ids.size(); ++k) {
    const std::string full = tok.decode(std::span(ids.data(), k), /*skip=*/true);
    const std::string prev = k > 1 ? tok.decode(std::span(ids.data(), k - 1), true) : "";
    prev_final = 0;
    while (prev_final < prev.size() && prev_final < full.size() &&
           prev[prev_final] == full[prev_final])
      ++prev_final;
    if (static_cast<int64_t>(k) > min_tokens) {
      size_t best = std::string::npos;
      std::string best_stop;
      for (const std::string& s : stops) {
        // Matches that end past what the previous token had already made final.
        size_t pos = full.find(s);
        while (pos != std::string::npos && pos + s.size() <= prev_final)
          pos = full.find(s, pos + 1);
        if (pos != std::string::npos && pos < best) {
          best = pos;
          best_stop = s;
        }
      }
      if (best != std::string::npos)
        return {k, full.substr(0, include ? best + best_stop.size() : best), best_stop};
    }
  }
  return {0, tok.decode(ids, true), ""};
}

TEST(OutputProcessor, StopStringSplitAcrossTokensIsHeldThenCut) {
  const text::Tokenizer tok = handmade();
  const std::string body = "one two STOP three";
  const std::vector<int32_t> ids = tok.encode(body, false);
  // The stop string must span several tokens for this test to mean anything.
  ASSERT_GE(ids.size(), 10u);
  ASSERT_EQ(tok.decode(std::vector<int32_t>{ids[8]}), "S") << "gpt2_mini should split STOP";

  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"STOP"};
  OutputProcessor op(&tok, {});
  op.add(request("r", p));
  const Streamed r = feed(op, "r", 0, ids);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.stop_reason, "STOP");
  EXPECT_FALSE(r.stop_token_id.has_value());
  EXPECT_EQ(r.text, "one two ");
  const Expected e = reference(tok, ids, p.stop, false, 0);
  EXPECT_EQ(r.tokens_fed, e.finish_at);
  EXPECT_EQ(r.text, e.text);
  // "S", "T", "O" were held back (possible start of STOP): nothing after "one two " leaked.
  ASSERT_EQ(r.chunks.size(), 12u);
  for (size_t k = 8; k < 12; ++k)
    EXPECT_EQ(r.chunks[k], "") << "token " << k;
  EXPECT_EQ(r.ids, std::vector<int32_t>(ids.begin(), ids.begin() + 12));
}

TEST(OutputProcessor, PartialMatchIsReleasedWhenItTurnsOutNotToBeAStop) {
  const text::Tokenizer tok = handmade();
  const std::vector<int32_t> ids = tok.encode("xy STORM q", false);
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"STOP"};
  OutputProcessor op(&tok, {});
  op.add(request("r", p));
  const Streamed r = feed(op, "r", 0, ids);
  EXPECT_EQ(r.finish, FinishReason::None);
  EXPECT_EQ(r.tokens_fed, ids.size());
  // "S" "T" "O" held while they could still start STOP, then released with the "R".
  std::vector<std::string> want = {"x", "y", " ", "", "", "", "STOR", "M", " ", "q"};
  EXPECT_EQ(r.chunks, want);
  // Nothing ended it: finishing from outside flushes nothing more (no held text left).
  CompletionDelta d;
  op.finish("r", 0, FinishReason::Abort, &d);
  EXPECT_EQ(d.text, "");
  EXPECT_EQ(d.finish, FinishReason::Abort);
}

TEST(OutputProcessor, HeldTextIsFlushedOnLengthAndAbort) {
  const text::Tokenizer tok = handmade();
  const std::vector<int32_t> ids = tok.encode("go ST", false);
  SamplingParams p;
  p.stop = {"STOP"};
  p.max_tokens = static_cast<int64_t>(ids.size());
  {
    OutputProcessor op(&tok, {});
    op.add(request("r", p));
    const Streamed r = feed(op, "r", 0, ids);
    EXPECT_EQ(r.finish, FinishReason::Length);
    EXPECT_EQ(r.text, "go ST");  // held "ST" released at the end
    EXPECT_EQ(r.chunks.back(), "ST");
  }
  {
    p.max_tokens = 100;
    OutputProcessor op(&tok, {});
    op.add(request("r", p));
    const Streamed r = feed(op, "r", 0, ids);
    EXPECT_EQ(r.finish, FinishReason::None);
    EXPECT_EQ(r.text, "go ");
    CompletionDelta d;
    op.finish("r", 0, FinishReason::Abort, &d);
    EXPECT_EQ(d.text, "ST");
    EXPECT_EQ(d.finish, FinishReason::Abort);
  }
}

TEST(OutputProcessor, IncludeStopStrInOutput) {
  const text::Tokenizer tok = handmade();
  const std::vector<int32_t> ids = tok.encode("say END now", false);
  SamplingParams p;
  p.max_tokens = 100;
  p.stop = {"END"};
  p.include_stop_str_in_output = true;
  OutputProcessor op(&tok, {});
  op.add(request("r", p));
  const Streamed r = feed(op, "r", 0, ids);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.stop_reason, "END");
  EXPECT_EQ(r.text, "say END");
  // Nothing is held back when the stop string goes out anyway.
  EXPECT_EQ(r.chunks[4], "E");
}

TEST(OutputProcessor, MultiByteCharactersSplitAcrossTokens) {
  const text::Tokenizer tok = handmade();
  // é (2 bytes), ☃ (3 bytes), 🙂 (4 bytes): one token per byte in gpt2_mini.
  const std::string body = "caf\xC3\xA9 \xE2\x98\x83 \xF0\x9F\x99\x82 end";
  const std::vector<int32_t> ids = tok.encode(body, false);
  ASSERT_EQ(ids.size(), body.size());
  for (const std::string stop : {"\xE2\x98\x83", "\xF0\x9F\x99\x82 e", "\xC3\xA9"}) {
    SamplingParams p;
    p.max_tokens = 100;
    p.stop = {stop};
    OutputProcessor op(&tok, {});
    op.add(request("r", p));
    const Streamed r = feed(op, "r", 0, ids);
    const Expected e = reference(tok, ids, p.stop, false, 0);
    ASSERT_NE(e.finish_at, 0u);
    EXPECT_EQ(r.finish, FinishReason::Stop);
    EXPECT_EQ(r.tokens_fed, e.finish_at);
    EXPECT_EQ(r.text, e.text);
  }
  // Without stop strings the chunks concatenate to the whole decode, each complete UTF-8.
  SamplingParams p;
  p.max_tokens = 100;
  OutputProcessor op(&tok, {});
  op.add(request("r", p));
  const Streamed r = feed(op, "r", 0, ids);
  EXPECT_EQ(r.text, body);
  EXPECT_EQ(r.chunks[3], "");  // the first byte of é waits for the second
  EXPECT_EQ(r.chunks[4], "\xC3\xA9");
}

// Random texts from the demo tokenizer, stop strings cut from the text itself (so they match,
// often across token boundaries) plus ones that never match: the processor's text and finish
// point equal the reference's, and the stream never shows text past the eventual cut.
TEST(OutputProcessor, RandomStopStringsMatchTheFullDecodeReference) {
  const text::Tokenizer tok = demo();
  const std::vector<std::string> words = {
      "the",  " fortune", " cookie", ",",       " d\xC3\xA9j\xC3\xA0", " vu",
      "\n\t", " --",      " Steven", " Wright", " \xE2\x82\xAC",       "42",
      " x",   "y",        "z",       "!"};
  std::mt19937 rng(7);
  size_t checked = 0, stopped = 0, multi_token_stops = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string body;
    const int n_words = 3 + static_cast<int>(rng() % 12);
    for (int w = 0; w < n_words; ++w)
      body += words[rng() % words.size()];
    const std::vector<int32_t> ids = tok.encode(body, false);
    const std::string final_text = tok.decode(ids, true);
    std::vector<std::string> stops;
    const int n_stops = 1 + static_cast<int>(rng() % 3);
    for (int s = 0; s < n_stops; ++s) {
      if (rng() % 4 == 0) {
        stops.push_back("#never#");
        continue;
      }
      // A substring of the text on code point boundaries.
      size_t a = rng() % final_text.size(), len = 1 + rng() % 6;
      while (a > 0 && (static_cast<unsigned char>(final_text[a]) & 0xC0) == 0x80)
        --a;
      size_t b = std::min(final_text.size(), a + len);
      while (b < final_text.size() && (static_cast<unsigned char>(final_text[b]) & 0xC0) == 0x80)
        ++b;
      stops.push_back(final_text.substr(a, b - a));
    }
    const bool include = rng() % 3 == 0;
    const int64_t min_tokens = rng() % 4 == 0 ? static_cast<int64_t>(rng() % 4) : 0;
    SamplingParams p;
    p.max_tokens = 1000;
    p.stop = stops;
    p.include_stop_str_in_output = include;
    p.min_tokens = min_tokens;
    OutputProcessor op(&tok, {});
    op.add(request("r", p));
    const Streamed r = feed(op, "r", 0, ids);
    const Expected e = reference(tok, ids, stops, include, min_tokens);
    if (e.finish_at == 0) {
      EXPECT_EQ(r.finish, FinishReason::None) << trial;
      CompletionDelta d;
      op.finish("r", 0, FinishReason::Length, &d);
      EXPECT_EQ(r.text + d.text, final_text) << trial;
    } else {
      ++stopped;
      ASSERT_EQ(r.finish, FinishReason::Stop) << trial << " body " << body;
      EXPECT_EQ(r.tokens_fed, e.finish_at) << trial;
      EXPECT_EQ(r.text, e.text) << trial;
      EXPECT_EQ(r.stop_reason, e.stop) << trial;
      const std::string last = tok.decode(std::vector<int32_t>{ids[e.finish_at - 1]}, true);
      if (last.find(e.stop) == std::string::npos) ++multi_token_stops;
    }
    // Every prefix of the stream is a prefix of the final answer.
    std::string so_far;
    for (const std::string& c : r.chunks) {
      so_far += c;
      ASSERT_EQ(r.text.compare(0, so_far.size(), so_far), 0) << trial;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 400u);
  EXPECT_GT(stopped, 200u);
  EXPECT_GT(multi_token_stops, 30u);  // stop strings that spanned token boundaries
}

TEST(OutputProcessor, EosAndStopTokenIds) {
  const text::Tokenizer tok = demo();
  const std::vector<int32_t> body = tok.encode("Hello world", false);
  const int32_t im_end = *tok.token_to_id("<|im_end|>");
  const int32_t eos = *tok.token_to_id("</s>");
  {  // EOS: finish stop, stop_reason null, the EOS text left out even when specials are kept.
    SamplingParams p;
    p.max_tokens = 100;
    p.skip_special_tokens = false;
    OutputProcessor op(&tok, {eos, im_end});
    op.add(request("r", p));
    std::vector<int32_t> ids = body;
    ids.push_back(im_end);
    ids.push_back(body[0]);
    const Streamed r = feed(op, "r", 0, ids);
    EXPECT_EQ(r.finish, FinishReason::Stop);
    EXPECT_EQ(r.stop_reason, "");
    EXPECT_FALSE(r.stop_token_id.has_value());
    EXPECT_EQ(r.text, "Hello world");
    EXPECT_EQ(r.ids.back(), im_end);  // the stop id is in the token ids
    EXPECT_EQ(r.tokens_fed, body.size() + 1);
  }
  {  // A request stop id: stop_reason is the id; include_stop_str_in_output keeps its text.
    SamplingParams p;
    p.max_tokens = 100;
    p.skip_special_tokens = false;
    p.stop_token_ids = {body[1]};
    p.include_stop_str_in_output = true;
    OutputProcessor op(&tok, {eos});
    op.add(request("r", p));
    const Streamed r = feed(op, "r", 0, body);
    EXPECT_EQ(r.finish, FinishReason::Stop);
    EXPECT_EQ(r.stop_token_id, body[1]);
    EXPECT_EQ(r.stop_reason, std::to_string(body[1]));
    EXPECT_EQ(r.text, tok.decode(std::vector<int32_t>{body[0], body[1]}, false));
  }
  {  // ignore_eos: EOS is just a token; max_tokens ends it with "length".
    SamplingParams p;
    p.max_tokens = 3;
    p.ignore_eos = true;
    OutputProcessor op(&tok, {eos});
    op.add(request("r", p));
    const Streamed r = feed(op, "r", 0, {body[0], eos, body[1], body[0]});
    EXPECT_EQ(r.finish, FinishReason::Length);
    EXPECT_EQ(r.tokens_fed, 3u);
    EXPECT_TRUE(op.masked_stop_ids("r", 0).empty());
  }
}

TEST(OutputProcessor, MinTokensMasksStopsAndDelaysStopStrings) {
  const text::Tokenizer tok = handmade();
  const int32_t eos = 268;  // <|endoftext|>
  SamplingParams p;
  p.max_tokens = 100;
  p.min_tokens = 3;
  p.stop_token_ids = {150, 150};
  p.stop = {"a"};
  OutputProcessor op(&tok, {eos});
  op.add(request("r", p));
  EXPECT_EQ(op.masked_stop_ids("r", 0), (std::vector<int32_t>{150, 268}));
  // An unmasked engine would still not stop here: EOS at token 1, "a" in tokens 1..3.
  Streamed r = feed(op, "r", 0, {eos, 'a', 'a'});
  EXPECT_EQ(r.finish, FinishReason::None);
  EXPECT_TRUE(op.masked_stop_ids("r", 0).empty());  // 3 tokens exist: stops allowed now
  r = feed(op, "r", 0, {'b', 'a'}, 3);
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.stop_reason, "a");
  EXPECT_EQ(r.tokens_fed, 2u);
}

TEST(OutputProcessor, LogprobsPassThroughAndNCompletions) {
  const text::Tokenizer tok = handmade();
  SamplingParams p;
  p.n = 2;
  p.max_tokens = 2;
  p.logprobs = 2;
  OutputProcessor op(&tok, {});
  op.add(request("r", p));
  TokenLogprobs lp;
  lp.token = 'x';
  lp.logprob = -0.25f;
  lp.rank = 1;
  lp.top = {{'x', -0.25f}, {'y', -1.5f}};
  CompletionDelta d0, d1;
  EXPECT_EQ(op.on_token("r", 0, 'x', &lp, &d0), FinishReason::None);
  EXPECT_EQ(op.on_token("r", 1, 'y', nullptr, &d1), FinishReason::None);
  ASSERT_EQ(d0.logprobs.size(), 1u);
  EXPECT_EQ(d0.logprobs[0].top, lp.top);
  EXPECT_EQ(d0.logprobs[0].logprob, -0.25f);
  EXPECT_EQ(d0.index, 0);
  EXPECT_EQ(d1.index, 1);
  EXPECT_EQ(d0.text, "x");
  EXPECT_EQ(d1.text, "y");
  CompletionDelta e0;
  EXPECT_EQ(op.on_token("r", 0, 'z', &lp, &e0), FinishReason::Length);
  EXPECT_EQ(e0.text, "z");
  EXPECT_THROW(op.on_token("r", 0, 'z', &lp, &e0), Error);  // finished
  EXPECT_THROW(op.on_token("r", 2, 'z', &lp, &e0), Error);  // no such completion
  op.remove("r");
  EXPECT_THROW(op.masked_stop_ids("r", 0), Error);
}

TEST(OutputProcessor, WithoutTokenizerIdsOnlyAndStopStringsRefused) {
  SamplingParams p;
  p.max_tokens = 2;
  OutputProcessor op(nullptr, {7});
  op.add(request("r", p));
  const Streamed r = feed(op, "r", 0, {5, 7});
  EXPECT_EQ(r.finish, FinishReason::Stop);
  EXPECT_EQ(r.text, "");
  EXPECT_EQ(r.ids, (std::vector<int32_t>{5, 7}));
  p.stop = {"x"};
  EXPECT_THROW(op.add(request("s", p)), Error);
  p.stop = {};
  EXPECT_THROW(op.add(request("r", p)), Error);  // id in use
  const text::Tokenizer tok = handmade();
  OutputProcessor op2(&tok, {});
  p.stop = {""};
  EXPECT_THROW(op2.add(request("e", p)), Error);
}

}  // namespace
}  // namespace strata::engine
