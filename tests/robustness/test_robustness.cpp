// Issue 12 part 6: the robustness suite. Every case of tests/robustness/cases.txt runs the real
// strata binary on a bad input in a scratch directory and must end with
//   - the expected exit code and no signal, within the time limit;
//   - one clearly marked reason: the last stderr line starts "strata: error: " and contains the
//     case's needle, and it is the only such line (log lines may come before it once a model
//     loaded; nothing like "terminate called" or a sanitizer report may appear);
//   - peak memory under the case's RLIMIT_AS (the run is made under it, and ru_maxrss checked);
//   - nothing in the scratch directory changed except the case's output path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runner.h"

namespace strata::robustness {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = STRATA_SOURCE_DIR;

struct Case {
  int line = 0;
  std::string name, needle, stdin_name, stdout_kind, out;
  int rc = 1;
  uint64_t mem_mib = 4096;  // room for the CUDA libraries a CUDA build maps
  std::vector<std::string> args;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep))
    out.push_back(cur);
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.pop_back();
  size_t b = 0;
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t'))
    ++b;
  return s.substr(b);
}

// "name | rc | needle | options | args": options are space-separated key=value
// (stdin=NAME, stdout=full, out=NAME, mem=MiB); args are space-separated, {s} is the scratch dir.
std::vector<Case> load_cases() {
  std::ifstream in(kSource / "tests/robustness/cases.txt");
  std::vector<Case> cases;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    const auto f = split(line, '|');
    if (f.size() != 5) throw std::runtime_error("cases.txt line " + std::to_string(n));
    Case c;
    c.line = n;
    c.name = trim(f[0]);
    c.rc = std::stoi(trim(f[1]));
    c.needle = trim(f[2]);
    for (const auto& opt : split(trim(f[3]), ' ')) {
      if (opt.empty() || opt == "-") continue;
      const size_t eq = opt.find('=');
      const std::string k = opt.substr(0, eq), v = opt.substr(eq + 1);
      if (k == "stdin")
        c.stdin_name = v;
      else if (k == "stdout")
        c.stdout_kind = v;
      else if (k == "out")
        c.out = v;
      else if (k == "mem")
        c.mem_mib = std::stoull(v);
      else
        throw std::runtime_error("cases.txt line " + std::to_string(n) + ": option " + k);
    }
    for (const auto& a : split(trim(f[4]), ' '))
      if (!a.empty()) c.args.push_back(a);
    cases.push_back(std::move(c));
  }
  return cases;
}

