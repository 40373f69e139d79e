// The incremental detokenizer against the full decode: random id streams (biased toward byte
// tokens so characters split across tokens and broken sequences are frequent) through every
// hand-made tokenizer, with and without skip_special_tokens. Every chunk must be valid UTF-8
// and the chunks must concatenate to decode(ids).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "text/detokenizer.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

Tokenizer load(const std::string& name) {
  return Tokenizer::from_dir(std::string(STRATA_SOURCE_DIR) +
                             "/tests/fixtures/tokenizers_handmade/" + name);
}

struct StreamResult {
  std::string text;
  size_t chunks_checked = 0;
};

StreamResult stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDetokenizer detok(tok, skip);
  StreamResult r;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    EXPECT_TRUE(utf8_is_valid(chunk)) << "chunk is not complete UTF-8";
    r.text += chunk;
    ++r.chunks_checked;
  }
  const std::string rest = detok.finish();
  EXPECT_TRUE(utf8_is_valid(rest));
  r.text += rest;
  return r;
}

// Ids with a bias toward the byte tokens of the tokenizer ([byte_lo, byte_hi)) and its
// specials, plus ids that name no token.
std::vector<int32_t> random_ids(std::mt19937& rng, const Tokenizer& tok, int32_t byte_lo,
                                int32_t byte_hi, size_t len) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < len; ++i) {
    const unsigned r = rng() % 10;
    if (r < 5) {
      ids.push_back(byte_lo + static_cast<int32_t>(rng() % (byte_hi - byte_lo)));
    } else if (r < 9) {
      ids.push_back(static_cast<int32_t>(rng() % tok.vocab_size()));
    } else {
      ids.push_back(tok.vocab_size() + static_cast<int32_t>(rng() % 5));  // unknown: skipped
    }
  }
  return ids;
}

struct Subject {
  const char* name;
  int32_t byte_lo, byte_hi;  // where the byte tokens sit
};

TEST(Detokenizer, RandomStreamsEqualFullDecode) {
  const Subject subjects[] = {{"gpt2_mini", 0, 256},      {"nemotron_mini", 14, 270},
                              {"llama_fallback", 3, 243}, {"added_flags", 0, 256},
                              {"metaspace_first", 0, 6},  {"word_suffix", 0, 13},
                              {"subword_prefix", 0, 11}};
  std::mt19937 rng(20240611);
  size_t streams = 0, chunks = 0;
  for (const Subject& s : subjects) {
    const Tokenizer tok = load(s.name);
    for (int trial = 0; trial < 300; ++trial) {
      const auto ids = random_ids(rng, tok, s.byte_lo, s.byte_hi, 1 + rng() % 24);
      for (bool skip : {false, true}) {
        const StreamResult r = stream(tok, ids, skip);
        ASSERT_EQ(r.text, tok.decode(ids, skip))
            << s.name << " trial " << trial << " skip " << skip;
        chunks += r.chunks_checked;
        ++streams;
      }
    }
  }
  EXPECT_EQ(streams, 7u * 300u * 2u);
  EXPECT_GT(chunks, streams * 5);
}

TEST(Detokenizer, SplitCharacterComesOutWhole) {
  // nemotron_mini: byte b is 14 + b. 😀 = F0 9F 98 80 arrives one byte token at a time.
  const Tokenizer tok = load("nemotron_mini");
  IncrementalDetokenizer d(tok, false);
  EXPECT_EQ(d.push(14 + 'a'), "a");
  EXPECT_EQ(d.push(14 + 0xF0), "");
  EXPECT_EQ(d.push(14 + 0x9F), "");
  EXPECT_EQ(d.push(14 + 0x98), "");
  EXPECT_EQ(d.push(14 + 0x80), "\xF0\x9F\x98\x80");
  EXPECT_EQ(d.pending(), 0u);
  // A broken sequence is final as soon as the next byte shows it cannot complete.
  EXPECT_EQ(d.push(14 + 0xE4), "");
  EXPECT_EQ(d.push(14 + 'z'), "\xEF\xBF\xBDz");
  // At the end of the stream an incomplete character is shown as U+FFFD, like decode does.
  EXPECT_EQ(d.push(14 + 0xE4), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
}

TEST(Detokenizer, ByteFallbackRunWaitsForItsEnd) {
  // llama_fallback: <0xbb> = 3 + b. A run of byte tokens is decoded as one group (an invalid
  // group is one U+FFFD per byte), so it is held until a non-byte token ends it.
  const Tokenizer tok = load("llama_fallback");
  IncrementalDetokenizer d(tok, true);
  EXPECT_EQ(d.push(1), "");         // <s>, skipped
  EXPECT_EQ(d.push(250), "hi");     // "▁hi": the leading space is stripped at the start
  EXPECT_EQ(d.push(243), " ");      // "▁"
  EXPECT_EQ(d.push(3 + 0xC3), "");  // half of é
  EXPECT_EQ(d.push(3 + 0xA9), "");  // é complete, but the run may go on
  EXPECT_EQ(d.push(250), "\xC3\xA9 hi");
  EXPECT_EQ(d.finish(), "");
}

TEST(Detokenizer, MetaspaceFirstTokenAndSkippedSpecials) {
  const Tokenizer tok = load("metaspace_first");
  // <s>=1 is skipped; the first real token "▁a" (6) loses its ▁, "▁b" (7) keeps it as a space.
  IncrementalDetokenizer d(tok, true);
  std::string out;
  for (int32_t id : {1, 6, 7, 1, 2})
    out += d.push(id);
  out += d.finish();
  EXPECT_EQ(out, tok.decode(std::vector<int32_t>{1, 6, 7, 1, 2}, true));
  EXPECT_EQ(out, "a b ");
}

}  // namespace
}  // namespace strata::text
