// Python's per-character predicates and case mappings, for the str methods and filters.
// Whitespace and printability follow CPython exactly for whitespace and closely for
// printability (control, format, separator, surrogate, private-use and noncharacter code points).
// Case mappings cover ASCII, Latin-1, Latin Extended-A and Additional, Greek (with final sigma),
// Cyrillic, Armenian and fullwidth Latin; other scripts are treated as uncased, which is where
// this can differ from CPython (documented limitation: chat templates lower/upper role names).
#pragma once

#include <string>

namespace strata::jinja::uni {

bool is_space(char32_t c);      // str.isspace / str.strip() / str.split() whitespace
bool is_printable(char32_t c);  // str.isprintable, decides escaping in repr()
bool is_linebreak(char32_t c);  // str.splitlines boundaries (\r\n handled by the caller)
bool is_decimal(char32_t c);
bool is_alpha(char32_t c);
bool is_cased(char32_t c);
bool is_lower(char32_t c);
bool is_upper(char32_t c);

// Full mappings: some characters map to two (German sharp s -> "SS").
void append_upper(std::u32string& out, char32_t c);
void append_lower(std::u32string& out, char32_t c);
void append_title(std::u32string& out, char32_t c);

// str.lower() of a whole string, applying Greek final-sigma the way CPython does.
std::u32string lower(const std::u32string& s);
std::u32string upper(const std::u32string& s);

}  // namespace strata::jinja::uni
