// .npy files: round trips of random tensors of every supported dtype, the exact header bytes
// NumPy writes (worked out by hand from numpy.lib.format's rules), files in the other styles
// NumPy and other writers produce, and malformed files rejected with their reason.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "core/check.h"
#include "io/npy.h"
#include "test_safetensors_util.h"

namespace strata::io {
namespace {

using test::ScratchDir;

Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  const auto b = test::random_bytes(t.nbytes(), seed);
  if (!b.empty()) std::memcpy(t.raw(), b.data(), b.size());
  return t;
}

std::vector<uint8_t> bytes_of(const std::string& s) {
  return {s.begin(), s.end()};
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

TEST(Npy, RoundTripEveryDtypeBitExact) {
  ScratchDir dir;
  const std::vector<std::pair<Shape, DType>> cases = {
      {{2, 3}, DType::F32}, {{7}, DType::F32},       {{}, DType::F32},
      {{0, 5}, DType::F32}, {{4, 1, 3}, DType::I32}, {{3, 2}, DType::F64},
      {{5}, DType::I64},    {{2, 2, 2}, DType::F16}, {{9}, DType::U8},
      {{6}, DType::I8},     {{3, 3}, DType::Bool},   {{1, 2, 1, 2, 1, 2}, DType::F32},
  };
  size_t compared = 0, expected = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [shape, dtype] = cases[i];
    SCOPED_TRACE(fmt::format("{}{}", dtype_name(dtype), shape.str()));
    const Tensor src = random_tensor(shape, dtype, 40 + i);
    const std::string path = dir.file(fmt::format("a{}.npy", i));
    write_npy(path, src);
    EXPECT_EQ((std::filesystem::file_size(path) - src.nbytes()) % 64, 0u);  // data 64-aligned
    const Tensor back = read_npy(path);
    EXPECT_EQ(back.dtype(), dtype);
    EXPECT_EQ(back.shape(), shape);
    ASSERT_EQ(back.nbytes(), src.nbytes());
    EXPECT_EQ(std::memcmp(back.raw(), src.raw(), src.nbytes()), 0);
    compared += back.nbytes();
    expected += src.nbytes();
  }
  EXPECT_EQ(compared, expected);
  EXPECT_EQ(compared, size_t{24 + 28 + 4 + 0 + 48 + 48 + 40 + 16 + 9 + 6 + 9 + 32});
}

// numpy.lib.format: magic, version 1.0, u16 header length, the dict, spaces, '\n', such that
// 10 + length is a multiple of 64. For shape (2, 3) f32 the dict is 59 characters:
// 10 + 59 + 1 = 70, so 64 - 70 % 64 = 58 spaces; length = 59 + 58 + 1 = 118 = 0x76; total 128.
TEST(Npy, HeaderIsWhatNumpyWrites) {
  ScratchDir dir;
  const Tensor t = random_tensor({2, 3}, DType::F32, 5);
  write_npy(dir.file("h.npy"), t);
  const auto bytes = test::read_bytes(dir.file("h.npy"));
  std::string expected("\x93NUMPY\x01\x00\x76\x00", 10);
  expected += "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expected += std::string(58, ' ') + "\n";
  ASSERT_EQ(expected.size(), 128u);
  ASSERT_EQ(bytes.size(), 128u + 24u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 128), expected);
  EXPECT_EQ(std::memcmp(bytes.data() + 128, t.raw(), 24), 0);

  // One-element and empty shapes use Python's tuple spelling: (5,) and ().
  write_npy(dir.file("v.npy"), random_tensor({5}, DType::I32, 6));
  const auto v = test::read_bytes(dir.file("v.npy"));
  EXPECT_EQ(std::string(v.begin() + 10, v.begin() + 67),
            "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }");
  write_npy(dir.file("s.npy"), random_tensor({}, DType::F64, 7));
  const auto s = test::read_bytes(dir.file("s.npy"));
  EXPECT_EQ(std::string(s.begin() + 10, s.begin() + 65),
            "{'descr': '<f8', 'fortran_order': False, 'shape': (), }");
}

TEST(Npy, WritesStridedTensorsRowMajor) {
  ScratchDir dir;
  const Tensor full = random_tensor({3, 4}, DType::F32, 8);
  write_npy(dir.file("c.npy"), full.slice(1, 2, 2));  // columns 2..3
  const Tensor back = read_npy(dir.file("c.npy"));
  ASSERT_EQ(back.shape(), Shape({3, 2}));
  int compared = 0;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 2; ++c, ++compared)
      EXPECT_EQ(f32_bits(back.data<float>()[r * 2 + c]),
                f32_bits(full.data<float>()[r * 4 + 2 + c]));
  EXPECT_EQ(compared, 6);
}

