#include "serve/connections.h"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "serve/request.h"
#include "serve/responses.h"
#include "util/error.h"

namespace sps::serve {

namespace {

using Clock = std::chrono::steady_clock;

// How often a connection waiting for bytes looks whether the server is stopping.
constexpr std::chrono::milliseconds kStopCheck{100};
// After refusing a request, how long its remaining bytes are read and dropped before the
// connection closes: closing with unread bytes resets the connection, and the client could
// lose the answer that says why (a 413 while it still sends the body).
constexpr std::chrono::milliseconds kLinger{1000};

struct Address {
  std::string host;
  int port = 0;
};

// The numeric host and port of a socket's peer or own address (cpp-httplib's format).
Address address_of(int fd, bool peer) {
  sockaddr_storage storage;
  socklen_t length = sizeof(storage);
  auto* a = reinterpret_cast<sockaddr*>(&storage);
  Address out;
  if ((peer ? getpeername(fd, a, &length) : getsockname(fd, a, &length)) != 0) return out;
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (getnameinfo(a, length, host, sizeof(host), service, sizeof(service),
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
    out.host = host;
    out.port = std::atoi(service);
  }
  return out;
}

// Waits until `fd` is ready for `events` (POLLIN or POLLOUT) or `deadline` passes.
bool wait_until(int fd, short events, Clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, int(std::min<int64_t>(left.count(), 1 << 30)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Some of `bytes` written within `timeout` of the call: how many, or -1.
ssize_t write_some(int fd, const char* bytes, size_t size, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const ssize_t n = send(fd, bytes, size, MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait_until(fd, POLLOUT, deadline)) return -1;
  }
}

// One request's bytes as cpp-httplib's stream: it reads the request and nothing past it (the
// end of the request reads as the end of the stream), and its answer goes to the socket.
class RequestStream final : public httplib::Stream {
 public:
  RequestStream(int fd, std::string_view request, const Address& local, const Address& remote,
                std::chrono::milliseconds write_timeout)
      : fd_(fd), request_(request), local_(local), remote_(remote), timeout_(write_timeout) {}

  bool is_readable() const override { return read_ < request_.size(); }
  bool is_writable() const override { return wait_until(fd_, POLLOUT, Clock::now() + timeout_); }
  ssize_t read(char* out, size_t size) override {
    size = std::min(size, request_.size() - read_);
    std::memcpy(out, request_.data() + read_, size);
    read_ += size;
    return ssize_t(size);
  }
  ssize_t write(const char* bytes, size_t size) override {
    return write_some(fd_, bytes, size, timeout_);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = remote_.host;
    port = remote_.port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = local_.host;
    port = local_.port;
  }
  socket_t socket() const override { return fd_; }

 private:
  int fd_;
  std::string_view request_;
  size_t read_ = 0;
  Address local_, remote_;
  std::chrono::milliseconds timeout_;
};

const char* reason_phrase(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
  }
  return "Error";
}

class GuardedServer final : public httplib::Server {
 public:
  GuardedServer(const ConnectionLimits& limits, Metrics& metrics)
      : limits_(limits), metrics_(metrics) {
    new_task_queue = [this] { return new InlineTasks(*this); };
    set_keep_alive_timeout(
        std::max<time_t>(1, std::chrono::ceil<std::chrono::seconds>(limits.idle_timeout).count()));
    set_keep_alive_max_count(size_t(limits.max_requests_per_connection));
    set_payload_max_length(limits.framing.max_body_bytes);
    // SO_REUSEADDR (a restarted server binds while old connections linger) but not
    // cpp-httplib's SO_REUSEPORT, which lets a second server bind the same port and take
    // half of its clients: here that second server fails to bind.
    set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
  }
  ~GuardedServer() override { wait_for_connections(); }

  // cpp-httplib listens with the backlog its build was given (5 in Debian's), past which
  // the kernel drops a burst's connects until their SYN is sent again, about a second later.
  // Listening again on the bound socket sets the backlog to the kernel's cap instead.
  void widen_listen_backlog() {
    const socket_t sock = svr_sock_;
    if (sock != INVALID_SOCKET) ::listen(sock, SOMAXCONN);
  }

  void wait_for_connections() {
    std::unique_lock lock(mutex_);
    ended_.wait(lock, [&] { return open_ == 0; });
  }

 private:
  // cpp-httplib's accept loop hands each socket to its task queue; this one admits it at
  // once, on the accepting thread, and the connection's own thread does the rest.
  class InlineTasks final : public httplib::TaskQueue {
   public:
    explicit InlineTasks(GuardedServer& server) : server_(server) {}
    void enqueue(std::function<void()> fn) override { fn(); }
    void shutdown() override { server_.wait_for_connections(); }

   private:
    GuardedServer& server_;
  };

  enum class Read { more, closed, timed_out, stopped };

  bool stopping() const { return svr_sock_ == INVALID_SOCKET; }

  bool process_and_close_socket(socket_t fd) override {
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    const std::string client = address_of(fd, true).host;
    bool admitted = false;
    {
      std::lock_guard lock(mutex_);
      int& from_client = per_client_[client];
      admitted = open_ < limits_.max_connections && from_client < limits_.max_per_client;
      if (admitted) {
        ++from_client;
        metrics_.connections_open = ++open_;
      } else if (from_client == 0) {
        per_client_.erase(client);
      }
    }
    if (!admitted) {
      refuse(fd);
      return true;
    }
    try {
      std::thread([this, fd, client] {
        serve(fd);
        ended(client);
      }).detach();
    } catch (const std::system_error&) {  // no thread to be had
      ended(client);
      refuse(fd);
    }
    return true;
  }

  void ended(const std::string& client) {
    std::lock_guard lock(mutex_);
    if (--per_client_[client] == 0) per_client_.erase(client);
    metrics_.connections_open = --open_;
    ended_.notify_all();
  }

  // Past a cap: 503 with Retry-After if the socket takes it at once, then closed.
  void refuse(int fd) {
    ++metrics_.connections_refused;
    answer(fd, 503, "too many connections open (from this address, or in all); retry later");
    char discard[4096];
    while (recv(fd, discard, sizeof(discard), MSG_DONTWAIT) > 0) {
    }
    ::close(fd);
  }

  // The rest of what the client sends, read and dropped until it closes or kLinger passes.
  void linger(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto deadline = Clock::now() + kLinger;
    char discard[16384];
    while (wait_until(fd, POLLIN, deadline)) {
      const ssize_t n = recv(fd, discard, sizeof(discard), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    }
  }

  // A whole answer written by this layer (a request refused before cpp-httplib saw it), in
  // OpenAI's error shape; the connection closes after it.
  void answer(int fd, int status, const std::string& message) {
    const std::string body = dump(error_body(ApiError(status, message)));
    std::string text =
        fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                    "Connection: close\r\n",
                    status, reason_phrase(status), body.size());
    if (status == 503) text += fmt::format("Retry-After: {}\r\n", limits_.retry_after_seconds);
    text += "\r\n" + body;
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n =
          write_some(fd, text.data() + done, text.size() - done,
                     status == 503 ? std::chrono::milliseconds(0) : limits_.request_timeout);
      if (n <= 0) break;
      done += size_t(n);
    }
    if (status != 503) {  // refused connections are counted apart, as connections
      ++metrics_.requests;
      ++metrics_.requests_rejected;  // each a request this server does not take
    }
  }

  // Appends what arrives before `deadline`, or says why nothing did.
  Read read_more(int fd, std::string& buffer, Clock::time_point deadline) {
    while (true) {
      if (stopping()) return Read::stopped;
      const auto now = Clock::now();
      if (now >= deadline) return Read::timed_out;
      if (!wait_until(fd, POLLIN, std::min(deadline, now + kStopCheck))) continue;
      char chunk[16384];
      const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
      if (n > 0) {
        buffer.append(chunk, size_t(n));
        return Read::more;
      }
      if (n == 0) return Read::closed;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return Read::closed;
    }
  }

  // Reads the next request whole into the front of `buffer` (which may already hold some or
  // all of it); false when the connection is to close instead.
  bool read_request(int fd, std::string& buffer, RequestFrame& frame) {
    if (buffer.empty() && read_more(fd, buffer, Clock::now() + limits_.idle_timeout) != Read::more)
      return false;  // idle, closed or stopping: nothing to answer
    const auto head_deadline = Clock::now() + limits_.request_timeout;
    std::optional<Clock::time_point> body_deadline;
    frame = RequestFrame{};
    while (true) {
      frame = frame_request(buffer, limits_.framing, frame);  // resumes where it stopped
      if (frame.state == RequestFrame::State::complete) break;
      if (frame.state == RequestFrame::State::bad) {
        answer(fd, frame.status, frame.message);
        linger(fd);
        return false;
      }
      const bool body = frame.state == RequestFrame::State::need_body;
      if (body && !body_deadline) {
        body_deadline = Clock::now() + limits_.request_timeout;
        static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        if (frame.expects_continue &&
            write_some(fd, kContinue.data(), kContinue.size(), limits_.request_timeout) !=
                ssize_t(kContinue.size()))
          return false;
      }
      const Read r = read_more(fd, buffer, body ? *body_deadline : head_deadline);
      if (r == Read::timed_out) {
        ++metrics_.requests_timed_out;
        answer(fd, 408,
               fmt::format("the request's {} did not arrive within {} ms",
                           body ? "body" : "headers", limits_.request_timeout.count()));
        ::shutdown(fd, SHUT_WR);  // no lingering: this client is the slow one
      }
      if (r != Read::more) return false;
    }
    if (frame.expects_continue) {  // answered here (or needless): cpp-httplib must not again
      const size_t line = frame.expect_end - frame.expect_begin;
      buffer.erase(frame.expect_begin, line);
      frame.frame_bytes -= line;
    }
    return true;
  }

  // One connection, on its own thread, until it closes, idles out, breaks a limit or the
  // server stops.
  void serve(int fd) {
    const Address local = address_of(fd, false), remote = address_of(fd, true);
    std::string buffer;  // bytes received and not yet answered
    for (int served = 1; !stopping(); ++served) {
      RequestFrame frame;
      if (!read_request(fd, buffer, frame)) break;
      RequestStream stream(fd, std::string_view(buffer).substr(0, frame.frame_bytes), local, remote,
                           limits_.request_timeout);
      const bool last = stopping() || served >= limits_.max_requests_per_connection;
      bool connection_closed = false;
      const bool ok = process_request(stream, last, connection_closed, nullptr);
      buffer.erase(0, frame.frame_bytes);
      if (!ok || connection_closed || last) break;
    }
    ::shutdown(fd, SHUT_WR);
    ::close(fd);
  }

  const ConnectionLimits limits_;
  Metrics& metrics_;
  std::mutex mutex_;
  std::condition_variable ended_;
  int open_ = 0;
  std::map<std::string, int> per_client_;
};

}  // namespace

std::unique_ptr<httplib::Server> make_http_server(const ConnectionLimits& limits,
                                                  Metrics& metrics) {
  return std::make_unique<GuardedServer>(limits, metrics);
}

void widen_listen_backlog(httplib::Server& server) {
  auto* guarded = dynamic_cast<GuardedServer*>(&server);
  SPS_ASSERT(guarded != nullptr);
  guarded->widen_listen_backlog();
}

}  // namespace sps::serve
