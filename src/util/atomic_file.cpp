#include "util/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/error.h"

namespace sps {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

// The folder holding `path` ("." for a bare file name), for the fsync after rename.
std::string parent_folder(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path)
    : path_(path), tmp_path_(temporary_path(path, ::getpid())) {
  // Unnamed until commit where the file system allows (O_TMPFILE): no exit, a kill
  // included, can leave a partial file behind. Elsewhere a named temporary file, which
  // remove_stale_temporaries() sweeps after a crash.
  fd_ = ::open(parent_folder(path_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ >= 0) {
    anonymous_ = true;
    return;
  }
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("{}: cannot create file: {}", path_, errno_text(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !anonymous_) ::unlink(tmp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  SPS_ASSERT(fd_ >= 0 && !committed_);
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("{}: cannot write: {}", path_, errno_text(errno));
    }
    if (n == 0) fail("{}: cannot write: no progress (device full?)", path_);
    p += n;
    size -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  // Start writing back every few MB already, so the fsync in commit() has little left to
  // wait for (the kernel otherwise holds a large file's pages until then). Only a hint:
  // errors surface at fsync.
  constexpr uint64_t kWritebackBytes = uint64_t{8} << 20;
  if (written_ - written_back_ >= kWritebackBytes) {
    ::sync_file_range(fd_, static_cast<off_t>(written_back_),
                      static_cast<off_t>(written_ - written_back_), SYNC_FILE_RANGE_WRITE);
    written_back_ = written_;
  }
}

void AtomicFile::commit() {
  SPS_ASSERT(fd_ >= 0 && !committed_);
  // Delayed write errors (ENOSPC, EIO, EDQUOT) surface at fsync or close.
  if (::fsync(fd_) != 0) fail("{}: cannot write: {}", path_, errno_text(errno));
  if (anonymous_) {
    // Give the file its temporary name, then rename it over the target as below. A link
    // cannot replace an existing file, hence the two steps.
    ::unlink(tmp_path_.c_str());
    const std::string proc_path = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, proc_path.c_str(), AT_FDCWD, tmp_path_.c_str(), AT_SYMLINK_FOLLOW) != 0 &&
        ::linkat(fd_, "", AT_FDCWD, tmp_path_.c_str(), AT_EMPTY_PATH) != 0)
      fail("{}: cannot name the written file: {}", path_, errno_text(errno));
    anonymous_ = false;  // named now: the destructor removes it if what follows fails
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("{}: cannot write: {}", path_, errno_text(errno));
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    fail("{}: cannot replace file: {}", path_, errno_text(errno));
  committed_ = true;
  // Make the rename itself durable. Some file systems refuse fsync on folders; the
  // content is already in place then, so that is not an error.
  int dir_fd = ::open(parent_folder(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

std::string temporary_path(const std::string& path, long pid) {
  return path + ".tmp." + std::to_string(pid);
}

int remove_stale_temporaries(const std::string& folder) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t mark = name.rfind(".tmp.");
    if (mark == std::string::npos || mark + 5 == name.size()) continue;
    const std::string pid_text = name.substr(mark + 5);
    if (pid_text.find_first_not_of("0123456789") != std::string::npos || pid_text.size() > 9) continue;
    const long pid = std::stol(pid_text);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive
    std::error_code remove_error;
    if (fs::remove(entry.path(), remove_error)) ++removed;
  }
  return removed;
}

void write_file_atomically(const std::string& path, const std::string& content) {
  AtomicFile file(path);
  file.write(content.data(), content.size());
  file.commit();
}

}  // namespace sps