std::vector<uint8_t> npy_file(int major, const std::string& dict, size_t data_bytes) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = dict.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i)
    out += static_cast<char>((n >> (8 * i)) & 0xff);
  out += dict;
  auto bytes = bytes_of(out);
  const auto data = test::random_bytes(data_bytes, 3);
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// Other spellings NumPy accepts and writes: version 2.0, double quotes, keys in another order,
// no trailing comma, NumPy >= 1.24's extra spaces for in-place growth, 1-D Fortran order.
TEST(Npy, ReadsOtherValidSpellings) {
  const std::vector<std::pair<int, std::string>> cases = {
      {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }\n"},
      {1, "{\"shape\": (2,2), \"descr\": \"<f4\", \"fortran_order\": False}\n"},
      {1,
       "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }" + std::string(90, ' ') + "\n"},
      {3, "{'descr':'<f4','fortran_order':False,'shape':(4,)}"},
      {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (4,), }\n"},
  };
  size_t read = 0;
  for (const auto& [major, dict] : cases) {
    SCOPED_TRACE(dict);
    const auto bytes = npy_file(major, dict, 16);
    const Tensor t = parse_npy(bytes.data(), bytes.size(), "x.npy");
    EXPECT_EQ(t.numel(), 4);
    EXPECT_EQ(std::memcmp(t.raw(), bytes.data() + bytes.size() - 16, 16), 0);
    ++read;
  }
  EXPECT_EQ(read, cases.size());
}

TEST(Npy, MalformedFilesAreRejected) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  auto with_len = [](std::vector<uint8_t> b, size_t n) {
    b[8] = static_cast<uint8_t>(n & 0xff);
    b[9] = static_cast<uint8_t>(n >> 8);
    return b;
  };
  struct Bad {
    std::vector<uint8_t> bytes;
    std::vector<std::string> fragments;
  };
  std::vector<uint8_t> bad_magic = npy_file(1, ok, 8);
  bad_magic[1] = 'M';
  const std::vector<Bad> cases = {
      {{}, {"not a .npy file"}},
      {bad_magic, {"not a .npy file"}},
      {npy_file(4, ok, 8), {"unsupported .npy format version 4.0"}},
      {bytes_of(std::string("\x93NUMPY\x01\x00\x05", 9)), {"ends inside its header length"}},
      {with_len(npy_file(1, ok, 8), 5000), {"header length 5000 runs past the end"}},
      {npy_file(1, "{'descr': '<f4', 'shape': (2,), }", 8), {"needs the keys"}},
      {npy_file(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8),
       {"key 'descr' appears twice"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8),
       {"unexpected key \"x\""}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", 8),
       {"expected True or False"}},
      {npy_file(1, "{'descr': '<f4", 8), {"unterminated string"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}", 8),
       {"expected a non-negative integer in shape"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8),
       {"text after the dict"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", 8), {"end of header"}},
      {npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8),
       {"dtype \">f4\" is not supported", "<f4"}},
      {npy_file(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16),
       {"dtype \"<c8\" is not supported"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16),
       {"Fortran-ordered"}},
      {npy_file(1, ok, 7), {"shape [2] of <f4 needs 8 data bytes, the file has 7"}},
      {npy_file(1, ok, 9), {"needs 8 data bytes, the file has 9"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                0),
       {"overflows"}},
      // found by fuzz_npy: 0 bytes, but Tensor's row-major strides overflowed int64
      {npy_file(
           1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 75156400000250, 67271), }", 0),
       {"overflows"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                0),
       {"shape dimension too large"}},
      {npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }", 4),
       {"more than 6 dimensions"}},
  };
  size_t rejected = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    expect_error([&] { parse_npy(cases[i].bytes.data(), cases[i].bytes.size(), "bad.npy"); },
                 [&] {
                   auto f = cases[i].fragments;
                   f.push_back("bad.npy");
                   return f;
                 }());
    ++rejected;
  }
  EXPECT_EQ(rejected, 22u);
}

TEST(Npy, FileErrors) {
  ScratchDir dir;
  expect_error([&] { read_npy(dir.file("absent.npy")); }, {dir.file("absent.npy"), "cannot open"});
  expect_error([&] { write_npy(dir.file("b.npy"), random_tensor({2}, DType::BF16, 1)); },
               {"bf16[2]@host has no NumPy dtype"});
  expect_error([&] { write_npy(dir.file("u.npy"), Tensor()); }, {"undefined"});
  expect_error([&] { write_npy(dir.file("no/dir/x.npy"), random_tensor({2}, DType::F32, 1)); },
               {"cannot create"});
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.npy")));
}

// The npy fuzzer's seed corpus stays meaningful: valid_* parse, invalid_* do not.
TEST(Npy, FuzzSeedCorpusIsClassifiedByName) {
  const std::filesystem::path dir =
      std::filesystem::path(STRATA_SOURCE_DIR) / "tests/fuzz/corpus/npy";
  size_t valid = 0, invalid = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_NO_THROW(read_npy(e.path().string()));
      ++valid;
    } else {
      EXPECT_EQ(name.rfind("invalid_", 0), 0u);
      EXPECT_THROW(read_npy(e.path().string()), Error);
      ++invalid;
    }
  }
  EXPECT_EQ(valid, 3u);
  EXPECT_EQ(invalid, 1u);
}

}  // namespace
}  // namespace strata::io
