#include "io/npy.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/check.h"
#include "io/array_bytes.h"
#include "io/atomic_file.h"
#include "io/json_strict.h"

namespace strata::io {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // NumPy's ARRAY_ALIGN: data starts at a multiple of this

struct NpyType {
  std::string_view descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::F32}, {"<f8", DType::F64}, {"<f2", DType::F16}, {"<i4", DType::I32},
    {"<i8", DType::I64}, {"|u1", DType::U8},  {"|i1", DType::I8},  {"|b1", DType::Bool},
};

std::optional<std::string_view> descr_of(DType t) {
  for (const auto& e : kTypes)
    if (e.dtype == t) return e.descr;
  return std::nullopt;
}

// Python's repr of a tuple of ints: (), (3,), (2, 3).
std::string shape_repr(const Shape& s) {
  std::string r = "(";
  for (int i = 0; i < s.rank(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.rank() == 1 ? ",)" : ")");
}

// The header dict as NumPy writes it: a Python literal {'descr': ..., 'fortran_order': ...,
// 'shape': (...), } with the keys in any order. Only what NumPy writes is accepted.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view file) : s_(text), file_(file) {}

  struct Result {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
  };

  Result parse() {
    Result r;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      ws();
      if (eat('}')) break;
      const std::string key = str();
      expect(':');
      ws();
      auto once = [&](bool& have) {
        if (have) fail("{}: npy header: key '{}' appears twice", file_, key);
        have = true;
      };
      if (key == "descr") {
        once(have_descr);
        r.descr = str();
      } else if (key == "fortran_order") {
        once(have_order);
        r.fortran_order = boolean();
      } else if (key == "shape") {
        once(have_shape);
        r.shape = tuple();
      } else {
        fail("{}: npy header: unexpected key {}", file_, quote_name(key));
      }
      ws();
      if (eat('}')) break;
      expect(',');
    }
    ws();
    if (i_ != s_.size()) fail("{}: npy header: text after the dict at byte {}", file_, i_);
    if (!have_descr || !have_order || !have_shape)
      fail("{}: npy header: needs the keys 'descr', 'fortran_order' and 'shape'", file_);
    return r;
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    ws();
    if (!eat(c))
      fail("{}: npy header: expected '{}' at byte {}{}", file_, c, i_,
           i_ < s_.size() ? "" : " (end of header)");
  }
  std::string str() {
    ws();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      fail("{}: npy header: expected a quoted string at byte {}", file_, i_);
    const char q = s_[i_++];
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') fail("{}: npy header: escapes in strings are not supported", file_);
      ++i_;
    }
    if (i_ >= s_.size()) fail("{}: npy header: unterminated string", file_);
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") return i_ += 4, true;
    if (s_.substr(i_, 5) == "False") return i_ += 5, false;
    fail("{}: npy header: expected True or False at byte {}", file_, i_);
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (true) {
      ws();
      if (eat(')')) break;
      if (i_ >= s_.size() || s_[i_] < '0' || s_[i_] > '9')
        fail("{}: npy header: expected a non-negative integer in shape at byte {}", file_, i_);
      int64_t v = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        const int d = s_[i_++] - '0';
        if (v > (std::numeric_limits<int64_t>::max() - d) / 10)
          fail("{}: npy header: shape dimension too large", file_);
        v = v * 10 + d;
      }
      out.push_back(v);
      if (out.size() > static_cast<size_t>(kMaxDims))
        fail("{}: npy header: shape has more than {} dimensions", file_, kMaxDims);
      ws();
      if (eat(')')) break;
      expect(',');
    }
    // Python needs the trailing comma for one element; "(3)" is an int, not a tuple.
    return out;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string_view file_;
};

}  // namespace

void write_npy(const std::string& path, const Tensor& t) {
  if (!t.defined()) fail("{}: cannot write an undefined tensor", path);
  if (t.device() != Device::Host) fail("{}: tensor {} must be on the host to write", path, t.str());
  const auto descr = descr_of(t.dtype());
  if (!descr) fail("{}: {} has no NumPy dtype; cast it (e.g. to f32) first", path, t.str());

  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", *descr,
                                 shape_repr(t.shape()));
  // As numpy.lib.format: pad with spaces so magic + version + length + header + '\n' is a
  // multiple of 64 (a full extra block when it already is).
  const size_t prefix = kMagicLen + 2 + 2;
  const size_t padlen = kAlign - (prefix + dict.size() + 1) % kAlign;
  dict.append(padlen, ' ');
  dict.push_back('\n');
  if (dict.size() > 0xffff)
    fail("{}: npy header of {} bytes is too long for format 1.0", path, dict.size());

  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  const Tensor c = t.contiguous();
  AtomicFile f(path);
  f.write(out);
  if (c.nbytes()) f.write(c.raw(), c.nbytes());
  f.commit();
}

Tensor parse_npy(const uint8_t* data, size_t size, std::string_view name) {
  if (size < kMagicLen + 2 || std::memcmp(data, kMagic, kMagicLen) != 0)
    fail("{}: not a .npy file (no \\x93NUMPY magic)", name);
  const int major = data[6], minor = data[7];
  if ((major < 1 || major > 3) || minor != 0)
    fail("{}: unsupported .npy format version {}.{}", name, major, minor);
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicLen + 2 + len_bytes;
  if (size < prefix) fail("{}: .npy file of {} bytes ends inside its header length", name, size);
  size_t hlen = 0;
  for (size_t i = 0; i < len_bytes; ++i)
    hlen |= static_cast<size_t>(data[8 + i]) << (8 * i);
  if (hlen > size - prefix)
    fail("{}: .npy header length {} runs past the end of the {}-byte file", name, hlen, size);

  const std::string_view text(reinterpret_cast<const char*>(data + prefix), hlen);
  const auto h = HeaderParser(text, name).parse();
  std::optional<DType> dtype;
  for (const auto& e : kTypes)
    if (e.descr == h.descr) dtype = e.dtype;
  if (!dtype) {
    std::string supported;
    for (const auto& e : kTypes)
      supported += (supported.empty() ? "" : " ") + std::string(e.descr);
    fail("{}: .npy dtype {} is not supported (supported: {})", name, quote_name(h.descr),
         supported);
  }
  if (h.fortran_order && h.shape.size() >= 2)
    fail("{}: Fortran-ordered .npy arrays are not supported; save a C-ordered array", name);

  const auto checked = checked_array_bytes(h.shape, dtype_size(*dtype));
  if (!checked) fail("{}: .npy shape overflows a 63-bit byte count", name);
  const uint64_t bytes = *checked;
  const size_t data_bytes = size - prefix - hlen;
  if (bytes != data_bytes)
    fail("{}: .npy shape {} of {} needs {} data bytes, the file has {}", name, Shape(h.shape).str(),
         h.descr, bytes, data_bytes);
  Tensor t = Tensor::empty(Shape(h.shape), *dtype, Device::Host);
  if (bytes) std::memcpy(t.raw(), data + prefix + hlen, static_cast<size_t>(bytes));
  return t;
}

Tensor read_npy(const std::string& path) {
  // .npy fixtures and logits dumps: a cap that keeps a wrong path from filling memory.
  const std::string bytes = read_text_file(path, "npy file", 8ull << 30);
  return parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

}  // namespace strata::io
