#include "util/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"

namespace sps {

std::string read_file(const std::string& path, std::string_view what) {
  std::string described;  // " WHAT", or nothing
  if (!what.empty()) described.append(" ").append(what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open{}: {}", path, described, std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail("{}: cannot read{}: {}", path, described, std::strerror(err));
    }
    if (n == 0) break;
    text.append(buffer, size_t(n));
  }
  ::close(fd);
  return text;
}

}  // namespace sps
