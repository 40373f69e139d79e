// safetensors reader and writer on valid files: random tensors of every dtype written by
// write_safetensors and read back bit for bit; the writer's layout checked against the format
// with an independent JSON parse; hand-built files (not from our writer) read correctly.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "io/safetensors.h"
#include "test_safetensors_util.h"

namespace strata::io {
namespace {

using test::ScratchDir;

// Random bytes are valid values for every dtype here (bit patterns are compared, not numbers).
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  const auto bytes = test::random_bytes(t.nbytes(), seed);
  if (!bytes.empty()) std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

struct Case {
  std::string name;
  Shape shape;
  DType dtype;
};

std::vector<Case> every_dtype_cases() {
  return {
      {"f32.matrix", {7, 5}, DType::F32},
      {"f64.vector", {9}, DType::F64},
      {"f16.cube", {2, 3, 4}, DType::F16},
      {"bf16.weight", {6, 10}, DType::BF16},
      {"fp8.weight", {3, 17}, DType::F8E4M3},
      {"u8.packed", {5, 3}, DType::U8},
      {"i8.q", {11}, DType::I8},
      {"i32.ids", {4, 4}, DType::I32},
      {"i64.pos", {3}, DType::I64},
      {"bool.mask", {13}, DType::Bool},
      {"f32.scalar", {}, DType::F32},
      {"bf16.empty", {0, 4}, DType::BF16},
      {"f32.rank6", {1, 2, 1, 3, 1, 2}, DType::F32},
  };
}

TEST(Safetensors, RoundTripEveryDtypeBitExact) {
  ScratchDir dir;
  const auto cases = every_dtype_cases();
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (size_t i = 0; i < cases.size(); ++i)
    tensors.emplace_back(cases[i].name, random_tensor(cases[i].shape, cases[i].dtype, 100 + i));
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "ünïcode ✓"}};
  const std::string path = dir.file("model.safetensors");
  write_safetensors(path, tensors, meta);

  size_t compared_bytes = 0, expected_bytes = 0;
  Tensor keep;  // must stay valid after the file object is gone
  {
    const SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_EQ(f.metadata(), meta);
    ASSERT_EQ(f.tensors().size(), cases.size());
    EXPECT_EQ(f.mapped_bytes(), std::filesystem::file_size(path));
    for (const auto& [name, src] : tensors) {
      const TensorInfo* info = f.find(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(info->dtype, src.dtype()) << name;
      EXPECT_EQ(info->shape, src.shape()) << name;
      EXPECT_EQ(info->nbytes, src.nbytes()) << name;
      const Tensor t = f.tensor(name);
      EXPECT_EQ(t.dtype(), src.dtype());
      EXPECT_EQ(t.shape(), src.shape());
      EXPECT_EQ(t.device(), Device::Host);
      ASSERT_EQ(t.nbytes(), src.nbytes());
      EXPECT_EQ(std::memcmp(t.raw(), src.raw(), src.nbytes()), 0) << name;
      compared_bytes += t.nbytes();
      expected_bytes += src.nbytes();
    }
    EXPECT_EQ(f.copied_bytes(), 0u);  // every tensor was a view of the mapping
    keep = f.tensor("f32.matrix");
  }
  EXPECT_EQ(compared_bytes, expected_bytes);
  EXPECT_EQ(compared_bytes, size_t{7 * 5 * 4 + 9 * 8 + 24 * 2 + 60 * 2 + 51 + 15 + 11 + 16 * 4 +
                                   3 * 8 + 13 + 4 + 0 + 12 * 4});
  EXPECT_EQ(std::memcmp(keep.raw(), tensors[0].second.raw(), keep.nbytes()), 0);
  EXPECT_EQ(f32_bits(keep.data<float>()[34]), f32_bits(tensors[0].second.data<float>()[34]));
}

// The layout the Python library writes, checked with nlohmann's own parser (not ours): header
// length a multiple of 8, tensors widest-first then by name, contiguous offsets, aligned data.
TEST(Safetensors, WriterLayoutMatchesTheFormat) {
  ScratchDir dir;
  const std::string path = dir.file("w.safetensors");
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"b.u8", random_tensor({3}, DType::U8, 1)},
      {"a.bf16", random_tensor({5}, DType::BF16, 2)},
      {"z.f32", random_tensor({2, 3}, DType::F32, 3)},
      {"c.f64", random_tensor({1}, DType::F64, 4)},
      {"a.f32", random_tensor({1}, DType::F32, 5)},
  };
  write_safetensors(path, tensors);
  const auto bytes = test::read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[static_cast<size_t>(i)];
  EXPECT_EQ(n % 8, 0u);
  ASSERT_LE(8 + n, bytes.size());
  const auto header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(n));
  EXPECT_FALSE(header.contains("__metadata__"));  // no metadata given, none written
  const std::vector<std::string> expected_order = {"c.f64", "a.f32", "z.f32", "a.bf16", "b.u8"};
  uint64_t offset = 0;
  size_t checked = 0;
  for (const auto& name : expected_order) {
    const auto& e = header.at(name);
    const auto it =
        std::find_if(tensors.begin(), tensors.end(), [&](auto& p) { return p.first == name; });
    const Tensor& src = it->second;
    EXPECT_EQ(e.at("dtype").get<std::string>(), dtype_to_safetensors(src.dtype()));
    EXPECT_EQ(e.at("shape").get<std::vector<int64_t>>(), src.shape().vec());
    EXPECT_EQ(e.at("data_offsets")[0].get<uint64_t>(), offset) << name;
    EXPECT_EQ(e.at("data_offsets")[1].get<uint64_t>(), offset + src.nbytes()) << name;
    EXPECT_EQ((8 + n + offset) % dtype_size(src.dtype()), 0u) << name;
    EXPECT_EQ(std::memcmp(bytes.data() + 8 + n + offset, src.raw(), src.nbytes()), 0) << name;
    offset += src.nbytes();
    ++checked;
  }
  EXPECT_EQ(checked, tensors.size());
  EXPECT_EQ(8 + n + offset, bytes.size());
}

