// Admission before allocation: before strata loads weights, sizes caches, calibrates or writes a
// checkpoint, it states the bytes the step needs and check_fits() refuses, with the figures,
// what cannot fit, instead of growing until the kernel kills the process.
//
// The figures given should be lower bounds of the real need (what the step allocates at least):
// a refusal is then never wrong, and a step that passes can still fail later with a clean error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace strata {

struct ResourceNeed {
  uint64_t host_bytes = 0;    // anonymous host memory (vs MemAvailable and RLIMIT_AS)
  uint64_t mapped_bytes = 0;  // file mappings: address space only (vs RLIMIT_AS)
  uint64_t device_bytes = 0;  // on the current CUDA device (vs cudaMemGetInfo's free bytes)
  uint64_t disk_bytes = 0;    // new files under disk_path (vs statvfs f_bavail)
  std::string disk_path;      // a directory on the file system written to
};

struct ResourceLimits {
  std::optional<uint64_t> host_available;     // MemAvailable, capped by the RLIMIT_AS headroom
  std::optional<uint64_t> address_available;  // RLIMIT_AS minus the current address space
  std::optional<uint64_t> device_free;        // nullopt without a CUDA device
  std::optional<uint64_t> disk_free;          // nullopt when disk_path cannot be examined
};

// What this process can still get now, for the directory `disk_path` (may be empty).
// `query_device`: ask the CUDA runtime (creates a context on the current device).
ResourceLimits current_limits(const std::string& disk_path, bool query_device);

// Throws strata::Error naming `what`, each resource that does not fit, the bytes needed and the
// bytes available. A limit that is unknown (no /proc, no CUDA device) is not checked.
void check_fits(const ResourceNeed& need, std::string_view what);

// The decision alone, for tests: the message check_fits would throw, or nullopt when it fits.
std::optional<std::string> admission_failure(const ResourceNeed& need, const ResourceLimits& have,
                                             std::string_view what);

}  // namespace strata
