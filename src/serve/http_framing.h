#pragma once
// Where one HTTP/1.1 request ends in the bytes a connection has sent: the request line and
// headers up to the blank line, then a body of Content-Length bytes or in chunks, or none.
// `sps serve` reads a whole request this way, under its deadlines, before cpp-httplib parses
// it (serve/connections.h), so a slow client never holds a thread that others need, the
// bytes after a request (a pipelined next one) are kept for it, and sizes are refused
// before they are read.
//
// The head is read as cpp-httplib reads it: lines end at LF, only lines that end in CRLF
// count, and a line that is CRLF alone ends the head. A request with both Content-Length and
// Transfer-Encoding, two different lengths, a transfer coding other than chunked, chunk
// trailers or a malformed chunk is refused (400, 501) rather than guessed at.
#include <cstddef>
#include <string>
#include <string_view>

namespace sps::serve {

struct FramingLimits {
  size_t max_head_bytes = 64 << 10;  // request line and headers: more is 431
  size_t max_body_bytes = 1 << 20;   // the body (chunks: their data): more is 413
};

struct RequestFrame {
  enum class State {
    need_head,  // the head is not complete yet
    need_body,  // the head is (head_bytes), the body is not
    complete,   // the request is bytes [0, frame_bytes)
    bad,        // refuse with `status` and `message`, then close
  };
  State state = State::need_head;
  size_t head_bytes = 0;   // once the head is complete
  size_t frame_bytes = 0;  // once complete
  // `Expect: 100-continue`: its line is bytes [expect_begin, expect_end) of the head.
  bool expects_continue = false;
  size_t expect_begin = 0, expect_end = 0;
  int status = 0;
  std::string message;

  // Where framing stopped while it needs more, so that a call with more of the same bytes
  // resumes there instead of reading them all again (a body of many tiny chunks would cost
  // time quadratic in their number): the head's bytes already searched for its end; the
  // body's end (Content-Length); a chunked body's next size line and its data so far.
  size_t head_searched = 0;
  size_t body_end = 0;
  bool chunked = false;
  size_t next_chunk_at = 0;
  uint64_t chunk_data = 0;
};

// Frames the request that starts at bytes[0]. Call again with more bytes while it needs
// them, passing the last answer as `resume` (the bytes it saw must be the start of the new
// ones); the answer is the same as from a fresh start, and depends only on the bytes and the
// limits.
RequestFrame frame_request(std::string_view bytes, const FramingLimits& limits,
                           const RequestFrame& resume = {});

}  // namespace sps::serve
