// Issue 12, inputs and outputs: bounded regular-file reads, strict JSON (depth, duplicate keys),
// the atomic writer (refuses non-regular targets, leaves nothing behind on a write error) and
// the admission decision.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>

#include "../common/scratch_dir.h"
#include "core/admission.h"
#include "core/check.h"
#include "io/atomic_file.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"

namespace strata::io {
namespace {

namespace fs = std::filesystem;
using test_util::ScratchDir;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void write_plain(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_plain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    out.insert(e.path().filename().string());
  return out;
}

TEST(BoundedFile, ReadsRegularFilesAndRefusesTheRest) {
  ScratchDir dir;
  write_plain(dir.file("a.json"), "{\"x\": 1}");
  EXPECT_EQ(read_regular_file(dir.file("a.json"), "config", 100), "{\"x\": 1}");
  fs::create_symlink(dir.file("a.json"), dir.file("link.json"));  // a link to a file is fine
  EXPECT_EQ(read_regular_file(dir.file("link.json"), "config", 100), "{\"x\": 1}");

  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);  // would hang a plain read
  const std::string fifo = error_of([&] { read_regular_file(dir.file("fifo"), "config", 100); });
  EXPECT_NE(fifo.find("the config must be a regular file; this is a FIFO"), std::string::npos)
      << fifo;
  const std::string d = error_of([&] { read_regular_file(dir.path().string(), "tokenizer", 9); });
  EXPECT_NE(d.find("this is a directory"), std::string::npos) << d;
  // /dev/zero never ends: refused before the first byte.
  const std::string zero = error_of([] { read_regular_file("/dev/zero", "chat template", 9); });
  EXPECT_NE(zero.find("this is a character device"), std::string::npos) << zero;
  const std::string big = error_of([&] { read_regular_file(dir.file("a.json"), "config", 7); });
  EXPECT_NE(big.find("is 8 bytes, larger than the 7 bytes limit"), std::string::npos) << big;
  const std::string absent = error_of([&] { read_regular_file(dir.file("no"), "config", 7); });
  EXPECT_NE(absent.find("cannot open the config"), std::string::npos) << absent;
  EXPECT_EQ(format_bytes(16ull << 20), "16 MiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
}

TEST(StrictJson, DepthAndDuplicateKeysRefusedWithoutCrashing) {
  // 10^6 levels: far deeper than any stack; refused at the limit, not by a crash.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  const std::string e = error_of([&] { parse_json_strict(deep, "stdin", kRequestJsonMaxDepth); });
  EXPECT_NE(e.find("stdin: JSON nests deeper than the 64 levels allowed"), std::string::npos) << e;
  // Exactly at the limit is accepted.
  const std::string at = std::string(64, '[') + std::string(64, ']');
  EXPECT_NO_THROW(parse_json_strict(at, "x", 64));
  const std::string over = std::string(65, '[') + std::string(65, ']');
  EXPECT_THROW(parse_json_strict(over, "x", 64), Error);

  const std::string dup = error_of([] { parse_json_strict(R"({"a": {"b": 1, "b": 2}})", "r", 8); });
  EXPECT_NE(dup.find("duplicate key \"b\""), std::string::npos) << dup;
  // The same key in two different objects is not a duplicate.
  EXPECT_NO_THROW(parse_json_strict(R"({"a": {"b": 1}, "c": {"b": 2}})", "r", 8));
  const std::string ord =
      error_of([] { parse_ordered_json_strict(R"({"m": 1, "m": 1})", "req", 8); });
  EXPECT_NE(ord.find("duplicate key \"m\""), std::string::npos) << ord;
  // Key order is kept by the ordered variant.
  EXPECT_EQ(parse_ordered_json_strict(R"({"z": 1, "a": 2})", "req", 8).dump(), R"({"z":1,"a":2})");
  const std::string utf8 = error_of([] { parse_json_strict("\"\xC3\x28\"", "f", 8); });
  EXPECT_NE(utf8.find("not valid UTF-8 (byte 1 of 4)"), std::string::npos) << utf8;
}

TEST(AtomicFile, WritesAndReplacesRegularFilesOnly) {
  ScratchDir dir;
  write_file_atomic(dir.file("out.json"), "one");
  EXPECT_EQ(read_plain(dir.file("out.json")), "one");
  write_file_atomic(dir.file("out.json"), "two");  // a regular file is replaced
  EXPECT_EQ(read_plain(dir.file("out.json")), "two");
  // An existing OUT.tmp (the old fixed temporary name) is neither used nor swallowed.
  write_plain(dir.file("out.json.tmp"), "keep me");
  write_file_atomic(dir.file("out.json"), "three");
  EXPECT_EQ(read_plain(dir.file("out.json.tmp")), "keep me");

  write_plain(dir.file("victim"), "victim");
  fs::create_symlink(dir.file("victim"), dir.file("link"));
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  fs::create_directory(dir.file("sub"));
  int refused = 0;
  for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{
           {"link", "a symbolic link"}, {"fifo", "a FIFO"}, {"sub", "a directory"}}) {
    const std::string e = error_of([&] { write_file_atomic(dir.file(name), "x"); });
    EXPECT_NE(e.find("refusing to replace " + kind), std::string::npos) << name << ": " << e;
    ++refused;
  }
  EXPECT_EQ(refused, 3);
  EXPECT_EQ(read_plain(dir.file("victim")), "victim");  // nothing written through the link
  EXPECT_TRUE(fs::is_symlink(dir.file("link")));
  EXPECT_TRUE(fs::is_fifo(dir.file("fifo")));
  // A device node (as root, the issue saw /dev/full replaced): a copy of /dev/null's numbers
  // made here, so a regression could only replace this node.
  std::set<std::string> expected{"out.json", "out.json.tmp", "victim", "link", "fifo", "sub"};
  if (::mknod(dir.file("null").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
    expected.insert("null");
    const std::string e = error_of([&] { write_file_atomic(dir.file("null"), "x"); });
    EXPECT_NE(e.find("refusing to replace a character device"), std::string::npos) << e;
    struct stat st {};
    ASSERT_EQ(::lstat(dir.file("null").c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  } else {
    GTEST_LOG_(INFO) << "mknod not permitted here: the device-node case is checked by type only";
  }
  // No temporary file is left behind by any of it.
  EXPECT_EQ(names_in(dir.path()), expected);
}

// A write error (here EFBIG from RLIMIT_FSIZE, standing in for ENOSPC) is reported with the
// target's name and leaves neither a partial target nor a temporary file.
TEST(AtomicFile, WriteErrorLeavesNoPartialFile) {
  ScratchDir dir;
  write_plain(dir.file("model.npy"), "old contents");
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct sigaction ignore {
  }, saved{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &saved), 0);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string e =
      error_of([&] { write_file_atomic(dir.file("model.npy"), std::string(1 << 20, 'x')); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::sigaction(SIGXFSZ, &saved, nullptr);
  EXPECT_NE(e.find(dir.file("model.npy") + ": write failed: File too large"), std::string::npos)
      << e;
  EXPECT_EQ(read_plain(dir.file("model.npy")), "old contents");
  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"model.npy"});
}

TEST(Admission, RefusesWithFiguresAndPassesWhatFits) {
  ResourceLimits have;
  have.host_available = 24ull << 30;
  have.address_available = 32ull << 30;
  have.device_free = 80ull << 30;
  have.disk_free = 1ull << 30;
  ResourceNeed need;
  need.host_bytes = 112ull << 30;  // a 56B-parameter model in bf16
  need.disk_bytes = 2ull << 30;
  need.disk_path = "/out";
  const auto msg = admission_failure(need, have, "dummy weights");
  ASSERT_TRUE(msg);
  EXPECT_NE(msg->find("dummy weights does not fit: it needs 112.00 GiB of host memory with 24.00 GiB available"),
            std::string::npos)
      << *msg;
  EXPECT_NE(msg->find("32.00 GiB available"), std::string::npos) << *msg;  // RLIMIT_AS too
  EXPECT_NE(msg->find("2.00 GiB of disk at /out with 1.00 GiB available"), std::string::npos) << *msg;
  EXPECT_EQ(msg->find("device"), std::string::npos) << *msg;  // needs none
  ResourceNeed fits;
  fits.host_bytes = 1ull << 30;
  fits.device_bytes = 80ull << 30;  // exactly what is free
  EXPECT_FALSE(admission_failure(fits, have, "x"));
  fits.device_bytes += 1;
  EXPECT_TRUE(admission_failure(fits, have, "x"));
  // Unknown limits are not checked.
  EXPECT_FALSE(admission_failure(need, ResourceLimits{}, "x"));
  // The live query sees this machine: MemAvailable is there on Linux.
  EXPECT_TRUE(current_limits("/", false).host_available.has_value());
  EXPECT_TRUE(current_limits("/", false).disk_free.has_value());
}

}  // namespace
}  // namespace strata::io
