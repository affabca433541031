// One writer per output: a second lock fails with the holder's PID, a released or stale lock
// is free, and the lock file goes away with its holder.
#include "util/writer_lock.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "util/error.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using sps::testing::TempDir;

std::string error_of(const std::string& lock_path, const std::string& output) {
  try {
    WriterLock lock(lock_path, output);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(WriterLock, SecondWriterStopsWithTheHoldersPid) {
  TempDir dir;
  const std::string folder = dir.path().string();
  {
    const WriterLock first(folder_lock_path(folder), folder);
    EXPECT_TRUE(std::filesystem::exists(folder + "/.sps.lock"));
    // flock locks belong to open file descriptions, so a second open in this process
    // conflicts just as another process would.
    EXPECT_EQ(error_of(folder_lock_path(folder), folder),
              folder + ": in use by another sps process (PID " + std::to_string(::getpid()) +
                  "); wait for it to end or choose another output");
  }
  EXPECT_FALSE(std::filesystem::exists(folder + "/.sps.lock"));  // removed on release
  EXPECT_EQ(error_of(folder_lock_path(folder), folder), "(no error)");
}

TEST(WriterLock, AStaleLockFileIsNoObstacle) {
  TempDir dir;
  const std::string file = dir.file("model.tok");
  // A process that took the lock and died: its file stays, its lock went with it.
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      new WriterLock(file_lock_path(file), file);  // never released: the process just ends
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(sps::testing::read_whole_file(file + ".lock"), std::to_string(child) + "\n");
  const WriterLock lock(file_lock_path(file), file);
  EXPECT_EQ(sps::testing::read_whole_file(file + ".lock"), std::to_string(::getpid()) + "\n");
}

TEST(WriterLock, MissingFolderNamesTheOutput) {
  TempDir dir;
  const std::string folder = dir.file("no/such");
  EXPECT_EQ(error_of(folder_lock_path(folder), folder).rfind(folder + ": cannot create the lock file", 0), 0u);
}

}  // namespace
}  // namespace sps
