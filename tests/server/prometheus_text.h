// A strict parser of the Prometheus text exposition format (0.0.4), written for the tests:
// HELP / TYPE comments, samples `name{label="value",...} value`, label escapes, and the
// histogram rules (buckets by increasing `le`, cumulative counts, `+Inf` bucket = `_count`).
// Throws std::runtime_error naming the line on any violation.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace strata::server::testing {

struct PromSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, histogram, summary, untyped
  std::string help;
  std::vector<PromSample> samples;
};

std::map<std::string, PromFamily> parse_prometheus_text(const std::string& text);

// The value of the one sample of `name` whose labels include `labels`; throws if none or several.
double prom_value(const std::map<std::string, PromFamily>& families, const std::string& name,
                  const std::map<std::string, std::string>& labels = {});

}  // namespace strata::server::testing
