// Reading files and stdin that come from outside, with bounds. Only a regular file is read (a
// FIFO would hang, /dev/zero would grow without end, a directory reads as nothing), never more
// than a stated number of bytes; every error names the file, what it was read as and the limit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::io {

// Size caps for the small files strata reads as text. Each is far above what a released model
// ships (Nemotron-H config.json ~ 3 KB, tokenizer.json ~ 17 MB, tokenizer_config.json with its
// chat template ~ 200 KB) and far below what the machine holds.
inline constexpr uint64_t kConfigMaxBytes = 16ull << 20;      // config.json, generation_config.json
inline constexpr uint64_t kTokenizerMaxBytes = 512ull << 20;  // tokenizer.json
inline constexpr uint64_t kTemplateMaxBytes = 16ull << 20;  // chat templates, tokenizer_config.json
inline constexpr uint64_t kIndexMaxBytes = 256ull << 20;    // model.safetensors.index.json
inline constexpr uint64_t kStdinMaxBytes = 64ull << 20;     // a request or id list on stdin

// The whole of the regular file at `path` (symlinks to regular files are followed). `what`
// says what the file is read as ("config", "tokenizer", "chat template"). Throws strata::Error
// when the path is not a regular file, is larger than `max_bytes`, or cannot be read.
std::string read_regular_file(const std::string& path, std::string_view what, uint64_t max_bytes);

// All of standard input as text for `what` ("the request", "the id list"). Refuses a directory,
// more than `max_bytes`, a NUL byte and invalid UTF-8, naming the byte offset.
std::string read_stdin_text(std::string_view what, uint64_t max_bytes);

// "16 MiB", "1.5 GiB": byte counts in messages.
std::string format_bytes(uint64_t bytes);

}  // namespace strata::io
