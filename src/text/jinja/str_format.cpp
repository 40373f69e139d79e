#include "text/jinja/str_format.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>

#include "text/jinja/access.h"
#include "text/jinja/error.h"
#include "text/jinja/py_format.h"
#include "text/jinja/utf8.h"

namespace strata::jinja {
namespace {

struct Spec {
  char fill = ' ';
  char align = '\0';  // < > ^ =
  char sign = '-';
  bool alt = false;
  bool zero = false;
  int width = -1;
  int precision = -1;
  char grouping = '\0';
  char type = '\0';
};

std::string pad(const std::string& body, const Spec& s, char default_align) {
  const auto len = static_cast<int>(utf8::length(body));
  if (s.width <= len) return body;
  const int total = s.width - len;
  const char align = s.align ? s.align : default_align;
  int left = align == '>' ? total : align == '^' ? total / 2 : 0;
  if (align == '=') {  // padding after the sign
    const size_t at = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    return body.substr(0, at) + std::string(static_cast<size_t>(total), s.fill) + body.substr(at);
  }
  return std::string(static_cast<size_t>(left), s.fill) + body +
         std::string(static_cast<size_t>(total - left), s.fill);
}

std::string c_format(const std::string& spec, double d) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), spec.c_str(), d);
  return buf;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

std::string format_int(int64_t v, const Spec& s) {
  const bool neg = v < 0;
  const uint64_t mag = neg ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits;
  const char type = s.type ? s.type : 'd';
  switch (type) {
    case 'd':
    case 'n':
      digits = std::to_string(mag);
      if (s.grouping) digits = group_digits(digits, s.grouping);
      break;
    case 'x':
      digits = fmt::format("{:x}", mag);
      if (s.alt) digits = "0x" + digits;
      break;
    case 'X':
      digits = fmt::format("{:X}", mag);
      if (s.alt) digits = "0X" + digits;
      break;
    case 'o':
      digits = fmt::format("{:o}", mag);
      if (s.alt) digits = "0o" + digits;
      break;
    case 'b':
      digits = fmt::format("{:b}", mag);
      if (s.alt) digits = "0b" + digits;
      break;
    default:
      runtime_error(fmt::format("Unknown format code '{}' for object of type 'int'", type));
  }
  std::string sign = neg ? "-" : s.sign == '+' ? "+" : s.sign == ' ' ? " " : "";
  Spec p = s;
  if (s.zero && !s.align) {
    p.fill = '0';
    p.align = '=';
  }
  return pad(sign + digits, p, '>');
}

std::string format_float(double d, const Spec& s) {
  std::string body;
  const char type = s.type;
  if (type == '\0' && s.precision < 0) {
    body = float_repr(d);
  } else {
    const int prec = s.precision < 0 ? 6 : s.precision;
    char t = type ? type : 'g';
    if (t == '%') {
      body = c_format(fmt::format("%.{}f", prec), d * 100) + "%";
    } else if (t == 'f' || t == 'F' || t == 'e' || t == 'E' || t == 'g' || t == 'G') {
      body = c_format(fmt::format("%{}.{}{}", s.alt ? "#" : "", prec, t), d);
    } else {
      runtime_error(fmt::format("Unknown format code '{}' for object of type 'float'", t));
    }
    if (std::isnan(d)) body = (t == 'F' || t == 'E' || t == 'G') ? "NAN" : "nan";
    if (std::isinf(d))
      body = std::string(d < 0 ? "-" : "") + ((t == 'F' || t == 'E' || t == 'G') ? "INF" : "inf");
  }
  if (s.sign != '-' && !body.empty() && body[0] != '-') body = std::string(1, s.sign) + body;
  Spec p = s;
  if (s.zero && !s.align) {
    p.fill = '0';
    p.align = '=';
  }
  return pad(body, p, '>');
}

Spec parse_spec(const std::string& text) {
  Spec s;
  size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (text.size() >= 2 && is_align(text[1])) {
    s.fill = text[0];
    s.align = text[1];
    i = 2;
  } else if (!text.empty() && is_align(text[0])) {
    s.align = text[0];
    i = 1;
  }
  if (i < text.size() && (text[i] == '+' || text[i] == '-' || text[i] == ' ')) s.sign = text[i++];
  if (i < text.size() && text[i] == '#') {
    s.alt = true;
    ++i;
  }
  if (i < text.size() && text[i] == '0') {
    s.zero = true;
    ++i;
  }
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
    s.width = std::max(s.width, 0) * 10 + (text[i++] - '0');
  if (i < text.size() && (text[i] == ',' || text[i] == '_')) s.grouping = text[i++];
  if (i < text.size() && text[i] == '.') {
    ++i;
    s.precision = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])))
      s.precision = s.precision * 10 + (text[i++] - '0');
  }
  if (i < text.size()) s.type = text[i++];
  if (i != text.size()) runtime_error(fmt::format("Invalid format specifier '{}'", text));
  return s;
}

std::string format_value(const Value& v, const std::string& spec_text) {
  if (spec_text.empty()) return to_str(v);
  const Spec s = parse_spec(spec_text);
  if (v.kind() == Kind::Float ||
      (v.is_int_like() && s.type && std::string("eEfFgG%").find(s.type) != std::string::npos))
    return format_float(v.as_float(), s);
  if (v.is_int_like()) return format_int(v.as_int(), s);
  if (v.is_string()) {
    if (s.type && s.type != 's')
      runtime_error(fmt::format("Unknown format code '{}' for object of type 'str'", s.type));
    std::string text = v.str();
    if (s.precision >= 0) {
      const std::u32string cps = utf8::decode(text);
      text = utf8::encode(cps.substr(0, static_cast<size_t>(s.precision)));
    }
    return pad(text, s, '<');
  }
  runtime_error(fmt::format("unsupported format string passed to {}.__format__", type_name(v)));
}

}  // namespace

