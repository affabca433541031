#include "serve/connection_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace sps::serve {
namespace {

// getnameinfo's numeric host and the port of an address: cpp-httplib's own format.
bool address_matches(const sockaddr_storage& address, socklen_t length, const std::string& host,
                     int port) {
  char text[NI_MAXHOST], service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, text, sizeof(text),
                  service, sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  return host == text && port == std::atoi(service);
}

bool is_connection(int fd, const std::string& local_addr, int local_port,
                   const std::string& remote_addr, int remote_port) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
      !address_matches(address, length, remote_addr, remote_port))
    return false;
  length = sizeof(address);
  return getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0 &&
         address_matches(address, length, local_addr, local_port);
}

}  // namespace

ConnectionWatch::ConnectionWatch(const std::string& local_addr, int local_port,
                                 const std::string& remote_addr, int remote_port) {
  DIR* fds = opendir("/proc/self/fd");
  if (!fds) return;
  const int own = dirfd(fds);
  while (const dirent* entry = readdir(fds)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (*end != 0 || end == entry->d_name || fd == own) continue;
    if (is_connection(int(fd), local_addr, local_port, remote_addr, remote_port)) {
      fd_ = int(fd);
      break;
    }
  }
  closedir(fds);
}

bool ConnectionWatch::peer_closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace sps::serve
