#include "io/json_strict.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>
#include <vector>

#include "core/check.h"
#include "io/bounded_file.h"

namespace strata::io {

// RFC 3629 UTF-8: no overlong forms, no UTF-16 surrogates, nothing above U+10FFFF.
size_t first_invalid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;  // overlong below U+0800
      if (c == 0xed) hi = 0x9f;  // surrogates U+D800..U+DFFF
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;  // overlong below U+10000
      if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
    } else {
      return i;  // continuation byte at a start, 0xc0/0xc1 (overlong) or 0xf5..0xff
    }
    if (i + len > n) return i;
    if (p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k)
      if (p[i + k] < 0x80 || p[i + k] > 0xbf) return i;
    i += len;
  }
  return std::string_view::npos;
}

namespace {

// nlohmann quotes the token it last read, which may be megabytes long: keep the start.
std::string_view short_detail(const nlohmann::json::exception& e) {
  std::string_view detail = e.what();
  return detail.size() > 300 ? detail.substr(0, 300) : detail;
}

template <class Json>
Json parse_strict(std::string_view text, std::string_view what, int max_depth) {
  if (const size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    fail("{}: not valid UTF-8 (byte {} of {})", what, bad, text.size());

  // One set of keys per open object, innermost last (arrays hold no keys).
  std::vector<std::unordered_set<std::string>> open_objects;
  auto on_event = [&](int depth, typename Json::parse_event_t event, Json& parsed) {
    using E = typename Json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        // `depth` counts the containers already open around this one.
        if (depth + 1 > max_depth)
          fail("{}: JSON nests deeper than the {} levels allowed", what, max_depth);
        if (event == E::object_start) open_objects.emplace_back();
        break;
      case E::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case E::key: {
        const auto& key = parsed.template get_ref<const std::string&>();
        if (!open_objects.empty() && !open_objects.back().insert(key).second)
          fail("{}: duplicate key \"{}\" in one JSON object", what, key);
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::json::parse_error& e) {
    fail("{}: not valid JSON at byte {}: {}", what, e.byte, short_detail(e));
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range 406: a number literal beyond the range of a double (1E615)
    fail("{}: not valid JSON: {}", what, short_detail(e));
  }
}

}  // namespace

nlohmann::json parse_json_strict(std::string_view text, std::string_view what, int max_depth) {
  return parse_strict<nlohmann::json>(text, what, max_depth);
}

nlohmann::ordered_json parse_ordered_json_strict(std::string_view text, std::string_view what,
                                                 int max_depth) {
  return parse_strict<nlohmann::ordered_json>(text, what, max_depth);
}

std::string read_text_file(const std::string& path, std::string_view what, uint64_t max_bytes) {
  return read_regular_file(path, what, max_bytes);
}

nlohmann::json parse_json_file(const std::string& path, std::string_view what, uint64_t max_bytes,
                               int max_depth) {
  return parse_json_strict(read_text_file(path, what, max_bytes), path, max_depth);
}

std::string quote_name(std::string_view name) {
  constexpr size_t kMax = 200;
  const bool cut = name.size() > kMax;
  if (cut) {
    name = name.substr(0, kMax);
    // do not split a UTF-8 sequence: drop continuation bytes and the lead byte they follow
    while (!name.empty() && (static_cast<unsigned char>(name.back()) & 0xc0) == 0x80)
      name.remove_suffix(1);
    if (!name.empty() && static_cast<unsigned char>(name.back()) >= 0xc0) name.remove_suffix(1);
  }
  // error_handler::replace: a name that is not valid UTF-8 still prints (as U+FFFD).
  std::string q = nlohmann::json(std::string(name))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (cut) q.insert(q.size() - 1, "...");
  return q;
}

std::string_view json_type_name(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object:
      return "object";
    case nlohmann::json::value_t::array:
      return "array";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::boolean:
      return "boolean";
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::discarded:
      return "discarded";
    default:
      return "number";
  }
}

}  // namespace strata::io
