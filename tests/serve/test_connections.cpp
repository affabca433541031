// The server's connections against hostile or careless clients (serve/connections.h): slow
// clients are closed at their deadline while /health and completions answer, connections
// are capped per address and in total, pipelined requests are answered in order, sizes are
// refused from the head, Expect: 100-continue gets one interim answer, a burst of connects
// waits for no retransmit, and a second server cannot take a port in use.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "serve/server.h"
#include "serve_fixtures.h"
#include "util/error.h"

namespace sps::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

serve::ServerOptions guarded(int64_t timeout_ms, int max_connections = 64, int per_client = 64) {
  serve::ServerOptions o = small_server(2);
  o.connections.request_timeout = milliseconds(timeout_ms);
  o.connections.max_connections = max_connections;
  o.connections.max_per_client = per_client;
  return o;
}

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

std::string post(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string body_of(const std::string& response) {
  return response.substr(response.find("\r\n\r\n") + 4);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// 40 clients each send a byte of their request every 0.2 s (more clients than cpp-httplib's
// 32 workers, which they used to hold for good). /health and a completion still answer
// within a second, and each slow client is answered 408 and closed when its deadline passes,
// not before.
TEST(Connections, SlowClientsAreClosedAtTheirDeadlineAndHoldNothing) {
  ServeModel m("standard");
  LiveServer live(*m.model, guarded(1000));
  constexpr int kSlow = 40;
  std::vector<std::unique_ptr<RawConnection>> slow;
  std::vector<Clock::time_point> first_byte(kSlow);
  const std::string request = get("/health");
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<RawConnection>(live.port));
    ASSERT_TRUE(slow.back()->connected());
    first_byte[i] = Clock::now();
    slow.back()->send(request.substr(0, 1));
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (size_t k = 1; k < request.size() && !stop; ++k) {
      std::this_thread::sleep_for(milliseconds(200));
      for (auto& c : slow) c->send(request.substr(k, 1));
    }
  });

  std::this_thread::sleep_for(milliseconds(300));  // the slow ones are all well under way
  httplib::Client c = live.client();
  auto start = Clock::now();
  auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_LT(seconds_since(start), 1.0);
  start = Clock::now();
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("sps_kv_cache_bytes_in_use"), std::string::npos);
  EXPECT_LT(seconds_since(start), 1.0);
  start = Clock::now();
  int status = 0;
  post_json(c, "/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 4}, {"temperature", 0}},
            &status);
  EXPECT_EQ(status, 200);
  EXPECT_LT(seconds_since(start), 1.0);

  for (int i = 0; i < kSlow; ++i) {
    bool closed = false;
    const std::string answer = slow[i]->read_until_closed(milliseconds(3000), &closed);
    const double at = seconds_since(first_byte[i]);
    EXPECT_TRUE(closed) << i;
    EXPECT_EQ(status_of(answer), 408) << answer;
    EXPECT_NE(answer.find("headers did not arrive within 1000 ms"), std::string::npos) << answer;
    EXPECT_GE(at, 0.99) << i;  // not before the deadline
  }
  // All closed by 3 s after the first byte: the deadline (1 s) plus slack for a busy machine.
  EXPECT_LT(seconds_since(first_byte.back()), 3.5);
  stop = true;
  trickle.join();
  EXPECT_EQ(live.server->metrics().requests_timed_out.load(), uint64_t(kSlow));
}

