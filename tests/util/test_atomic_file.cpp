#include "util/atomic_file.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "util/error.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using sps::testing::read_whole_file;
using sps::testing::TempDir;
using sps::testing::write_whole_file;

TEST(AtomicFile, ContentAppearsOnlyOnCommit) {
  TempDir dir;
  const std::string path = dir.file("out.txt");
  write_whole_file(path, "old");
  {
    AtomicFile file(path);
    file.write("new ", 4);
    file.write("content", 7);
    EXPECT_EQ(read_whole_file(path), "old");  // readers still see the old file
    EXPECT_EQ(dir.entries(), 1u);             // the temporary file has no name (O_TMPFILE)
    file.commit();
    EXPECT_EQ(read_whole_file(path), "new content");
  }
  EXPECT_EQ(read_whole_file(path), "new content");
  EXPECT_EQ(dir.entries(), 1u);
}

// A killed writer leaves nothing: the file it wrote has no name until commit.
TEST(AtomicFile, KilledWriterLeavesNothingBehind) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) {
    AtomicFile* file = new AtomicFile(dir.file("out.bin"));
    file->write("partial", 7);
    ::_exit(0);  // no destructor runs, as after SIGKILL
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(AtomicFile, StaleTemporariesOfEndedProcessesAreSwept) {
  TempDir dir;
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // `child` is now a PID of no process
  write_whole_file(temporary_path(dir.file("train.bin"), child), "left by a crash");
  write_whole_file(temporary_path(dir.file("val.bin"), ::getpid()), "being written");
  write_whole_file(dir.file("notes.tmp.txt"), "not a temporary");
  write_whole_file(dir.file("train.bin"), "kept");
  EXPECT_EQ(remove_stale_temporaries(dir.path().string()), 1);
  EXPECT_FALSE(std::filesystem::exists(temporary_path(dir.file("train.bin"), child)));
  EXPECT_TRUE(std::filesystem::exists(temporary_path(dir.file("val.bin"), ::getpid())));
  EXPECT_EQ(dir.entries(), 3u);
}

TEST(AtomicFile, UncommittedLeavesNothingBehind) {
  TempDir dir;
  {
    AtomicFile file(dir.file("never.txt"));
    file.write("partial", 7);
  }
  EXPECT_EQ(dir.entries(), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("never.txt")));
}

TEST(AtomicFile, UncommittedKeepsOldContent) {
  TempDir dir;
  const std::string path = dir.file("keep.txt");
  write_whole_file(path, "old");
  {
    AtomicFile file(path);
    file.write("new", 3);
  }
  EXPECT_EQ(read_whole_file(path), "old");
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(AtomicFile, MissingFolderIsUserErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.file("no/such/folder/out.txt");
  try {
    AtomicFile file(path);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_file_atomically(path, "x"), UserError);
}

TEST(AtomicFile, WriteFileAtomicallyReplaces) {
  TempDir dir;
  const std::string path = dir.file("a.txt");
  write_file_atomically(path, "first");
  write_file_atomically(path, std::string("sec\0ond", 7));
  EXPECT_EQ(read_whole_file(path), std::string("sec\0ond", 7));
  write_file_atomically(path, "");
  EXPECT_EQ(read_whole_file(path), "");
  EXPECT_EQ(dir.entries(), 1u);
}

TEST(AtomicFile, BareFileNameInCurrentFolder) {
  TempDir dir;
  const auto previous = std::filesystem::current_path();
  std::filesystem::current_path(dir.path());
  EXPECT_NO_THROW(write_file_atomically("bare.txt", "x"));
  std::filesystem::current_path(previous);
  EXPECT_EQ(read_whole_file(dir.file("bare.txt")), "x");
}

}  // namespace
}  // namespace sps
