// The load report (DESIGN principle 4): every byte a load touched and where it went, and the
// seconds of each phase. Printed by `strata inspect --load DIR` and, at info level, when
// generate starts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::model {

struct LoadReport {
  std::string source;            // the directory, or "dummy <preset/config>"
  std::string device;            // where the weights run
  int64_t tensors = 0;           // tensors the model uses
  size_t host_mapped_bytes = 0;  // checkpoint files mapped (read-only, shared with the page cache)
  size_t host_copied_bytes =
      0;  // host copies made (dtype conversions, A = -exp(A_log), dummy tensors)
  size_t host_resident_peak = 0;      // peak resident set of the process (VmHWM) after loading
  size_t device_bytes = 0;            // weight bytes on the device
  size_t device_generated_bytes = 0;  // of which generated there (dummy weights)
  size_t device_uploaded_bytes = 0;   // of which copied from the host
  size_t staging_peak = 0;            // largest staging buffer of the upload
  std::vector<std::pair<std::string, double>> phases;  // (phase, seconds) in order

  void phase(const std::string& name, double seconds) { phases.emplace_back(name, seconds); }
  std::string text() const;  // several lines, "load: ..." each
};

// The process's peak resident set (VmHWM of /proc/self/status) in bytes; 0 when unreadable.
size_t peak_resident_bytes();

}  // namespace strata::model
