#include "model/nemotron_h/load_report.h"

#include <fmt/format.h>

#include <fstream>
#include <string>

namespace strata::model {

size_t peak_resident_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    try {
      return static_cast<size_t>(std::stoull(line.substr(6))) * 1024;  // "VmHWM:   1234 kB"
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

std::string LoadReport::text() const {
  auto mib = [](size_t b) { return static_cast<double>(b) / 1048576.0; };
  std::string s = fmt::format("load: {} on {}: {} tensors\n", source, device, tensors);
  s += fmt::format(
      "load: host mapped {:.1f} MiB, host copies {:.1f} MiB, host resident peak {:.1f} MiB "
      "(VmHWM)\n",
      mib(host_mapped_bytes), mib(host_copied_bytes), mib(host_resident_peak));
  if (device != "host")
    s += fmt::format(
        "load: device weights {:.1f} MiB ({:.1f} MiB generated there, {:.1f} MiB uploaded, staging "
        "peak {:.1f} MiB)\n",
        mib(device_bytes), mib(device_generated_bytes), mib(device_uploaded_bytes),
        mib(staging_peak));
  std::string p;
  double total = 0;
  for (const auto& [name, sec] : phases) {
    p += fmt::format("{}{} {:.3f} s", p.empty() ? "" : ", ", name, sec);
    total += sec;
  }
  s += fmt::format("load: {} (total {:.3f} s)\n", p.empty() ? "no phases" : p, total);
  return s;
}

}  // namespace strata::model
