#pragma once
// One writer per output: an advisory lock (flock) held for the life of a command that writes
// a run folder, a data folder or a tokenizer file. A second writer stops at once with one
// line naming the output and the holder's PID (exit status 2). The kernel drops the lock when
// its process dies, so a lock file left by a killed process is no obstacle.
#include <string>

namespace sps {

class WriterLock {
 public:
  // Locks `lock_path` (created if missing) for `output`, the folder or file named in the
  // error. Throws UserError when another process holds it.
  WriterLock(const std::string& lock_path, const std::string& output);
  ~WriterLock();  // removes the lock file, then releases the lock
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// The lock of a folder's writer: FOLDER/.sps.lock (the folder must exist).
std::string folder_lock_path(const std::string& folder);
// The lock of a file's writer, beside it: FILE.lock.
std::string file_lock_path(const std::string& file);

}  // namespace sps
