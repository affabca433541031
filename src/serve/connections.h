#pragma once
// The connections of `sps serve` (docs/serving.md § Connections). cpp-httplib 0.11 parses
// requests, routes them and writes the answers, but its own connection loop cannot be made
// safe by its settings: a worker thread reads a request with a timeout per read, not per
// request, so a client sending a byte every few seconds holds the worker for good (and a
// handful of them every worker, /health included); each request of a connection gets a
// fresh read buffer, so the bytes of a pipelined second request are dropped; and nothing
// caps connections per client. So the server here takes over each accepted socket
// (cpp-httplib's `process_and_close_socket`) and:
//
//   - admits it on the accepting thread, or answers 503 with Retry-After and closes it, past
//     `max_connections` open in total or `max_per_client` from one address;
//   - gives each admitted connection a thread of its own, so a slow or idle client holds
//     nothing another needs, and /health and /metrics answer while completions run;
//   - reads each request whole (serve/http_framing.h) before cpp-httplib sees it: the head
//     within `request_timeout` of its first byte, then the body within `request_timeout`
//     of the head's end; a request late on either is answered 408 and the connection
//     closed, and sizes over the limits are refused (413, 431) before they are read;
//   - hands cpp-httplib exactly that request's bytes (it can never block on the socket or
//     read past the request) and keeps what follows for the next one, so pipelined requests
//     are answered in order;
//   - writes each answer with a deadline of `request_timeout` per write.
#include <chrono>
#include <memory>

#include "serve/http_framing.h"
#include "serve/metrics.h"

namespace httplib {
class Server;
}

namespace sps::serve {

struct ConnectionLimits {
  int max_connections = 128;  // open at once; more are answered 503 and closed
  int max_per_client = 32;    // open at once from one client address
  // A request's head from its first byte, then again its body, and each write of an answer.
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{5000};  // a kept-alive connection between requests
  int max_requests_per_connection = 1000;        // then the answer says Connection: close
  int retry_after_seconds = 1;                   // of the 503 past the caps
  FramingLimits framing;
};

// A cpp-httplib server whose connections are handled as above: add routes and handlers, bind
// and listen as usual. `metrics` must outlive it; its destruction waits for every
// connection's thread to end.
std::unique_ptr<httplib::Server> make_http_server(const ConnectionLimits& limits, Metrics& metrics);

// Once a server made by make_http_server is bound: the kernel may hold as many connections
// waiting to be accepted as it allows (SOMAXCONN), not cpp-httplib's few, so a burst of
// connects is not delayed by a SYN retransmit.
void widen_listen_backlog(httplib::Server& server);

}  // namespace sps::serve
