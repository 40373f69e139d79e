// Shell-style wildcard matching of module names, as Python's fnmatch.fnmatchcase (which vLLM
// uses for ModelOpt's exclude_modules): '*' matches any run of characters (dots included),
// '?' one character, "[abc]" / "[a-z]" / "[!abc]" one character in / not in a set; a '[' without
// a closing ']' is a literal. Case-sensitive.
#pragma once

#include <string_view>

namespace strata::io {

bool glob_match(std::string_view pattern, std::string_view name);

}  // namespace strata::io
