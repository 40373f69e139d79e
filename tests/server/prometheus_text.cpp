#include "prometheus_text.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace strata::server::testing {

namespace {

[[noreturn]] void bad(size_t line_no, const std::string& line, const std::string& why) {
  throw std::runtime_error("prometheus text line " + std::to_string(line_no) + ": " + why +
                           ": " + line.substr(0, 200));
}

bool name_char(char c, bool first, bool colon_ok) {
  if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') return true;
  if (colon_ok && c == ':') return true;
  return !first && std::isdigit(static_cast<unsigned char>(c));
}

std::string read_name(const std::string& s, size_t& i, bool colon_ok) {
  size_t start = i;
  while (i < s.size() && name_char(s[i], i == start, colon_ok)) ++i;
  return s.substr(start, i - start);
}

double parse_value(const std::string& v, size_t line_no, const std::string& line) {
  if (v == "+Inf" || v == "Inf") return INFINITY;
  if (v == "-Inf") return -INFINITY;
  if (v == "NaN") return NAN;
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size()) bad(line_no, line, "bad value \"" + v + "\"");
  return d;
}

// The family a sample belongs to (histogram suffixes stripped when that family is declared).
std::string family_of(const std::string& name, const std::map<std::string, PromFamily>& fams) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      std::string base = name.substr(0, name.size() - s.size());
      auto it = fams.find(base);
      if (it != fams.end() && (it->second.type == "histogram" || it->second.type == "summary"))
        return base;
    }
  }
  return name;
}

void check_histogram(const std::string& name, const PromFamily& f) {
  // Group by the labels other than `le`.
  std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
  std::map<std::map<std::string, std::string>, double> counts;
  for (const auto& s : f.samples) {
    auto labels = s.labels;
    if (s.name == name + "_bucket") {
      auto le = labels.find("le");
      if (le == labels.end()) throw std::runtime_error(name + ": a bucket without le");
      double bound = le->second == "+Inf" ? INFINITY : std::strtod(le->second.c_str(), nullptr);
      labels.erase(le);
      buckets[labels].emplace_back(bound, s.value);
    } else if (s.name == name + "_count") {
      counts[labels] = s.value;
    }
  }
  if (buckets.empty()) throw std::runtime_error(name + ": a histogram without buckets");
  for (const auto& [labels, bs] : buckets) {
    for (size_t i = 1; i < bs.size(); ++i) {
      if (!(bs[i].first > bs[i - 1].first))
        throw std::runtime_error(name + ": bucket bounds not increasing");
      if (bs[i].second < bs[i - 1].second)
        throw std::runtime_error(name + ": bucket counts not cumulative");
    }
    if (!std::isinf(bs.back().first)) throw std::runtime_error(name + ": no +Inf bucket");
    auto c = counts.find(labels);
    if (c == counts.end()) throw std::runtime_error(name + ": no _count");
    if (c->second != bs.back().second)
      throw std::runtime_error(name + ": +Inf bucket differs from _count");
  }
}

}  // namespace

std::map<std::string, PromFamily> parse_prometheus_text(const std::string& text) {
  std::map<std::string, PromFamily> fams;
  std::istringstream in(text);
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream ls(line);
      std::string hash, kind, name;
      ls >> hash >> kind >> name;
      if (kind != "HELP" && kind != "TYPE") continue;  // other comments are allowed
      size_t i = 0;
      if (read_name(name, i, true) != name || name.empty()) bad(line_no, line, "bad metric name");
      std::string rest;
      std::getline(ls, rest);
      if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
      auto& f = fams[name];
      if (kind == "TYPE") {
        if (!f.type.empty()) bad(line_no, line, "second TYPE for " + name);
        if (!f.samples.empty()) bad(line_no, line, "TYPE after samples of " + name);
        static const char* types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
        bool ok = false;
        for (const char* t : types) ok = ok || rest == t;
        if (!ok) bad(line_no, line, "unknown type");
        f.type = rest;
      } else {
        f.help = rest;
      }
      continue;
    }
    PromSample s;
    size_t i = 0;
    s.name = read_name(line, i, true);
    if (s.name.empty()) bad(line_no, line, "no metric name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::string key = read_name(line, i, false);
        if (key.empty() || i >= line.size() || line[i] != '=') bad(line_no, line, "bad label");
        ++i;
        if (i >= line.size() || line[i] != '"') bad(line_no, line, "unquoted label value");
        ++i;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            ++i;
            if (i >= line.size()) bad(line_no, line, "dangling escape");
            if (line[i] == 'n') value += '\n';
            else if (line[i] == '\\' || line[i] == '"') value += line[i];
            else bad(line_no, line, "bad escape");
          } else {
            value += line[i];
          }
          ++i;
        }
        if (i >= line.size()) bad(line_no, line, "unterminated label value");
        ++i;
        if (s.labels.count(key)) bad(line_no, line, "duplicate label " + key);
        s.labels[key] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) bad(line_no, line, "unterminated labels");
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') bad(line_no, line, "no space before the value");
    std::string rest = line.substr(i + 1);
    std::string value = rest.substr(0, rest.find(' '));
    s.value = parse_value(value, line_no, line);
    const std::string family = family_of(s.name, fams);
    auto& f = fams[family];
    if (f.type.empty()) f.type = "untyped";
    if (f.type == "counter" && s.value < 0) bad(line_no, line, "negative counter");
    f.samples.push_back(std::move(s));
  }
  for (const auto& [name, f] : fams)
    if (f.type == "histogram") check_histogram(name, f);
  return fams;
}

double prom_value(const std::map<std::string, PromFamily>& families, const std::string& name,
                  const std::map<std::string, std::string>& labels) {
  const PromSample* found = nullptr;
  for (const auto& [fname, f] : families)
    for (const auto& s : f.samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : labels) {
        auto it = s.labels.find(k);
        match = match && it != s.labels.end() && it->second == v;
      }
      if (!match) continue;
      if (found) throw std::runtime_error("several samples of " + name);
      found = &s;
    }
  if (!found) throw std::runtime_error("no sample of " + name);
  return found->value;
}

}  // namespace strata::server::testing
