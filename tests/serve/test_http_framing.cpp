// Where a request ends in a connection's bytes (serve/http_framing.h): every prefix of a
// request needs more and the whole is complete at exactly its length, framing resumed as
// bytes arrive answers as a fresh start does (in time linear in the bytes), pipelined requests
// frame one by one, and sizes and shapes the server refuses are refused from the head alone.
#include "serve/http_framing.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace sps::serve {
namespace {

using State = RequestFrame::State;

const std::string kGet = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string kPost = "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                          "Content-Length: 17\r\n\r\n{\"prompt\": \"abc\"}";
const std::string kChunked = "POST /tokenize HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "7\r\n{\"promp\r\na;ext=1\r\nt\": \"abc\"}\r\n0\r\n\r\n";

RequestFrame frame(const std::string& bytes, FramingLimits limits = {}) {
  return frame_request(bytes, limits);
}

// Every proper prefix needs more; the whole request is complete at its own length, whatever
// follows it.
void expect_frames_exactly(const std::string& request) {
  for (size_t n = 0; n < request.size(); ++n) {
    const RequestFrame f = frame(request.substr(0, n));
    EXPECT_TRUE(f.state == State::need_head || f.state == State::need_body)
        << n << " bytes of " << request << ": " << f.message;
  }
  for (const std::string& after : {std::string(), kGet, std::string("garbage"), kPost}) {
    const RequestFrame f = frame(request + after);
    EXPECT_EQ(f.state, State::complete) << f.message;
    EXPECT_EQ(f.frame_bytes, request.size()) << request;
  }
}

TEST(HttpFraming, RequestsEndExactlyWhereTheyEnd) {
  expect_frames_exactly(kGet);
  expect_frames_exactly(kPost);
  expect_frames_exactly(kChunked);
  // A body without a length is no body; a GET may have one (it is read, then dropped).
  expect_frames_exactly("POST /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_frames_exactly("GET / HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc");
  // Header names and the chunked coding in any case; the same length twice is one length.
  expect_frames_exactly("POST / HTTP/1.1\r\nTRANSFER-ENCODING: Chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n");
  expect_frames_exactly("POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length:  2 \r\n\r\nab");
}

// Framing resumed byte by byte (each call given the last answer, as the server reads) gives
// at every length the answer of a fresh start: requests whole, cut, and refused.
TEST(HttpFraming, ResumingGivesTheAnswersOfAFreshStart) {
  FramingLimits small;
  small.max_head_bytes = 60;
  small.max_body_bytes = 20;
  const std::string bad_chunk = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n";
  for (const FramingLimits& limits : {FramingLimits{}, small})
    for (const std::string& request :
         {kGet, kPost, kChunked, kChunked + kGet, bad_chunk,
          std::string("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") +
              "5\r\nhello\r\n5\r\nworld\r\n5\r\nagain\r\n5\r\nlarge\r\n0\r\n\r\n"}) {
      RequestFrame resumed;
      for (size_t n = 0; n <= request.size(); ++n) {
        const std::string bytes = request.substr(0, n);
        resumed = frame_request(bytes, limits, resumed);
        const RequestFrame fresh = frame_request(bytes, limits);
        ASSERT_EQ(resumed.state, fresh.state) << n << " bytes of " << request;
        EXPECT_EQ(resumed.status, fresh.status);
        EXPECT_EQ(resumed.message, fresh.message);
        EXPECT_EQ(resumed.head_bytes, fresh.head_bytes);
        EXPECT_EQ(resumed.frame_bytes, fresh.frame_bytes);
        if (resumed.state == State::complete || resumed.state == State::bad) break;
      }
    }
}

// A body of 100,000 one-byte chunks read a few bytes at a time: resumed framing reads each
// byte about once (a fresh start at every read took minutes: quadratic in the chunks).
TEST(HttpFraming, ManyTinyChunksFrameInLinearTime) {
  std::string request = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 100000; ++i) request += "1\r\nx\r\n";
  request += "0\r\n\r\n";
  FramingLimits limits;
  limits.max_body_bytes = 1 << 20;
  RequestFrame f;
  const auto start = std::chrono::steady_clock::now();
  for (size_t n = 0; n <= request.size() && f.state != State::complete; n += 7)
    f = frame_request(std::string_view(request).substr(0, n), limits, f);
  f = frame_request(request, limits, f);
  EXPECT_EQ(f.state, State::complete);
  EXPECT_EQ(f.frame_bytes, request.size());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(HttpFraming, PipelinedRequestsFrameOneByOne) {
  const std::string all = kGet + kPost + kChunked + kGet;
  std::string rest = all;
  std::vector<size_t> lengths;
  while (!rest.empty()) {
    const RequestFrame f = frame(rest);
    ASSERT_EQ(f.state, State::complete) << rest;
    lengths.push_back(f.frame_bytes);
    rest.erase(0, f.frame_bytes);
  }
  EXPECT_EQ(lengths,
            (std::vector<size_t>{kGet.size(), kPost.size(), kChunked.size(), kGet.size()}));
}

TEST(HttpFraming, HeadAndBodyStatesAndTheHeadLength) {
  const std::string head = kPost.substr(0, kPost.find("\r\n\r\n") + 4);
  RequestFrame f = frame(head);
  EXPECT_EQ(f.state, State::need_body);
  EXPECT_EQ(f.head_bytes, head.size());
  f = frame(head.substr(0, head.size() - 1));
  EXPECT_EQ(f.state, State::need_head);
}

// Lines that do not end in CRLF do not count, as for cpp-httplib: a length on one is no
// length, and a bare blank line does not end the head.
TEST(HttpFraming, OnlyCrlfLinesCount) {
  RequestFrame f = frame("POST / HTTP/1.1\r\nContent-Length: 5\n\r\nhello");
  EXPECT_EQ(f.state, State::complete);
  EXPECT_EQ(f.frame_bytes, std::string("POST / HTTP/1.1\r\nContent-Length: 5\n\r\n").size());
  EXPECT_EQ(frame("GET / HTTP/1.1\n\n").state, State::need_head);
}

TEST(HttpFraming, ExpectContinueIsFound) {
  const std::string request =
      "POST / HTTP/1.1\r\nHost: x\r\nexpect: 100-Continue\r\nContent-Length: 2\r\n\r\n";
  const RequestFrame f = frame(request);
  EXPECT_EQ(f.state, State::need_body);
  ASSERT_TRUE(f.expects_continue);
  EXPECT_EQ(request.substr(f.expect_begin, f.expect_end - f.expect_begin),
            "expect: 100-Continue\r\n");
  EXPECT_FALSE(frame(kPost).expects_continue);
}

void expect_refused(const std::string& bytes, int status, const std::string& fragment,
                    FramingLimits limits = {}) {
  const RequestFrame f = frame(bytes, limits);
  EXPECT_EQ(f.state, State::bad) << bytes;
  EXPECT_EQ(f.status, status) << bytes;
  EXPECT_NE(f.message.find(fragment), std::string::npos) << f.message;
}

TEST(HttpFraming, SizesOverTheLimitsAreRefusedFromTheHead) {
  FramingLimits limits;
  limits.max_body_bytes = 100;
  limits.max_head_bytes = 64;
  // The length alone decides: none of the body has arrived.
  expect_refused(
      "POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413,
      "the request body is 101 bytes; this server accepts at most 100 (--max-body-bytes)", limits);
  expect_refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413,
                 "over 101 bytes", limits);
  expect_refused("GET / HTTP/1.1\r\n" + std::string(60, 'x'), 431, "over 64 bytes", limits);
  expect_refused("GET / HTTP/1.1\r\nX: " + std::string(50, 'x') + "\r\n\r\n", 431, "over 64",
                 limits);
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400,
                 "is not a number of bytes");
  limits.max_body_bytes = 101;
  EXPECT_EQ(frame("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", limits).state,
            State::need_body);
}

TEST(HttpFraming, AmbiguousOrUnsupportedBodiesAreRefused) {
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
                 "both Content-Length and Transfer-Encoding");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
                 "two different Content-Length");
  expect_refused("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "'-1' is not a number");
  expect_refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
                 "Transfer-Encoding 'gzip, chunked' is not supported");
  const std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  expect_refused(chunked + "zz\r\n", 400, "chunk size 'zz' is not a hexadecimal number");
  expect_refused(chunked + "1\n", 400, "does not end in CRLF");
  expect_refused(chunked + "2\r\nabc\r\n", 400, "a chunk of 2 bytes is not followed by CRLF");
  expect_refused(chunked + "0\r\nX-Trailer: 1\r\n\r\n", 400, "trailers are not accepted");
  expect_refused(chunked + "1234567890abcdef1\r\n", 400, "too many digits");
  expect_refused(chunked + std::string(2000, '1'), 400, "a chunk size line is too long");
  expect_refused(chunked + "1;" + std::string(2000, 'e'), 400, "too long");
}

}  // namespace
}  // namespace sps::serve