// A strided view is written in row-major element order; compared element by element with an
// index computation independent of Tensor::contiguous.
TEST(Safetensors, WritesNonContiguousTensorsRowMajor) {
  ScratchDir dir;
  const Tensor full = random_tensor({4, 6}, DType::F32, 11);
  const Tensor cols = full.slice(1, 1, 3);  // [4, 3], row stride 6
  ASSERT_FALSE(cols.is_contiguous());
  write_safetensors(dir.file("s.safetensors"), {{"cols", cols}});
  const auto f = SafetensorsFile::open(dir.file("s.safetensors"));
  const Tensor t = f.tensor("cols");
  ASSERT_EQ(t.shape(), Shape({4, 3}));
  int compared = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c, ++compared)
      EXPECT_EQ(f32_bits(t.data<float>()[r * 3 + c]), f32_bits(full.data<float>()[r * 6 + 1 + c]));
  EXPECT_EQ(compared, 12);
}

// A file built by hand the way another writer might: keys out of offset order, leading and
// trailing whitespace, null metadata, zero-byte tensors sharing an offset, no padding.
TEST(Safetensors, ReadsHandBuiltFile) {
  ScratchDir dir;
  const std::string header =
      " {\"w\": {\"shape\": [2, 2], \"dtype\": \"I32\", \"data_offsets\": [2, 18]},"
      " \"e1\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]},"
      " \"e2\": {\"dtype\": \"BF16\", \"shape\": [3, 0], \"data_offsets\": [0, 0]},"
      " \"h\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [0, 2]},"
      " \"__metadata__\": null}   ";
  const auto bytes = test::safetensors_bytes(header, 18, 5);
  test::write_bytes(dir.file("h.safetensors"), bytes);
  const auto f = SafetensorsFile::open(dir.file("h.safetensors"));
  EXPECT_TRUE(f.metadata().empty());
  ASSERT_EQ(f.tensors().size(), 4u);
  const size_t data_start = 8 + header.size();
  EXPECT_EQ(f.find("w")->data_offset, data_start + 2);
  EXPECT_EQ(f.find("h")->data_offset, data_start);
  EXPECT_EQ(f.find("missing"), nullptr);
  // file order = offset order
  EXPECT_EQ(f.tensors().back().name, "w");
  // i32 data at file offset data_start + 2: aligned only if data_start + 2 is a multiple of 4.
  const Tensor w = f.tensor("w");
  for (int i = 0; i < 4; ++i) {
    int32_t expected;
    std::memcpy(&expected, bytes.data() + data_start + 2 + 4 * i, 4);
    EXPECT_EQ(w.data<int32_t>()[i], expected) << i;
  }
  EXPECT_EQ(f.copied_bytes(), (data_start + 2) % 4 == 0 ? 0u : 16u);
  EXPECT_EQ(f.tensor("e2").numel(), 0);
}

