// One Tokenizer shared by several threads (as the server's HTTP threads share it): encode and
// decode from 4 threads at once must give what one thread gives. The word cache is the only
// shared mutable state; this is the test that would catch a race in it (run under the debug
// preset's sanitizers for the strong version of the check).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "text/tokenizer.h"

namespace strata::text {
namespace {

TEST(TokenizerThreads, ConcurrentEncodeDecodeMatchesSequential) {
  const std::string dir = std::string(STRATA_SOURCE_DIR) + "/tests/fixtures/tokenizers/llama3_8k";
  std::vector<std::string> texts;
  {
    std::ifstream in(dir + "/cases.jsonl");
    std::string line;
    while (texts.size() < 3000 && std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("text")) texts.push_back(j["text"].get<std::string>());
    }
  }
  ASSERT_GE(texts.size(), 1000u);

  // Expected values from a separately loaded tokenizer, so its cache is not the one under test.
  std::vector<std::vector<int32_t>> expect_ids;
  std::vector<std::string> expect_text;
  {
    const Tokenizer ref = Tokenizer::from_dir(dir);
    for (const auto& t : texts) {
      expect_ids.push_back(ref.encode(t, true));
      expect_text.push_back(ref.decode(expect_ids.back(), true));
    }
  }

  const Tokenizer shared = Tokenizer::from_dir(dir);
  std::atomic<size_t> compared{0}, mismatched{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = 0; k < texts.size(); ++k) {
        const size_t i =
            (k * (2 * t + 1) + t * 977) % texts.size();  // a different order per thread
        const auto ids = shared.encode(texts[i], true);
        if (ids != expect_ids[i] || shared.decode(ids, true) != expect_text[i]) ++mismatched;
        ++compared;
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(mismatched.load(), 0u);
  EXPECT_EQ(compared.load(), 4 * texts.size());
}

}  // namespace
}  // namespace strata::text