void write_file(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The scratch directory every case runs in: copies of small fixtures and the bad inputs the
// table names. Built once; each case must leave it as it found it (outside its output path).
void build_scratch(const fs::path& s) {
  const fs::path hand = kSource / "tests/fixtures/tokenizers_handmade";
  const fs::path golden = kSource / "tests/fixtures/golden/dense_f32_pattern";
  fs::copy(hand / "gpt2_mini", s / "tok");
  fs::create_directories(s / "model");
  fs::copy(golden / "config.json", s / "model/config.json");
  fs::copy(golden / "model.safetensors", s / "model/model.safetensors");
  const std::string tok = read_file(hand / "gpt2_mini/tokenizer.json");
  const std::string cfg = read_file(golden / "config.json");

  // JSON that nests too deep, repeats a key, is not JSON, or is not UTF-8.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  write_file(s / "deep.json", deep);
  write_file(s / "deep_request.json", "{\"messages\": " + deep + "}");
  write_file(s / "dup_request.json",
             R"({"messages": [], "messages": [{"role": "user", "content": "x"}]})");
  write_file(s / "not_json.txt", "this is not JSON");
  write_file(s / "bad_utf8.txt", "caf\xC3\x28 au lait");
  write_file(s / "nul.txt", std::string("a\0b", 3));
  write_file(s / "ids_deep.json", deep);
  write_file(s / "ids_nested.json", "[[1]]");
  write_file(s / "ids_negative.json", "[1, -5]");
  write_file(s / "ids_huge.json", "[99999999999999999999]");
  write_file(s / "ids_string.json", "[\"1\"]");
  write_file(s / "ids_object.json", "{\"ids\": [1]}");
  write_file(s / "ids_dup.json", "[1, {\"a\": 1, \"a\": 2}]");
  write_file(s / "ids_float.json", "[1.5]");
  write_file(s / "ids_oov.json", "[99999]");
  write_file(s / "jsonl_bad.txt", "\"ok\"\n{\"a\": 1, \"a\": 2}\n");
  write_file(s / "jsonl_deep.txt", "\"ok\"\n" + deep + "\n");
  write_file(s / "request_ok.json", R"({"messages": [{"role": "user", "content": "hi"}]})");
  write_file(s / "request_not_object.json", "[1, 2]");
  write_file(s / "request_no_messages.json", "{}");
  write_file(s / "request_bad_gen.json", R"({"messages": [], "add_generation_prompt": "yes"})");
  write_file(
      s / "request_bad_args.json",
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\": 1, \"a\": 2}"}}]}]})");
  write_file(s / "request_surrogate.json",
             R"({"messages": [{"role": "user", "content": "\ud800"}]})");
  write_file(s / "text.txt", "hello world");

  // Special files where regular ones are expected.
  ::mkfifo((s / "fifo").c_str(), 0600);
  fs::create_directory(s / "adir");
  fs::create_symlink("/dev/zero", s / "zero");
  write_file(s / "victim.txt", "must not change");
  fs::create_symlink(s / "victim.txt", s / "link_out.npy");
  ::mkfifo((s / "fifo_out.npy").c_str(), 0600);
  fs::create_directory(s / "dir_out.npy");
  write_file(s / "x.npy.tmp", "an unrelated file");  // the old fixed temporary name
  {  // 17 MiB sparse: one byte over every text file's cap but the tokenizer's
    std::ofstream big(s / "big.json", std::ios::binary);
    big.seekp((17 << 20) - 1);
    big.put(' ');
  }

  // Model and tokenizer directories that are broken one way each.
  const auto model_with = [&](const std::string& name, const std::string& config) {
    fs::create_directories(s / name);
    write_file(s / name / "config.json", config);
    fs::copy(golden / "model.safetensors", s / name / "model.safetensors");
  };
  model_with("m_deep", deep);
  model_with("m_dup", "{\"hidden_size\": 64, " + cfg.substr(1));
  model_with("m_notjson", "{ \"hidden_size\": ");
  model_with("m_hidden_huge",
             replace_all(cfg, "\"hidden_size\": 48", "\"hidden_size\": 1099511627776"));
  model_with("m_neg_vocab", replace_all(cfg, "\"vocab_size\": ", "\"vocab_size\": -"));
  model_with("m_utf8", cfg.substr(0, cfg.size() - 2) + ", \"x\": \"\xFF\"}");
  fs::create_directories(s / "m_fifo");
  ::mkfifo((s / "m_fifo/config.json").c_str(), 0600);
  fs::create_directories(s / "m_zero");
  fs::create_symlink("/dev/zero", s / "m_zero/config.json");
  fs::create_directories(s / "m_dirconfig/config.json");
  fs::create_directories(s / "m_big");
  fs::copy(s / "big.json", s / "m_big/config.json");
  fs::create_directories(s / "m_noweights");
  write_file(s / "m_noweights/config.json", cfg);
  model_with("m_ctx8", replace_all(cfg, "\"max_position_embeddings\": 4096",
                                   "\"max_position_embeddings\": 8"));
  fs::create_directories(s / "m_fifo_weights");
  write_file(s / "m_fifo_weights/config.json", cfg);
  ::mkfifo((s / "m_fifo_weights/model.safetensors").c_str(), 0600);
  fs::create_directories(s / "m_zero_weights");
  write_file(s / "m_zero_weights/config.json", cfg);
  fs::create_symlink("/dev/zero", s / "m_zero_weights/model.safetensors");
  {  // NaN weights: the final norm's first element, so every logit row is NaN.
    model_with("m_nan", cfg);
    std::string w = read_file(s / "m_nan/model.safetensors");
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; --i)
      hlen = (hlen << 8) | static_cast<unsigned char>(w[static_cast<size_t>(i)]);
    const auto header = nlohmann::json::parse(w.substr(8, hlen));
    const uint64_t at =
        8 + hlen + header.at("backbone.norm_f.weight").at("data_offsets")[0].get<uint64_t>();
    const uint32_t nan_bits = 0x7fc00000u;  // f32 quiet NaN
    for (int i = 0; i < 4; ++i)
      w[at + static_cast<uint64_t>(i)] = static_cast<char>((nan_bits >> (8 * i)) & 0xff);
    write_file(s / "m_nan/model.safetensors", w);
  }
  model_with("m_badgen", cfg);
  write_file(s / "m_badgen/generation_config.json",
             "{\"eos_token_id\": [1, 2], \"eos_token_id\": 3}");

  const auto tok_with = [&](const std::string& name, const std::string& json) {
    write_file(s / name / "tokenizer.json", json);
  };
  nlohmann::json bigid = nlohmann::json::parse(tok);
  bigid["added_tokens"] = {{{"id", 1000000000}, {"content", "<big>"}, {"special", true}}};
  tok_with("t_bigid", bigid.dump());
  tok_with("t_deep", deep);
  tok_with("t_dup", "{\"model\": 1, " + tok.substr(1));
  tok_with("t_notjson", "{\"model\": ");
  tok_with("t_utf8", "{\"x\": \"\xC0\xAF\"}");
  nlohmann::json norm = nlohmann::json::parse(tok);
  norm["normalizer"] = {{"type", "Precompiled"}};
  tok_with("t_norm", norm.dump());
  fs::create_directories(s / "t_fifo");
  ::mkfifo((s / "t_fifo/tokenizer.json").c_str(), 0600);
  fs::create_directories(s / "t_zero");
  fs::create_symlink("/dev/zero", s / "t_zero/tokenizer.json");
  fs::create_directories(s / "t_dir/tokenizer.json");
  fs::copy(hand / "gpt2_mini", s / "t_badcfg");
  write_file(s / "t_badcfg/tokenizer_config.json", deep);

  // Chat template directories.
  write_file(
      s / "chat/tokenizer_config.json",
      R"({"chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}", "bos_token": "<s>"})");
  write_file(s / "chat_dup/tokenizer_config.json",
             R"({"chat_template": "a", "chat_template": "b"})");
  fs::create_directories(s / "chat_fifo");
  ::mkfifo((s / "chat_fifo/chat_template.jinja").c_str(), 0600);
  write_file(s / "chat_fifo/tokenizer_config.json", "{}");
  write_file(s / "loop.jinja", "{% for i in range(100000000) %}{{ i }}{% endfor %}");

  // Configs for dummy weights.
  write_file(s / "cfg_hidden_1e6.json",
             replace_all(cfg, "\"hidden_size\": 48", "\"hidden_size\": 1000000"));
  write_file(s / "cfg_deep.json", deep);
  write_file(s / "cfg_dup.json", "{\"vocab_size\": 1, " + cfg.substr(1));
  write_file(s / "cfg_ok.json", cfg);
}

