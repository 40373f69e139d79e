// libFuzzer target: token id lists as the command line takes them: a JSON array on stdin
// (detokenize) and a comma list (--ids). (generate's --prompt-ids parser lives in the engine,
// which the fuzz build leaves out; it is covered by the robustness suite.) Malformed input must end
// in strata::Error; accepted ids are non-negative and the list is no longer than its text allows.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/check.h"
#include "text/tokenizer_ids.h"

namespace {

template <class Fn>
void check_list(std::string_view text, Fn parse) {
  try {
    const std::vector<int32_t> ids = parse(text);
    if (ids.size() > text.size() / 2 + 1) std::abort();  // each id takes a digit and a separator
    for (int32_t id : ids)
      if (id < 0) std::abort();
  } catch (const strata::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_list(text, [](std::string_view t) { return strata::text::parse_id_json(t, "stdin"); });
  check_list(text, [](std::string_view t) { return strata::text::parse_id_csv(t, "--ids"); });
  return 0;
}