// Data at an offset that is not a multiple of the element size is copied to aligned memory.
TEST(Safetensors, UnalignedTensorIsCopiedAndCounted) {
  ScratchDir dir;
  std::string header =
      "{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [1, 13]}}";
  header.append((8 - header.size() % 8) % 8, ' ');  // data area starts 8-aligned: b is at +1
  const auto bytes = test::safetensors_bytes(header, 13, 9);
  test::write_bytes(dir.file("u.safetensors"), bytes);
  const auto f = SafetensorsFile::open(dir.file("u.safetensors"));
  const Tensor b = f.tensor("b");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.raw()) % 4, 0u);
  EXPECT_EQ(std::memcmp(b.raw(), bytes.data() + 8 + header.size() + 1, 12), 0);
  EXPECT_EQ(f.copied_bytes(), 12u);
  (void)f.tensor("a");  // one-byte elements are always aligned
  EXPECT_EQ(f.copied_bytes(), 12u);
}

TEST(Safetensors, EmptyFileWithNoTensors) {
  ScratchDir dir;
  write_safetensors(dir.file("e.safetensors"), {});
  const auto f = SafetensorsFile::open(dir.file("e.safetensors"));
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.mapped_bytes(), 16u);  // 8-byte length + "{}" padded to 8
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing \"" << fragments.front() << "\"";
  } catch (const Error& e) {
    for (const auto& frag : fragments)
      EXPECT_NE(std::string(e.what()).find(frag), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << frag << "\"";
  }
}

TEST(Safetensors, OpenErrorsNameTheFile) {
  ScratchDir dir;
  expect_error([&] { SafetensorsFile::open(dir.file("absent.safetensors")); },
               {dir.file("absent.safetensors"), "cannot open"});
  expect_error([&] { SafetensorsFile::open(dir.path().string()); }, {"not a regular file"});
  test::write_bytes(dir.file("short.safetensors"), {1, 2, 3});
  expect_error([&] { SafetensorsFile::open(dir.file("short.safetensors")); },
               {dir.file("short.safetensors"), "file is 3 bytes"});
  test::write_bytes(dir.file("zero.safetensors"), {});
  expect_error([&] { SafetensorsFile::open(dir.file("zero.safetensors")); }, {"file is 0 bytes"});
  write_safetensors(dir.file("ok.safetensors"), {{"x", random_tensor({2}, DType::F32, 3)}});
  const auto f = SafetensorsFile::open(dir.file("ok.safetensors"));
  expect_error([&] { (void)f.tensor("y"); }, {dir.file("ok.safetensors"), "no tensor \"y\""});
}

TEST(Safetensors, WriterRejectsBadInput) {
  ScratchDir dir;
  const std::string path = dir.file("bad.safetensors");
  const Tensor t = random_tensor({2}, DType::F32, 1);
  expect_error(
      [&] {
        write_safetensors(path, {{"a", t}, {"a", t}});
      },
      {path, "\"a\" is given twice"});
  expect_error([&] { write_safetensors(path, {{"", t}}); }, {"empty name"});
  expect_error([&] { write_safetensors(path, {{"__metadata__", t}}); }, {"reserved"});
  expect_error([&] { write_safetensors(path, {{"u", Tensor()}}); }, {"\"u\" is undefined"});
  expect_error(
      [&] {
        write_safetensors(path, {{std::string("\xff\xfe"), t}});
      },
      {"not valid UTF-8"});
  expect_error(
      [&] {
        write_safetensors(dir.file("no/such/dir/x.safetensors"), {{"a", t}});
      },
      {"cannot create"});
  EXPECT_FALSE(std::filesystem::exists(path));  // failed writes leave nothing behind
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

}  // namespace
}  // namespace strata::io
