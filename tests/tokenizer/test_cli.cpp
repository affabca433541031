// `sps tokenizer train|encode|decode` from the shell.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "tokenizer_fixtures.h"
#include "util/writer_lock.h"

namespace sps {
namespace {

using testing::TempDir;
using testing::run_command;

const std::string kSps = SPS_BINARY;

TEST(TokenizerCli, EncodeDecode) {
  SPS_GPT2_OR_SKIP(gpt2);
  (void)gpt2;
  std::string out;
  ASSERT_EQ(run_command("printf 'hello world' | '" + kSps + "' tokenizer encode", &out), 0);
  EXPECT_EQ(out, "31373 995\n");
  ASSERT_EQ(run_command("echo '31373 995 50256' | '" + kSps + "' tokenizer decode", &out), 0);
  EXPECT_EQ(out, "hello world<|endoftext|>");
  TempDir dir;
  const std::string text = "Ünïcödé \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9 it's\n\n\t 12345 <|endoftext|>\n";
  testing::write_whole_file(dir / "in.txt", text);
  ASSERT_EQ(run_command("'" + kSps + "' tokenizer encode --tokenizer gpt2 < '" + (dir / "in.txt") +
                          "' | '" + kSps + "' tokenizer decode",
                      &out),
            0);
  EXPECT_EQ(out, text);
}

TEST(TokenizerCli, ReportsReplacementsAndStats) {
  SPS_GPT2_OR_SKIP(gpt2);
  (void)gpt2;
  std::string out;
  ASSERT_EQ(run_command("printf 'a\\377b\\342\\202' | '" + kSps + "' tokenizer encode --stats 2>&1", &out), 0);
  EXPECT_NE(out.find("replaced 2 ill-formed UTF-8"), std::string::npos) << out;
  EXPECT_NE(out.find("MB/s"), std::string::npos) << out;
}

TEST(TokenizerCli, ErrorsExitWithStatusTwo) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(run_command("echo hi | SPS_HOME='" + dir.path().string() + "' '" + kSps + "' tokenizer encode 2>&1", &out), 2);
  EXPECT_NE(out.find("make deps"), std::string::npos) << out;
  EXPECT_EQ(run_command("echo hi | '" + kSps + "' tokenizer encode --tokenizer '" + (dir / "missing") + "' 2>&1", &out), 2);
  EXPECT_NE(out.find("missing"), std::string::npos) << out;
  SPS_GPT2_OR_SKIP(gpt2);
  (void)gpt2;
  EXPECT_EQ(run_command("echo '1 x2 3' | '" + kSps + "' tokenizer decode 2>&1", &out), 2);
  EXPECT_NE(out.find("'x2' is not a token id"), std::string::npos) << out;
  EXPECT_EQ(run_command("echo '50300' | '" + kSps + "' tokenizer decode 2>&1", &out), 2);
  EXPECT_NE(out.find("'50300'"), std::string::npos) << out;
}

TEST(TokenizerCli, OneTrainerPerOutputFile) {
  TempDir dir;
  testing::write_whole_file(dir / "text.txt", "the cat sat on the mat and the cat sat again\n");
  const std::string out_file = dir / "my.tok";
  const std::string command = "'" + kSps + "' tokenizer train '" + (dir / "text.txt") + "' --vocab-size 270 --out '" +
                              out_file + "' 2>&1";
  std::string out;
  {
    const WriterLock other(file_lock_path(out_file), out_file);
    EXPECT_EQ(run_command(command, &out), 2) << out;
    EXPECT_EQ(out, "sps: " + out_file + ": in use by another sps process (PID " + std::to_string(::getpid()) +
                       "); wait for it to end or choose another output\n");
  }
  EXPECT_EQ(run_command(command, &out), 0) << out;
  EXPECT_FALSE(std::filesystem::exists(out_file + ".lock"));
}

TEST(TokenizerCli, TrainsLoadsAndRefusesToOverwrite) {
  TempDir dir;
  testing::write_whole_file(dir / "a.txt", "hug hug hug pug pun");
  testing::write_whole_file(dir / "b.txt", " bun hugs");
  const std::string sps = "'" + kSps + "'";
  const std::string out = dir / "tok.tiktoken";
  std::string log;
  ASSERT_EQ(run_command(sps + " tokenizer train '" + (dir / "a.txt") + "' '" + (dir / "b.txt") +
                                   "' --vocab-size 267 --out '" + out + "' 2>&1", &log), 0) << log;
  EXPECT_NE(log.find("EOS 266"), std::string::npos) << log;
  std::string ids;
  ASSERT_EQ(run_command("printf 'hug hug hug pug pun bun hugs' | " + sps +
                                   " tokenizer encode --tokenizer '" + out + "'", &ids), 0);
  EXPECT_EQ(ids, "257 258 258 263 264 265 262\n");
  EXPECT_EQ(run_command(sps + " tokenizer train '" + dir.path().string() + "' --vocab-size 267 --out '" +
                                   out + "' 2>&1", &log), 2);
  EXPECT_NE(log.find("--overwrite"), std::string::npos) << log;
  EXPECT_EQ(run_command(sps + " tokenizer train '" + (dir / "nope") + "' --out '" +
                                   (dir / "x") + "' 2>&1", &log), 2);
  EXPECT_NE(log.find("nope: no such file"), std::string::npos) << log;
  EXPECT_EQ(run_command(sps + " tokenizer train '" + dir.path().string() + "' --vocab-size 5000 --out '" +
                                   (dir / "y") + "' 2>&1", &log), 2);
  EXPECT_NE(log.find("too small"), std::string::npos) << log;
}

}  // namespace
}  // namespace sps