// A body that stops coming has its own deadline, counted from the end of the headers.
TEST(Connections, ALateBodyIsAnswered408) {
  ServeModel m("standard");
  LiveServer live(*m.model, guarded(500));
  RawConnection c(live.port);
  const std::string request = post("/tokenize", json({{"prompt", "abcdef"}}).dump());
  const auto start = Clock::now();
  c.send(request.substr(0, request.size() - 3));
  bool closed = false;
  const std::string answer = c.read_until_closed(milliseconds(3000), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(status_of(answer), 408) << answer;
  EXPECT_NE(answer.find("body did not arrive within 500 ms"), std::string::npos) << answer;
  EXPECT_GE(seconds_since(start), 0.49);
}

// Past the caps a connection is answered 503 (Retry-After) and closed at once; the others
// and other addresses go on.
TEST(Connections, ConnectionsAreCappedPerAddressAndInTotal) {
  ServeModel m("standard");
  LiveServer live(*m.model, guarded(10000, /*max_connections=*/5, /*per_client=*/3));
  const auto expect_refused = [&](RawConnection& c) {
    bool closed = false;
    const auto start = Clock::now();
    const std::string answer = c.read_until_closed(milliseconds(2000), &closed);
    EXPECT_TRUE(closed);
    EXPECT_LT(seconds_since(start), 1.0);
    if (!answer.empty()) {  // the 503 arrives unless the connection was reset first
      EXPECT_EQ(status_of(answer), 503) << answer;
      EXPECT_NE(answer.find("Retry-After: 1\r\n"), std::string::npos) << answer;
    }
  };
  const auto open_becomes = [&](int64_t n) {
    for (int k = 0; k < 300 && live.server->metrics().connections_open != n; ++k)
      std::this_thread::sleep_for(milliseconds(10));
    EXPECT_EQ(live.server->metrics().connections_open.load(), n);
  };
  const auto health_from = [&](const std::string& address) {
    const int64_t before = live.server->metrics().connections_open;
    int status = -1;
    {
      RawConnection c(live.port, address);
      c.send(get("/health", "Connection: close\r\n"));
      const auto answers = c.read_responses(1, milliseconds(2000));
      if (!answers.empty()) status = status_of(answers[0]);
    }
    open_becomes(before);  // its connection has ended
    return status;
  };
  // Three idle connections from 127.0.0.1 fill its share; a fourth is refused.
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 3; ++i) held.push_back(std::make_unique<RawConnection>(live.port));
  open_becomes(3);
  RawConnection fourth(live.port);
  expect_refused(fourth);
  EXPECT_EQ(health_from("127.0.0.2"), 200);  // another address is served
  // Two more from 127.0.0.2 reach the total of 5: a third address is refused too.
  held.push_back(std::make_unique<RawConnection>(live.port, "127.0.0.2"));
  held.push_back(std::make_unique<RawConnection>(live.port, "127.0.0.2"));
  open_becomes(5);
  RawConnection third(live.port, "127.0.0.3");
  expect_refused(third);
  // A connection that ends makes room again.
  held.back()->close();
  open_becomes(4);
  EXPECT_EQ(health_from("127.0.0.3"), 200);
  EXPECT_EQ(live.server->metrics().connections_refused.load(), 2u);
}

// Several requests in one write (and one split across writes) are all answered, in order,
// on the one connection.
TEST(Connections, PipelinedRequestsAreAnsweredInOrder) {
  ServeModel m("standard");
  LiveServer live(*m.model, guarded(5000));
  RawConnection c(live.port);
  const std::string completion = post(
      "/v1/completions",
      json({{"prompt", "Hi"}, {"max_tokens", 3}, {"temperature", 0}, {"ignore_eos", true}}).dump());
  const std::string tokenize = post("/tokenize", json({{"prompt", "ab"}}).dump());
  ASSERT_TRUE(
      c.send(get("/health") + tokenize + completion + get("/v1/models") + tokenize.substr(0, 30)));
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(c.send(tokenize.substr(30) + get("/nowhere")));
  const std::vector<std::string> answers = c.read_responses(6, milliseconds(5000));
  ASSERT_EQ(answers.size(), 6u);
  EXPECT_EQ(body_of(answers[0]), R"({"status":"ok"})");
  EXPECT_EQ(json::parse(body_of(answers[1]))["count"], 2);
  const json done = json::parse(body_of(answers[2]));
  EXPECT_EQ(done["object"], "text_completion") << done.dump();
  EXPECT_EQ(done["usage"]["completion_tokens"], 3);
  EXPECT_EQ(json::parse(body_of(answers[3]))["object"], "list");
  EXPECT_EQ(body_of(answers[4]), body_of(answers[1]));
  EXPECT_EQ(status_of(answers[5]), 404);
}

