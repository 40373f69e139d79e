#include "text/tokenizer_unicode_norm.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include "core/check.h"

namespace strata::text {

namespace {

class FormNormalizer final : public Normalizer {
 public:
  FormNormalizer(const icu::Normalizer2* n, std::string name) : n_(n), name_(std::move(name)) {}
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    icu::StringByteSink<std::string> sink(&out);
    UErrorCode status = U_ZERO_ERROR;
    n_->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink,
                      nullptr, status);
    if (U_FAILURE(status)) fail("{} normalizer: ICU failed: {}", name_, u_errorName(status));
    text = std::move(out);
  }

 private:
  const icu::Normalizer2* n_;  // ICU's singleton, never freed
  std::string name_;
};

// Calls fn(code point) for each code point of valid UTF-8 `s`.
template <class Fn>
void for_each_code_point(const std::string& s, Fn fn) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const int32_t n = static_cast<int32_t>(s.size());
  for (int32_t i = 0; i < n;) {
    UChar32 c;
    U8_NEXT(p, i, n, c);
    fn(c < 0 ? 0xFFFD : c);  // < 0 only for invalid input, which encode never passes
  }
}

void append_utf8(std::string& out, UChar32 c) {
  uint8_t buf[U8_MAX_LENGTH];
  int32_t len = 0;
  U8_APPEND_UNSAFE(buf, len, c);  // c is a scalar value: from valid UTF-8 or ICU's case maps
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(len));
}

class LowercaseNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for_each_code_point(text, [&](UChar32 c) {
      if (c == 0x0130) {  // the one unconditional multi-character lowercase (SpecialCasing.txt)
        out += "i\xCC\x87";
      } else {
        append_utf8(out, u_tolower(c));
      }
    });
    text = std::move(out);
  }
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size());
    for_each_code_point(text, [&](UChar32 c) {
      if ((U_GET_GC_MASK(c) & U_GC_M_MASK) == 0) append_utf8(out, c);
    });
    text = std::move(out);
  }
};

const icu::Normalizer2* form(std::string_view type, const std::string& where) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (type == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  if (type == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  if (type == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  if (type == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  if (n && U_FAILURE(status))
    fail("{}: ICU cannot provide the {} normalizer: {}", where, type, u_errorName(status));
  return n;
}

}  // namespace

std::unique_ptr<Normalizer> make_unicode_normalizer(std::string_view type,
                                                    const std::string& where) {
  if (const icu::Normalizer2* n = form(type, where))
    return std::make_unique<FormNormalizer>(n, std::string(type));
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  return nullptr;
}

}  // namespace strata::text
