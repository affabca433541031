#include "util/writer_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "util/error.h"

namespace sps {

namespace {

// The PID a holder wrote into the lock file, or "unknown".
std::string holder_of(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid(text, n > 0 ? size_t(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  const bool digits = !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos;
  return digits ? pid : "unknown";
}

}  // namespace

std::string folder_lock_path(const std::string& folder) {
  return (std::filesystem::path(folder) / ".sps.lock").string();
}

std::string file_lock_path(const std::string& file) { return file + ".lock"; }

WriterLock::WriterLock(const std::string& lock_path, const std::string& output) : path_(lock_path) {
  // A holder removes the file before it releases the lock, so the file we locked may no
  // longer be the one at the path: then try again with the new one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fail("{}: cannot create the lock file {}: {}", output, path_, std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = err == EWOULDBLOCK ? holder_of(fd) : "";
      ::close(fd);
      if (err == EWOULDBLOCK)
        fail("{}: in use by another sps process (PID {}); wait for it to end or choose another "
             "output",
             output, holder);
      fail("{}: cannot lock {}: {}", output, path_, std::strerror(err));
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
        held.st_dev == named.st_dev) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
        const int err = errno;
        ::close(fd);
        fail("{}: cannot write the lock file {}: {}", output, path_, std::strerror(err));
      }
      fd_ = fd;
      return;
    }
    ::close(fd);  // removed or replaced while we waited for it
  }
  fail("{}: the lock file {} keeps changing; another process is starting and ending there", output, path_);
}

WriterLock::~WriterLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace sps
