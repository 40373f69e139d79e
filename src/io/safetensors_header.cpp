// parse_safetensors_header: the validation rules are listed in safetensors.h.
#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "io/array_bytes.h"
#include "io/json_strict.h"
#include "io/safetensors.h"

namespace strata::io {

namespace {

using nlohmann::json;

// Root object -> tensor entry -> shape / data_offsets array.
constexpr int kHeaderMaxDepth = 3;

struct Entry {
  TensorInfo info;
  uint64_t begin = 0, end = 0;  // relative to the data area
};

// A JSON value that must be a non-negative integer fitting `max`; describes itself otherwise.
uint64_t read_unsigned(const json& v, uint64_t max, std::string_view file, std::string_view tensor,
                       std::string_view field) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > max)
      fail("{}: tensor {}: {} = {} is too large (limit {})", file, tensor, field, u, max);
    return u;
  }
  if (v.is_number_integer())
    fail("{}: tensor {}: {} = {} is negative", file, tensor, field, v.get<int64_t>());
  if (v.is_number_float())
    fail("{}: tensor {}: {} = {} is not an integer", file, tensor, field, v.get<double>());
  fail("{}: tensor {}: {} is a JSON {}, not a non-negative integer", file, tensor, field,
       json_type_name(v));
}

std::string offsets_str(const Entry& e) {
  return fmt::format("[{}, {}]", e.begin, e.end);
}

Entry parse_entry(const std::string& key, const json& v, size_t data_bytes, std::string_view file) {
  const std::string name = quote_name(key);  // for messages
  if (!v.is_object())
    fail("{}: tensor {}: entry is a JSON {}, not an object", file, name, json_type_name(v));
  for (const auto& [field, _] : v.items())
    if (field != "dtype" && field != "shape" && field != "data_offsets")
      fail("{}: tensor {}: unknown field {} (expected dtype, shape, data_offsets)", file, name,
           quote_name(field));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!v.contains(field)) fail("{}: tensor {}: missing \"{}\"", file, name, field);

  Entry e;
  e.info.name = key;
  const json& dt = v["dtype"];
  if (!dt.is_string())
    fail("{}: tensor {}: dtype is a JSON {}, not a string", file, name, json_type_name(dt));
  const auto& dt_str = dt.get_ref<const std::string&>();
  const auto dtype = dtype_from_safetensors(dt_str);
  if (!dtype) fail("{}: tensor {}: unsupported dtype {}", file, name, quote_name(dt_str));
  e.info.dtype = *dtype;

  const json& shape = v["shape"];
  if (!shape.is_array())
    fail("{}: tensor {}: shape is a JSON {}, not an array", file, name, json_type_name(shape));
  if (shape.size() > static_cast<size_t>(kMaxDims))
    fail("{}: tensor {}: shape has rank {}, more than the {} supported", file, name, shape.size(),
         kMaxDims);
  std::vector<int64_t> dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims.push_back(static_cast<int64_t>(
        read_unsigned(shape[i], static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), file,
                      name, fmt::format("shape[{}]", i))));
  const auto checked = checked_array_bytes(dims, dtype_size(e.info.dtype));
  if (!checked)
    fail("{}: tensor {}: shape {} of {} overflows a 63-bit byte count", file, name, shape.dump(),
         dt_str);
  const uint64_t bytes = *checked;
  e.info.shape = Shape(dims);

  const json& off = v["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    fail("{}: tensor {}: data_offsets must be an array [begin, end], got a JSON {}{}", file, name,
         json_type_name(off), off.is_array() ? fmt::format(" of {} values", off.size()) : "");
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  e.begin = read_unsigned(off[0], kMax, file, name, "data_offsets[0]");
  e.end = read_unsigned(off[1], kMax, file, name, "data_offsets[1]");
  if (e.begin > e.end)
    fail("{}: tensor {}: data_offsets {} begin after they end", file, name, offsets_str(e));
  if (e.end > data_bytes)
    fail("{}: tensor {}: data_offsets {} run past the end of the {}-byte data area", file, name,
         offsets_str(e), data_bytes);
  if (e.end - e.begin != bytes)
    fail("{}: tensor {}: shape {} of {} needs {} bytes but data_offsets {} hold {}", file, name,
         e.info.shape.str(), dt_str, bytes, offsets_str(e), e.end - e.begin);
  e.info.nbytes = static_cast<size_t>(bytes);
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& v, std::string_view file) {
  std::map<std::string, std::string> out;
  if (v.is_null()) return out;  // the Rust crate reads "__metadata__": null as absent
  if (!v.is_object())
    fail("{}: __metadata__ is a JSON {}, not an object of strings", file, json_type_name(v));
  for (const auto& [key, val] : v.items()) {
    if (!val.is_string())
      fail("{}: __metadata__ {} is a JSON {}, not a string", file, quote_name(key),
           json_type_name(val));
    out.emplace(key, val.get<std::string>());
  }
  return out;
}

}  // namespace

SafetensorsHeader parse_safetensors_header(const uint8_t* data, size_t size,
                                           std::string_view file) {
  if (size < 8)
    fail("{}: file is {} bytes, shorter than the 8-byte header length field", file, size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | data[i];  // little-endian u64
  if (n > kSafetensorsMaxHeaderBytes)
    fail("{}: header length {} exceeds the {}-byte limit", file, n, kSafetensorsMaxHeaderBytes);
  if (n > size - 8)
    fail("{}: header length {} runs past the end of the {}-byte file", file, n, size);

  SafetensorsHeader h;
  h.header_bytes = static_cast<size_t>(n);
  h.data_start = 8 + h.header_bytes;
  const size_t data_bytes = size - h.data_start;
  const std::string_view text(reinterpret_cast<const char*>(data + 8), h.header_bytes);
  const json root = parse_json_strict(text, fmt::format("{}: header", file), kHeaderMaxDepth);
  if (!root.is_object()) fail("{}: header is a JSON {}, not an object", file, json_type_name(root));

  std::vector<Entry> entries;
  entries.reserve(root.size());
  for (const auto& [key, val] : root.items()) {
    if (key == "__metadata__") {
      h.metadata = parse_metadata(val, file);
      continue;
    }
    entries.push_back(parse_entry(key, val, data_bytes, file));
  }

  // The data area must be tiled exactly: in offset order each tensor starts where the last
  // ended. Zero-byte tensors may share an offset; that cannot overlap anything.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    if (e.begin < expected)
      fail("{}: tensor {}: data_offsets {} overlap tensor {} at {}", file, quote_name(e.info.name),
           offsets_str(e), quote_name(entries[i - 1].info.name), offsets_str(entries[i - 1]));
    if (e.begin > expected)
      fail("{}: tensor {}: data_offsets {} leave a gap: data bytes [{}, {}) belong to no tensor",
           file, quote_name(e.info.name), offsets_str(e), expected, e.begin);
    expected = e.end;
  }
  if (expected != data_bytes)
    fail("{}: the last {} bytes of the {}-byte data area belong to no tensor", file,
         data_bytes - expected, data_bytes);

  h.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    e.info.data_offset = h.data_start + static_cast<size_t>(e.begin);
    h.tensors.push_back(std::move(e.info));
  }
  return h;
}

}  // namespace strata::io
