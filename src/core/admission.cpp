#include "core/admission.h"

#include <sys/resource.h>
#include <sys/statvfs.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "core/check.h"

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace strata {

namespace {

// "MemAvailable:   12345 kB" from /proc/meminfo, or a field of /proc/self/status ("VmSize:").
std::optional<uint64_t> proc_kib(const char* file, std::string_view key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str() + key.size(), " %llu", &kib) == 1) return kib * 1024ull;
  }
  return std::nullopt;
}

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

}  // namespace

ResourceLimits current_limits(const std::string& disk_path, bool query_device) {
  ResourceLimits l;
  l.host_available = proc_kib("/proc/meminfo", "MemAvailable:");
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const uint64_t used = proc_kib("/proc/self/status", "VmSize:").value_or(0);
    const uint64_t room = as.rlim_cur > used ? as.rlim_cur - used : 0;
    l.address_available = room;
    l.host_available = l.host_available ? std::min(*l.host_available, room) : room;
  }
  if (!disk_path.empty()) {
    struct statvfs st {};
    if (::statvfs(disk_path.c_str(), &st) == 0)
      l.disk_free = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }
#ifdef STRATA_HAVE_CUDA
  if (query_device) {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      l.device_free = free_b;
    } else {
      cudaGetLastError();  // no device: leave the limit unknown, the backend reports it
    }
  }
#else
  (void)query_device;
#endif
  return l;
}

std::optional<std::string> admission_failure(const ResourceNeed& need, const ResourceLimits& have,
                                             std::string_view what) {
  std::string short_of;
  auto check = [&](uint64_t needed, const std::optional<uint64_t>& avail, const std::string& name) {
    if (needed == 0 || !avail || needed <= *avail) return;
    short_of += fmt::format("{}{} of {} with {} available", short_of.empty() ? "" : "; ",
                            gib(needed), name, gib(*avail));
  };
  check(need.host_bytes, have.host_available, "host memory");
  check(need.host_bytes + need.mapped_bytes, have.address_available, "address space (RLIMIT_AS)");
  check(need.device_bytes, have.device_free, "device memory");
  check(need.disk_bytes, have.disk_free,
        need.disk_path.empty() ? std::string("disk") : "disk at " + need.disk_path);
  if (short_of.empty()) return std::nullopt;
  return fmt::format("{} does not fit: it needs {}; refusing before allocating", what, short_of);
}

void check_fits(const ResourceNeed& need, std::string_view what) {
  const ResourceLimits have = current_limits(need.disk_path, need.device_bytes > 0);
  if (auto msg = admission_failure(need, have, what)) throw Error(*msg);
}

}  // namespace strata