// Relative path -> what it is (type, size, mtime, and the bytes of small regular files).
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    std::string v = std::to_string(st.st_mode) + ":" + std::to_string(st.st_size) + ":" +
                    std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode) && st.st_size < (1 << 16)) v += ":" + read_file(it->path());
    out[fs::relative(it->path(), root).string()] = v;
  }
  return out;
}

class Robustness : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/strata-robustness-XXXXXX";
    scratch_ = ::mkdtemp(tmpl);
    build_scratch(scratch_);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(scratch_, ec);
  }
  static fs::path scratch_;
};
fs::path Robustness::scratch_;

TEST_F(Robustness, EveryBadInputIsRefusedCleanly) {
  const std::vector<Case> cases = load_cases();
  ASSERT_GE(cases.size(), 100u);
  std::map<std::string, int> per_command;
  size_t checked = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("cases.txt:" + std::to_string(c.line) + " " + c.name);
    RunSpec spec;
    spec.argv.push_back(STRATA_BINARY);
    for (const auto& a : c.args)
      spec.argv.push_back(replace_all(a, "{s}", scratch_.string()));
    spec.cwd = scratch_.string();
    if (!c.stdin_name.empty()) spec.stdin_path = (scratch_ / c.stdin_name).string();
    if (c.stdout_kind == "full") spec.stdout_path = "/dev/full";
    if (c.stdout_kind == "closed") spec.stdout_path = "|closed";
    spec.address_space_bytes = c.mem_mib << 20;
    const std::string needle = replace_all(c.needle, "{s}", scratch_.string());
    const auto before = snapshot(scratch_);
    const RunResult r = run(spec);
    auto after = snapshot(scratch_);

    EXPECT_FALSE(r.timed_out);
    EXPECT_FALSE(r.signaled) << "signal " << r.signal << "\n" << r.err;
    EXPECT_EQ(r.exit_code, c.rc) << r.err;
    EXPECT_LE(r.max_rss_bytes, c.mem_mib << 20);
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
    if (c.rc != 0) {
      // The reason: one marked line, the last, naming the cause.
      ASSERT_FALSE(r.err.empty());
      EXPECT_EQ(r.err.back(), '\n') << r.err;
      const std::string body = r.err.substr(0, r.err.size() - 1);
      const std::string last =
          body.substr(body.rfind('\n') == std::string::npos ? 0 : body.rfind('\n') + 1);
      EXPECT_EQ(last.rfind("strata: error: ", 0), 0u) << r.err;
      EXPECT_NE(last.find(needle), std::string::npos) << "needle: " << needle << "\n" << r.err;
      size_t marked = 0;
      for (size_t at = r.err.find("strata: error: "); at != std::string::npos;
           at = r.err.find("strata: error: ", at + 1))
        ++marked;
      EXPECT_EQ(marked, 1u) << r.err;
      EXPECT_LE(last.size(), 2000u) << "a reason is one short line";
    } else {
      EXPECT_NE(r.out.find(needle), std::string::npos) << r.out << r.err;
    }
    // Nothing outside the output path changed (the output may appear or change).
    auto before_rest = before;
    if (!c.out.empty()) {
      for (auto* m : {&before_rest, &after})
        for (auto it = m->begin(); it != m->end();)
          it = it->first == c.out || it->first.rfind(c.out + "/", 0) == 0 ? m->erase(it) : ++it;
    }
    EXPECT_EQ(before_rest.size(), after.size());
    for (const auto& [path, what] : before_rest) {
      const auto it = after.find(path);
      if (it == after.end()) {
        ADD_FAILURE() << path << " disappeared";
      } else if (it->second != what) {
        ADD_FAILURE() << path << " changed";
      }
    }
    for (const auto& [path, what] : after)
      if (!before_rest.count(path)) ADD_FAILURE() << path << " appeared";
    // Clean up an output that a success case wrote, so later cases see the same directory.
    if (!c.out.empty() && !before.count(c.out)) fs::remove_all(scratch_ / c.out);
    ++per_command[c.args.empty() ? "-" : c.args[0]];
    ++checked;
  }
  EXPECT_EQ(checked, cases.size());
  std::string summary;
  for (const auto& [cmd, n] : per_command)
    summary += " " + cmd + "=" + std::to_string(n);
  std::printf("robustness: %zu cases:%s\n", checked, summary.c_str());
  // Every subcommand is exercised.
  for (const char* cmd : {"generate", "logits", "inspect", "tokenize", "detokenize",
                          "chat-template", "gate", "bench", "quantize", "make-checkpoint"})
    EXPECT_GE(per_command[cmd], 3) << cmd;
}

}  // namespace
}  // namespace strata::robustness
