// Checkpoint directories: the sharded index layout, a single model.safetensors, and a plain set
// of *.safetensors files; tensors read back bit for bit; broken layouts rejected with messages
// naming the index, tensor and shard.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "core/check.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "test_safetensors_util.h"

namespace strata::io {
namespace {

using test::ScratchDir;
using Named = std::vector<std::pair<std::string, Tensor>>;

Tensor random_f32(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::F32);
  const auto b = test::random_bytes(t.nbytes(), seed);
  std::memcpy(t.raw(), b.data(), b.size());
  return t;
}

void write_text(const std::string& path, const std::string& text) {
  test::write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
}

std::string index_json(const std::vector<std::pair<std::string, std::string>>& map) {
  std::string s = "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {";
  for (size_t i = 0; i < map.size(); ++i)
    s += (i ? ", \"" : "\"") + map[i].first + "\": \"" + map[i].second + "\"";
  return s + "}}";
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected \"" << fragments.front() << "\"";
  } catch (const Error& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << frag << "\"";
  }
}

// Three shards written the way HF shards a model, plus the index.
struct Sharded {
  ScratchDir dir;
  Named all;
  Sharded() {
    const Named s1 = {{"backbone.embeddings.weight", random_f32({8, 4}, 1)},
                      {"backbone.norm_f.weight", random_f32({4}, 2)}};
    const Named s2 = {{"backbone.layers.0.mixer.in_proj.weight", random_f32({6, 4}, 3)}};
    const Named s3 = {{"lm_head.weight", random_f32({8, 4}, 4)},
                      {"backbone.layers.0.norm.weight", random_f32({4}, 5)}};
    write_safetensors(dir.file("model-00001-of-00003.safetensors"), s1);
    write_safetensors(dir.file("model-00002-of-00003.safetensors"), s2);
    write_safetensors(dir.file("model-00003-of-00003.safetensors"), s3);
    std::vector<std::pair<std::string, std::string>> map;
    const std::pair<const Named*, const char*> shards[] = {
        {&s1, "model-00001-of-00003.safetensors"},
        {&s2, "model-00002-of-00003.safetensors"},
        {&s3, "model-00003-of-00003.safetensors"}};
    for (const auto& [named, file] : shards)
      for (const auto& [name, t] : *named) {
        map.emplace_back(name, file);
        all.emplace_back(name, t);
      }
    write_text(dir.file("model.safetensors.index.json"), index_json(map));
  }
};

TEST(Checkpoint, ShardedIndexReadsEveryTensorBitExact) {
  Sharded s;
  const Checkpoint ck = Checkpoint::open(s.dir.path().string());
  EXPECT_EQ(ck.dir(), s.dir.path().string());
  EXPECT_EQ(ck.files().size(), 3u);
  ASSERT_EQ(ck.size(), s.all.size());
  std::vector<std::string> expected_names;
  for (const auto& [name, _] : s.all)
    expected_names.push_back(name);
  std::sort(expected_names.begin(), expected_names.end());
  EXPECT_EQ(ck.names(), expected_names);
  size_t compared = 0;
  for (const auto& [name, src] : s.all) {
    ASSERT_TRUE(ck.has(name));
    EXPECT_EQ(ck.info(name).shape, src.shape());
    const Tensor t = ck.get(name);
    ASSERT_EQ(t.nbytes(), src.nbytes());
    EXPECT_EQ(std::memcmp(t.raw(), src.raw(), t.nbytes()), 0) << name;
    compared += static_cast<size_t>(t.numel());
  }
  EXPECT_EQ(compared, size_t{32 + 4 + 24 + 32 + 4});
  EXPECT_EQ(ck.file_of("lm_head.weight"), s.dir.file("model-00003-of-00003.safetensors"));
  size_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(s.dir.path()))
    if (e.path().extension() == ".safetensors") total += std::filesystem::file_size(e.path());
  EXPECT_EQ(ck.mapped_bytes(), total);
  EXPECT_EQ(ck.copied_bytes(), 0u);
  EXPECT_FALSE(ck.has("backbone.embedding.weight"));
  expect_error([&] { ck.get("backbone.embedding.weight"); },
               {"no tensor \"backbone.embedding.weight\"", s.dir.path().string()});
  expect_error([&] { ck.info("nope"); }, {"no tensor \"nope\""});
}

TEST(Checkpoint, IndexWithMissingShard) {
  Sharded s;
  std::filesystem::remove(s.dir.file("model-00002-of-00003.safetensors"));
  expect_error([&] { Checkpoint::open(s.dir.path().string()); },
               {"model.safetensors.index.json", "tensor \"backbone.layers.0.mixer.in_proj.weight\"",
                "shard \"model-00002-of-00003.safetensors\", which does not exist"});
}

TEST(Checkpoint, IndexListsTensorItsShardLacks) {
  Sharded s;
  write_text(s.dir.file("model.safetensors.index.json"),
             index_json({{"backbone.embeddings.weight", "model-00001-of-00003.safetensors"},
                         {"ghost.weight", "model-00002-of-00003.safetensors"}}));
  expect_error([&] { Checkpoint::open(s.dir.path().string()); },
               {"model.safetensors.index.json", "tensor \"ghost.weight\"",
                "shard \"model-00002-of-00003.safetensors\"", "no such tensor"});
}