std::string python_percent_format(const std::string& format, const Value& args) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_seq(Seq::Tuple)) {
    positional = args.items();
  } else if (args.is_dict()) {
    mapping = &args.dict();
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) runtime_error("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  size_t i = 0;
  bool used_mapping = false;
  while (i < format.size()) {
    const char c = format[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= format.size()) runtime_error("incomplete format");
    const Value* arg = nullptr;
    if (format[i] == '(') {
      const size_t close = format.find(')', i);
      if (close == std::string::npos) runtime_error("incomplete format key");
      if (!mapping) runtime_error("format requires a mapping");
      const Value* v = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (!v) runtime_error(fmt::format("KeyError: '{}'", format.substr(i + 1, close - i - 1)));
      arg = v;
      used_mapping = true;
      i = close + 1;
    }
    Spec s;
    s.align = '>';
    while (i < format.size() && std::string("#0- +").find(format[i]) != std::string::npos) {
      const char f = format[i++];
      if (f == '-') s.align = '<';
      if (f == '0') s.zero = true;
      if (f == '+' || f == ' ') s.sign = f;
      if (f == '#') s.alt = true;
    }
    if (i < format.size() && format[i] == '*') {
      s.width = static_cast<int>(take().as_int());
      ++i;
    }
    while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
      s.width = std::max(s.width, 0) * 10 + (format[i++] - '0');
    if (i < format.size() && format[i] == '.') {
      ++i;
      s.precision = 0;
      while (i < format.size() && std::isdigit(static_cast<unsigned char>(format[i])))
        s.precision = s.precision * 10 + (format[i++] - '0');
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L'))
      ++i;
    if (i >= format.size()) runtime_error("incomplete format");
    const char type = format[i++];
    if (type == '%') {
      out += '%';
      continue;
    }
    const Value& v = arg ? *arg : take();
    if (s.zero && s.align == '>') s.align = '\0';
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string text = type == 's' ? to_str(v) : repr(v);
        if (s.precision >= 0)
          text = utf8::encode(utf8::decode(text).substr(0, static_cast<size_t>(s.precision)));
        Spec p = s;
        p.zero = false;
        out += pad(text, p, '>');
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o': {
        if (!v.is_number())
          runtime_error(
              fmt::format("%{} format: a real number is required, not {}", type, type_name(v)));
        s.type = (type == 'i' || type == 'u') ? 'd' : type;
        const int64_t n =
            v.is_int_like() ? v.as_int() : static_cast<int64_t>(std::trunc(v.as_float()));
        out += format_int(n, s);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!v.is_number()) runtime_error(fmt::format("must be real number, not {}", type_name(v)));
        s.type = type;
        if (s.precision < 0) s.precision = 6;
        out += format_float(v.as_float(), s);
        break;
      case 'c':
        if (v.is_int_like()) {
          utf8::append(out, static_cast<char32_t>(v.as_int()));
        } else if (v.is_string() && utf8::length(v.str()) == 1) {
          out += v.str();
        } else {
          runtime_error("%c requires int or char");
        }
        break;
      default:
        runtime_error(fmt::format("unsupported format character '{}'", type));
    }
  }
  if (!used_mapping && !mapping && next < positional.size())
    runtime_error("not all arguments converted during string formatting");
  return out;
}

std::string python_str_format(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t i = 0;
  size_t auto_index = 0;
  while (i < format.size()) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      runtime_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) runtime_error("expected '}' before end of string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string spec;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    char conversion = '\0';
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) runtime_error("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    size_t name_end = field.find_first_of(".[");
    const std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty()) {
      if (auto_index >= args.args.size())
        runtime_error(
            fmt::format("Replacement index {} out of range for positional args tuple", auto_index));
      v = args.args[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      const size_t k = std::stoul(head);
      if (k >= args.args.size())
        runtime_error(
            fmt::format("Replacement index {} out of range for positional args tuple", k));
      v = args.args[k];
    } else {
      bool found = false;
      for (const auto& [key, value] : args.kwargs) {
        if (key == head) {
          v = value;
          found = true;
        }
      }
      if (!found) runtime_error(fmt::format("KeyError: '{}'", head));
    }
    while (name_end != std::string::npos && name_end < field.size()) {
      if (field[name_end] == '.') {
        const size_t next = field.find_first_of(".[", name_end + 1);
        v = getattr(v, field.substr(name_end + 1, next == std::string::npos ? std::string::npos
                                                                            : next - name_end - 1));
        name_end = next;
      } else {
        const size_t rb = field.find(']', name_end);
        if (rb == std::string::npos) runtime_error("Missing ']' in format string");
        const std::string key = field.substr(name_end + 1, rb - name_end - 1);
        const bool numeric =
            !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = getitem(v, numeric ? Value::integer(std::stoll(key)) : Value::string(key));
        name_end = rb + 1;
      }
    }
    if (v.is_undefined()) runtime_error(v.undefined_message());
    if (conversion == 'r' || conversion == 'a') {
      v = Value::string(repr(v));
    } else if (conversion == 's') {
      v = Value::string(to_str(v));
    } else if (conversion) {
      runtime_error(fmt::format("Unknown conversion specifier {}", conversion));
    }
    out += format_value(v, spec);
  }
  return out;
}

}  // namespace strata::jinja
