#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer_regex.h"

#include <pcre2.h>

#include <memory>

#include "core/check.h"
#include "text/unicode.h"

namespace strata::text {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  const int n = pcre2_get_error_message(code, buf, sizeof(buf));
  return n < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<char*>(buf), n);
}

// Per-thread match state: one match data block (only the whole-match pair is read) and a JIT
// stack that may grow to 8 MiB, so long runs of a repeated class do not exhaust the default
// 32 KiB. Patterns are shared between threads; this state never is.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* context = [this] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    if (c && stack) pcre2_jit_stack_assign(c, nullptr, stack);
    return c;
  }();
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  if (!state.data || !state.context)
    throw Error("tokenizer regex: out of memory for PCRE2 match data");
  return state;
}

}  // namespace

Regex::Regex(std::string_view pattern, std::string_view where) : pattern_(pattern), where_(where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                        PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
  if (!code_) {
    fail("{}: regex /{}/ does not compile at offset {}: {}", where_, pattern_, offset,
         pcre2_message(err));
  }
  // JIT is a speed-up only: when it is unavailable pcre2_match interprets the same pattern.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() {
  pcre2_code_free(code_);
}

Regex::Regex(Regex&& other) noexcept
    : pattern_(std::move(other.pattern_)), where_(std::move(other.where_)), code_(other.code_) {
  other.code_ = nullptr;
}

Regex& Regex::operator=(Regex&& other) noexcept {
  if (this != &other) {
    pcre2_code_free(code_);
    pattern_ = std::move(other.pattern_);
    where_ = std::move(other.where_);
    code_ = other.code_;
    other.code_ = nullptr;
  }
  return *this;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view text) const {
  MatchState& st = match_state();
  std::vector<std::pair<size_t, size_t>> out;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  size_t last_match_end = std::string_view::npos;
  while (last_end <= text.size()) {
    // Input was made valid UTF-8 before tokenizing, so the per-call UTF check is skipped.
    const int rc =
        pcre2_match(code_, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail("{}: regex /{}/ failed on the input: {}", where_, pattern_, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t s = ov[0], e = ov[1];
    if (s == e && last_match_end == e) {
      // onig: an empty match touching the previous match is dropped; move one character on.
      if (last_end >= text.size()) break;
      last_end += utf8_lead_length(static_cast<unsigned char>(text[last_end]));
      continue;
    }
    last_end = e;
    last_match_end = e;
    out.emplace_back(s, e);
  }
  return out;
}

std::vector<Span> Regex::spans(std::string_view text) const {
  if (text.empty()) return {Span{0, 0, false}};
  std::vector<Span> out;
  size_t prev = 0;
  for (const auto& [s, e] : find_all(text)) {
    if (prev != s) out.push_back({prev, s, false});
    out.push_back({s, e, true});
    prev = e;
  }
  if (prev != text.size()) out.push_back({prev, text.size(), false});
  return out;
}

bool Regex::full_match(std::string_view text) const {
  MatchState& st = match_state();
  const int rc =
      pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                  PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_NO_UTF_CHECK, st.data, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) fail("{}: regex /{}/ failed on the input: {}", where_, pattern_, pcre2_message(rc));
  return true;
}

std::string Regex::escape(std::string_view literal) {
  std::string out;
  out.reserve(literal.size() * 2);
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    // Any ASCII character that is not alphanumeric is taken literally once backslashed.
    const bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (u < 0x80 && !alnum && u >= 0x20) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace strata::text