TEST(Checkpoint, IndexAssignsTensorToTheWrongShard) {
  Sharded s;
  write_text(s.dir.file("model.safetensors.index.json"),
             index_json({{"lm_head.weight", "model-00001-of-00003.safetensors"}}));
  expect_error(
      [&] { Checkpoint::open(s.dir.path().string()); },
      {"tensor \"lm_head.weight\" is listed in shard \"model-00001-of-00003.safetensors\""});
}

TEST(Checkpoint, UnlistedShardTensorsAreServed) {
  Sharded s;
  write_text(s.dir.file("model.safetensors.index.json"),
             index_json({{"lm_head.weight", "model-00003-of-00003.safetensors"}}));
  const Checkpoint ck = Checkpoint::open(s.dir.path().string());
  EXPECT_EQ(ck.files().size(), 1u);  // only the shard the index names
  EXPECT_TRUE(ck.has("backbone.layers.0.norm.weight"));
  EXPECT_FALSE(ck.has("backbone.norm_f.weight"));
  EXPECT_EQ(ck.size(), 2u);
}

TEST(Checkpoint, TensorInTwoShardsIsAnError) {
  ScratchDir dir;
  write_safetensors(dir.file("a.safetensors"), {{"x", random_f32({2}, 1)}});
  write_safetensors(dir.file("b.safetensors"),
                    {{"x", random_f32({2}, 2)}, {"y", random_f32({1}, 3)}});
  expect_error(
      [&] { Checkpoint::open(dir.path().string()); },
      {"tensor \"x\" is in two files", dir.file("a.safetensors"), dir.file("b.safetensors")});
  write_text(dir.file("model.safetensors.index.json"),
             index_json({{"x", "a.safetensors"}, {"y", "b.safetensors"}}));
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"tensor \"x\" is in two files"});
}

TEST(Checkpoint, MalformedIndexes) {
  ScratchDir dir;
  write_safetensors(dir.file("a.safetensors"), {{"x", random_f32({2}, 1)}});
  const std::string index = dir.file("model.safetensors.index.json");
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"{\"weight_map\": ", {index, "not valid JSON"}},
      {"[]", {index, "is a JSON array, not an object"}},
      {"{\"metadata\": {}}", {index, "has no \"weight_map\""}},
      {"{\"weight_map\": [\"a.safetensors\"]}", {index, "\"weight_map\" is a JSON array"}},
      {"{\"weight_map\": {\"x\": 3}}", {index, "tensor \"x\": shard is a JSON number"}},
      {"{\"weight_map\": {\"x\": \"../a.safetensors\"}}", {index, "not a plain file name"}},
      {"{\"weight_map\": {\"x\": \"/etc/passwd\"}}", {"not a plain file name"}},
      {"{\"weight_map\": {\"x\": \"..\"}}", {"not a plain file name"}},
      {"{\"weight_map\": {\"x\": \"a.safetensors\", \"x\": \"b.safetensors\"}}",
       {index, "duplicate key \"x\""}},
  };
  size_t rejected = 0;
  for (const auto& [text, fragments] : cases) {
    SCOPED_TRACE(text);
    write_text(index, text);
    expect_error([&] { Checkpoint::open(dir.path().string()); }, fragments);
    ++rejected;
  }
  EXPECT_EQ(rejected, 9u);
}

TEST(Checkpoint, SingleFileTakesPrecedenceOverOtherFiles) {
  ScratchDir dir;
  const Tensor w = random_f32({3, 2}, 9);
  write_safetensors(dir.file("model.safetensors"), {{"w", w}});
  write_safetensors(dir.file("consolidated.safetensors"), {{"w", random_f32({3, 2}, 10)}});
  const Checkpoint ck = Checkpoint::open(dir.path().string());
  EXPECT_EQ(ck.files().size(), 1u);
  EXPECT_EQ(std::memcmp(ck.get("w").raw(), w.raw(), w.nbytes()), 0);
}

TEST(Checkpoint, AllSafetensorsFilesWithoutIndex) {
  ScratchDir dir;
  const Tensor a = random_f32({5}, 1), b = random_f32({2, 2}, 2);
  write_safetensors(dir.file("part-b.safetensors"), {{"b", b}});
  write_safetensors(dir.file("part-a.safetensors"), {{"a", a}});
  write_text(dir.file("config.json"), "{}");
  const Checkpoint ck = Checkpoint::open(dir.path().string());
  ASSERT_EQ(ck.files().size(), 2u);
  EXPECT_EQ(ck.files()[0].path(), dir.file("part-a.safetensors"));  // sorted by name
  EXPECT_EQ(ck.names(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(std::memcmp(ck.get("a").raw(), a.raw(), a.nbytes()), 0);
  EXPECT_EQ(std::memcmp(ck.get("b").raw(), b.raw(), b.nbytes()), 0);
}

TEST(Checkpoint, DirectoryErrors) {
  ScratchDir dir;
  expect_error([&] { Checkpoint::open(dir.file("absent")); }, {"absent", "not a directory"});
  expect_error([&] { Checkpoint::open(dir.path().string()); }, {"no model.safetensors.index.json"});
  test::write_bytes(dir.file("model.safetensors"), {8, 0, 0, 0, 0, 0, 0, 0, '{', '}'});
  expect_error([&] { Checkpoint::open(dir.path().string()); },
               {dir.file("model.safetensors"), "header length 8 runs past the end"});
}

}  // namespace
}  // namespace strata::io
