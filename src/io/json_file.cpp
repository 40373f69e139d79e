#include "io/json_file.h"

#include <fstream>

#include "core/check.h"

namespace strata::io {

void write_json_file(const std::string& path, const nlohmann::json& value) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("{}: cannot open for writing", path);
  out << value.dump(2) << "\n";
  out.flush();
  if (!out) fail("{}: write failed", path);
}

}  // namespace strata::io
