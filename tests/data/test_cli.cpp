// `sps data prepare` from the shell: exit status 2 with one clear line for bad input, no
// partial files on a full disk, a progress line redrawn on a terminal and none for a short run
// off one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data_fixtures.h"

namespace sps {
namespace {

using testing::TempDir;
using testing::run_command;
using testing::write_whole_file;
namespace fs = std::filesystem;

const std::string kSps = SPS_BINARY;

std::string quote(const std::string& s) { return "'" + s + "'"; }

// A rank file of the byte tokenizer (EOS = 256): no GPT-2 files needed.
std::string byte_rank_file(const TempDir& dir) {
  const std::string path = dir / "bytes.tiktoken";
  testing::byte_tokenizer().save_rank_file(path);
  return path;
}

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += table[v >> 18];
    out += table[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? table[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? table[v & 63] : '=';
  }
  return out;
}

int run_prepare(const std::string& args, std::string* out) {
  return run_command(quote(kSps) + " data prepare " + args + " 2>&1", out);
}

TEST(DataCli, PreparesAndPrintsOneSummaryLineWhenNotATerminal) {
  TempDir dir;
  // Ids that hold no temporary path, so the split is fixed: a.txt in a folder is "a.txt:0".
  fs::create_directories(dir / "in");
  write_whole_file(dir / "in/a.txt", "hello");
  write_whole_file(dir / "r.jsonl", "{\"id\":\"doc-13687\",\"text\":\"val doc\"}\n{\"id\":\"doc-1100\",\"text\":\"train doc\"}\n");
  std::string out;
  ASSERT_EQ(run_prepare(quote(dir / "in") + " " + quote(dir / "r.jsonl") + " --out " + quote(dir / "out") +
                            " --tokenizer " + quote(byte_rank_file(dir)) + " --threads 2",
                        &out),
            0)
      << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("train 2 documents, 16 tokens; val 1 documents, 8 tokens (" + byte_rank_file(dir) +
                     ", uint16, shuffled)"),
            std::string::npos)
      << out;
  const auto meta = nlohmann::json::parse(testing::read_whole_file(dir / "out/meta.json"));
  EXPECT_EQ(meta["val"]["documents"], 1);  // doc-13687 is below floor(0.0005 · 2^64) (test_split.cpp)
  EXPECT_EQ(meta["shuffle"]["seed"], 2357);
  EXPECT_EQ(meta["vocab_size"], 257);
  EXPECT_EQ(testing::byte_tokenizer().decode(testing::read_tokens(dir / "out/val.bin")), "val doc<|endoftext|>");
}

TEST(DataCli, ProgressLineOnATerminal) {
  if (!testing::has_command("script")) GTEST_SKIP() << "no `script` to make a terminal";
  TempDir dir;
  write_whole_file(dir / "a.txt", std::string(100000, 'a'));
  std::string out;
  const std::string command = quote(kSps) + " data prepare " + quote(dir / "a.txt") + " --out " +
                              quote(dir / "out") + " --tokenizer " + quote(byte_rank_file(dir));
  ASSERT_EQ(run_command("script -qec " + quote(command) + " /dev/null 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("prepare [####################] 100%"), std::string::npos) << out;
  EXPECT_NE(out.find("MB/s"), std::string::npos) << out;
  EXPECT_NE(out.find("documents"), std::string::npos) << out;
  EXPECT_NE(out.find("ETA"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\033[Ksps: "), std::string::npos) << out;  // cleared before the summary
}

TEST(DataCli, BadInputExitsWithStatusTwo) {
  TempDir dir;
  const std::string tok = " --tokenizer " + quote(byte_rank_file(dir));
  write_whole_file(dir / "a.txt", "hello");
  std::string out;

  EXPECT_EQ(run_prepare(quote(dir / "missing.txt") + " --out " + quote(dir / "o") + tok, &out), 2);
  EXPECT_EQ(out, "sps: " + (dir / "missing.txt") + ": no such file or folder\n");

  write_whole_file(dir / "bad.jsonl", "{\"text\":\"a\"}\n{\"text\":\"b\"\n");
  EXPECT_EQ(run_prepare(quote(dir / "bad.jsonl") + " --out " + quote(dir / "o") + tok, &out), 2);
  EXPECT_EQ(out.rfind("sps: " + (dir / "bad.jsonl") + ":2: malformed JSON: ", 0), 0u) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_FALSE(fs::exists(dir / "o"));
  ASSERT_EQ(run_prepare(quote(dir / "bad.jsonl") + " --out " + quote(dir / "o") + tok + " --skip-bad-records", &out), 0) << out;
  EXPECT_NE(out.find("skipped 1 bad record(s), the first: " + (dir / "bad.jsonl") + ":2:"), std::string::npos) << out;

  write_whole_file(dir / "nofield.jsonl", "{\"content\":\"a\"}\n");
  EXPECT_EQ(run_prepare(quote(dir / "nofield.jsonl") + " --out " + quote(dir / "o2") + tok, &out), 2);
  EXPECT_EQ(out, "sps: " + (dir / "nofield.jsonl") +
                     ":1: no \"text\" field (pass --skip-bad-records to skip such records)\n");
  EXPECT_EQ(run_prepare(quote(dir / "nofield.jsonl") + " --field content --out " + quote(dir / "o2") + tok, &out), 0) << out;

  EXPECT_EQ(run_prepare(quote(dir / "a.txt") + " --out " + quote(dir / "o") + tok, &out), 2);
  EXPECT_EQ(out, "sps: " + (dir / "o") +
                     ": already exists (pass --overwrite to replace its train.bin, val.bin and meta.json)\n");
  EXPECT_EQ(run_prepare(quote(dir / "a.txt") + " --out " + quote(dir / "o") + tok + " --overwrite", &out), 0) << out;

  write_whole_file(dir / "empty.txt", "");
  EXPECT_EQ(run_prepare(quote(dir / "empty.txt") + " --out " + quote(dir / "o3") + tok, &out), 2);
  EXPECT_EQ(out, "sps: no documents to write (1 empty document(s))\n");
  ASSERT_EQ(run_prepare(quote(dir / "empty.txt") + " " + quote(dir / "a.txt") + " --out " + quote(dir / "o3") + tok, &out), 0);
  EXPECT_NE(out.find("skipped 1 empty document(s)"), std::string::npos) << out;

  EXPECT_EQ(run_prepare(quote(dir / "a.txt") + " --out " + quote(dir / "o4") + tok + " --val-fraction 2", &out), 2);
  EXPECT_EQ(run_prepare(quote(dir / "a.txt") + " --out " + quote(dir / "o4") + " --tokenizer " + quote(dir / "no-tokenizer"), &out), 2);
  EXPECT_NE(out.find("no-tokenizer"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "o4"));
}

TEST(DataCli, RefusesUint16ForABigVocabulary) {
  // 256 bytes and 65280 two-byte tokens: ranks 0..65535, so EOS = 65536 does not fit uint16.
  TempDir dir;
  std::string ranks;
  uint32_t rank = 0;
  for (int b = 0; b < 256; ++b) ranks += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
  for (int a = 0; a < 256 && rank < 65536; ++a)
    for (int b = 0; b < 256 && rank < 65536; ++b)
      ranks += base64(std::string{static_cast<char>(a), static_cast<char>(b)}) + " " + std::to_string(rank++) + "\n";
  write_whole_file(dir / "big.tiktoken", ranks);
  write_whole_file(dir / "a.txt", "hello");
  std::string out;
  const std::string args = quote(dir / "a.txt") + " --out " + quote(dir / "o") + " --tokenizer " +
                           quote(dir / "big.tiktoken") + " --val-fraction 0";
  EXPECT_EQ(run_prepare(args, &out), 2);
  EXPECT_EQ(out, "sps: the tokenizer has 65537 ids (up to 65536), more than uint16 token files hold "
                 "(ids up to 65535); pass --dtype uint32\n");
  EXPECT_FALSE(fs::exists(dir / "o"));
  ASSERT_EQ(run_prepare(args + " --dtype uint32", &out), 0) << out;
  const auto ids = testing::read_tokens(dir / "o/train.bin", 4);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 65536u);  // EOS
  EXPECT_EQ(ids.size(), 4u);      // "he" "ll" "o" EOS
}

// The input and the command for the full-disk cases: ~400 KB of tokens with the byte tokenizer.
std::string full_disk_input(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "document text " + std::to_string(i) + "\n";
  write_whole_file(dir / "big.txt", text);
  return quote(dir / "big.txt") + " --tokenizer " + quote(byte_rank_file(dir)) + " --val-fraction 0";
}

TEST(DataCli, FullDiskLeavesNoPartialFiles) {
  if (::geteuid() != 0 || !testing::has_command("unshare"))
    GTEST_SKIP() << "needs root and unshare to mount a small tmpfs";
  TempDir dir;
  const std::string input = full_disk_input(dir);
  fs::create_directories(dir / "mnt");
  // A private mount namespace: the 64 KiB tmpfs disappears with the shell.
  const std::string script =
      "mount -t tmpfs -o size=64k tmpfs " + quote(dir / "mnt") + " || exit 99; " +
      quote(kSps) + " data prepare " + input + " --out " + quote(dir / "mnt/out") + " 2>&1; echo \"rc=$?\"; " +
      "mkdir " + quote(dir / "mnt/keep") + " && echo old > " + quote(dir / "mnt/keep/train.bin") + "; " +
      quote(kSps) + " data prepare " + input + " --overwrite --out " + quote(dir / "mnt/keep") + " 2>&1; echo \"rc=$?\"; " +
      "ls -A " + quote(dir / "mnt") + " " + quote(dir / "mnt/keep") + "; cat " + quote(dir / "mnt/keep/train.bin");
  std::string out;
  const int status = run_command("unshare -m --propagation private sh -c " + quote(script) + " 2>&1", &out);
  if (status == 99 || out.find("rc=") == std::string::npos) GTEST_SKIP() << "cannot mount a tmpfs: " << out;
  EXPECT_NE(out.find(": No space left on device\nrc=2\n"), std::string::npos) << out;
  // The first run's folder is gone; the second left the old train.bin alone and nothing else.
  EXPECT_NE(out.find("rc=2\n" + (dir / "mnt") + ":\nkeep\n\n" + (dir / "mnt/keep") + ":\ntrain.bin\nold\n"),
            std::string::npos)
      << out;
}

TEST(DataCli, FileSizeLimitLeavesNoPartialFiles) {
  if (!testing::has_command("bash")) GTEST_SKIP() << "no bash for ulimit";
  TempDir dir;
  const std::string input = full_disk_input(dir);
  // 64 KiB per file; sps ignores SIGXFSZ, so write() fails with EFBIG instead of killing it.
  // In input order train.bin meets the limit; shuffled, the shuffle's temporary file does.
  for (const std::string& shuffle : {std::string(" --no-shuffle"), std::string()}) {
    std::string out;
    const int status = run_command("bash -c " + quote("ulimit -f 64 && exec " + quote(kSps) + " data prepare " +
                                                    input + shuffle + " --out " + quote(dir / "out")) +
                                     " 2>&1",
                                 &out);
    EXPECT_EQ(status, 2) << out;
    EXPECT_NE(out.find(shuffle.empty() ? (dir / "out") + ": cannot write the shuffle's temporary file: File too large"
                                       : "train.bin: cannot write: File too large"),
              std::string::npos)
        << out;
    EXPECT_FALSE(fs::exists(dir / "out"));
    size_t entries = 0;
    for (const auto& entry : fs::directory_iterator(dir.path())) entries += entry.path().filename() != "bytes.tiktoken" && entry.path().filename() != "big.txt";
    EXPECT_EQ(entries, 0u);
  }
}

// SIGINT or SIGTERM mid-run, and even SIGKILL: no temporary file is left in the folder, and
// the next run into it succeeds.
TEST(DataCli, InterruptedPrepareLeavesNoTemporaryFiles) {
  TempDir dir;
  std::string big;
  for (int i = 0; big.size() < (size_t{40} << 20); ++i) big += "{\"text\":\"document " + std::to_string(i) + " " + std::string(200, 'x') + "\"}\n";
  write_whole_file(dir / "big.jsonl", big);
  for (const char* signal : {"INT", "TERM", "KILL"}) {
    std::string out;
    // Started, given time to write some of its output, then interrupted.
    run_command("(" + quote(kSps) + " data prepare " + quote(dir / "big.jsonl") + " --overwrite --threads 1 --out " +
                  quote(dir / "out") + " --tokenizer " + quote(byte_rank_file(dir)) +
                  " >/dev/null 2>&1 & pid=$!; sleep 0.3; kill -" + signal + " $pid; wait $pid; echo rc=$?)",
              &out);
    EXPECT_NE(out.find("rc="), std::string::npos) << signal << ": " << out;
    std::vector<std::string> left;
    if (fs::exists(dir / "out"))
      for (const auto& entry : fs::directory_iterator(dir / "out")) left.push_back(entry.path().filename());
    for (const std::string& name : left)
      EXPECT_TRUE(name == ".sps.lock" && std::string(signal) == "KILL") << signal << " left " << name;
  }
  std::string out;
  ASSERT_EQ(run_prepare(quote(dir / "big.jsonl") + " --overwrite --out " + quote(dir / "out") +
                            " --tokenizer " + quote(byte_rank_file(dir)),
                        &out),
            0)
      << out;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "out")) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"meta.json", "train.bin", "val.bin"}));
}

}  // namespace
}  // namespace sps
