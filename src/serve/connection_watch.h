#pragma once
// Notices that an HTTP client has closed its connection while its non-streamed completion
// runs. cpp-httplib (0.11) gives a handler no way to reach its connection, only the two
// addresses, so the socket is found among this process's descriptors by that pair; the
// handler's worker holds it open until the handler returns, so it cannot be reused meanwhile.
// (A streamed request needs none of this: its next write fails.)
#include <string>

namespace sps::serve {

class ConnectionWatch {
 public:
  // Addresses as cpp-httplib writes them (numeric host, port). When no socket matches,
  // the watch never reports a close.
  ConnectionWatch(const std::string& local_addr, int local_port, const std::string& remote_addr,
                  int remote_port);

  // True once the peer has closed or reset the connection (or shut down its side for
  // writing: an HTTP client that has sent its request and still waits does neither).
  bool peer_closed() const;

  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace sps::serve