// Sizes and shapes the server does not take are answered from the head, before any body is
// read, with the limit in the message; the connection then closes.
TEST(Connections, OversizeAndAmbiguousRequestsAreRefusedFromTheHead) {
  ServeModel m("standard");
  serve::ServerOptions o = guarded(5000);
  o.connections.framing.max_body_bytes = 4096;
  LiveServer live(*m.model, o);
  const auto answer_to = [&](const std::string& bytes) {
    RawConnection c(live.port);
    c.send(bytes);
    bool closed = false;
    const std::string answer = c.read_until_closed(milliseconds(3000), &closed);
    EXPECT_TRUE(closed);
    return answer;
  };
  // A body of 10 MB announced, none sent: 413 at once, naming the limit.
  std::string a = answer_to("POST /v1/completions HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n");
  EXPECT_EQ(status_of(a), 413) << a;
  EXPECT_NE(a.find("at most 4096 (--max-body-bytes)"), std::string::npos) << a;
  EXPECT_NE(a.find("\"error\""), std::string::npos) << a;
  a = answer_to("GET / HTTP/1.1\r\nX: " + std::string(70000, 'x') + "\r\n\r\n");
  EXPECT_EQ(status_of(a), 431) << a.substr(0, 200);
  a = answer_to("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n");
  EXPECT_EQ(status_of(a), 501) << a;
  a = answer_to(
      "POST /tokenize HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(status_of(a), 400) << a;
  // A chunked body is taken, and counted against the limit by its data.
  RawConnection chunked(live.port);
  chunked.send("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
               "6\r\n{\"prom\r\n9\r\npt\": \"ab\"\r\n1\r\n}\r\n0\r\n\r\n");
  const auto answers = chunked.read_responses(1, milliseconds(3000));
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(json::parse(body_of(answers[0]))["count"], 2);
  a = answer_to("POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1001\r\n");
  EXPECT_EQ(status_of(a), 413) << a;
  EXPECT_EQ(live.server->metrics().requests_rejected.load(), 5u);
}

// A client that asks before sending its body gets one "100 Continue", then its answer.
TEST(Connections, ExpectContinueGetsOneInterimAnswer) {
  ServeModel m("standard");
  LiveServer live(*m.model, guarded(5000));
  RawConnection c(live.port);
  const std::string body = json({{"prompt", "abc"}}).dump();
  const std::string request = post("/tokenize", body, "Expect: 100-continue\r\n");
  c.send(request.substr(0, request.size() - body.size()));
  auto interim = c.read_responses(1, milliseconds(3000));
  ASSERT_EQ(interim.size(), 1u);
  EXPECT_EQ(interim[0], "HTTP/1.1 100 Continue\r\n\r\n");
  c.send(body + get("/health"));
  const auto answers = c.read_responses(2, milliseconds(3000));
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(json::parse(body_of(answers[0]))["count"], 3);
  EXPECT_EQ(status_of(answers[1]), 200);
}

// A burst of connects to a server that is bound but not yet accepting: the kernel completes
// all 64 at once. cpp-httplib's own backlog (5) completed 6 and left the rest waiting for a
// SYN retransmit, about a second.
TEST(Connections, ABurstOfConnectsIsHeldUntilAccepted) {
  ServeModel m("standard");
  serve::ServerOptions o = small_server(2);
  o.host = "127.0.0.1";
  serve::Server server(*m.model, byte_level_tokenizer(), o);
  const int port = server.bind();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(uint16_t(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  std::vector<pollfd> burst(64);
  for (pollfd& p : burst) {
    p.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    p.events = POLLOUT;
    ASSERT_GE(p.fd, 0);
    const int r = ::connect(p.fd, reinterpret_cast<sockaddr*>(&to), sizeof(to));
    ASSERT_TRUE(r == 0 || errno == EINPROGRESS) << std::strerror(errno);
  }
  int connected = 0;
  const auto deadline = Clock::now() + milliseconds(500);
  for (pollfd& p : burst) {
    const int left = int(std::max<int64_t>(
        0, std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count()));
    int error = 0;
    socklen_t size = sizeof(error);
    if (::poll(&p, 1, left) == 1 && getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 &&
        error == 0)
      ++connected;
    ::close(p.fd);
  }
  EXPECT_EQ(connected, 64);
}

// cpp-httplib binds with SO_REUSEPORT, with which a second server on the same port starts and
// the kernel splits the clients between the two; here the second one fails, naming the port.
TEST(Connections, ASecondServerOnABusyPortFails) {
  ServeModel m("standard"), other("standard");
  LiveServer live(*m.model, small_server(2));
  serve::ServerOptions o = small_server(2);
  o.host = "127.0.0.1";
  o.port = live.port;
  serve::Server second(*other.model, byte_level_tokenizer(), o);
  try {
    second.bind();
    ADD_FAILURE() << "a second server bound port " << live.port;
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("cannot listen on 127.0.0.1:{0}: port {0} is in use (another server "
                          "runs there?)",
                          live.port));
  }
}

}  // namespace
}  // namespace sps::testing
