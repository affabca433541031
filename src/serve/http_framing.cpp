#include "serve/http_framing.h"

#include <fmt/format.h>

#include <cstdint>
#include <optional>

namespace sps::serve {

namespace {

constexpr size_t kMaxChunkLineBytes = 1024;  // a chunk's size line, extensions included

bool same_text(std::string_view a, std::string_view b) {  // ASCII, any case
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Text from the request for a message: printable ASCII, at most 40 bytes.
std::string shown(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  return s.size() > 40 ? out + "..." : out;
}

RequestFrame refuse(RequestFrame f, int status, std::string message) {
  f.state = RequestFrame::State::bad;
  f.status = status;
  f.message = std::move(message);
  return f;
}

std::optional<uint64_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return v;
}

RequestFrame body_too_large(RequestFrame f, uint64_t bytes, const FramingLimits& limits,
                            const char* what) {
  return refuse(std::move(f), 413,
                fmt::format("the request body is {}{} bytes; this server accepts at most {} "
                            "(--max-body-bytes)",
                            what, bytes, limits.max_body_bytes));
}

// The chunks from bytes[f.next_chunk_at], f.chunk_data bytes of data before them: each a
// hexadecimal size line (extensions allowed), the data and CRLF, then the last chunk (size 0)
// and an empty trailer section.
RequestFrame frame_chunks(std::string_view bytes, RequestFrame f, const FramingLimits& limits) {
  size_t at = f.next_chunk_at;
  uint64_t data = f.chunk_data;
  f.state = RequestFrame::State::need_body;
  while (true) {
    f.next_chunk_at = at;  // a return that needs more resumes at this chunk's size line
    f.chunk_data = data;
    const size_t newline = bytes.find('\n', at);
    if (newline == std::string_view::npos) {
      if (bytes.size() - at > kMaxChunkLineBytes)
        return refuse(std::move(f), 400, "a chunk size line is too long");
      return f;
    }
    const std::string_view line = bytes.substr(at, newline + 1 - at);
    if (line.size() > kMaxChunkLineBytes)
      return refuse(std::move(f), 400, "a chunk size line is too long");
    if (line.size() < 2 || line[line.size() - 2] != '\r')
      return refuse(std::move(f), 400, "a chunk size line does not end in CRLF");
    size_t digits = 0;
    uint64_t size = 0;
    for (; digits < line.size() - 2; ++digits) {
      const char c = line[digits];
      const int v = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (v < 0) break;
      if (digits == 15) return refuse(std::move(f), 400, "a chunk size has too many digits");
      size = size * 16 + uint64_t(v);
    }
    const std::string_view rest = trim(line.substr(digits, line.size() - 2 - digits));
    if (digits == 0 || (!rest.empty() && rest.front() != ';'))
      return refuse(std::move(f), 400,
                    fmt::format("chunk size '{}' is not a hexadecimal number",
                                shown(line.substr(0, line.size() - 2))));
    at = newline + 1;
    if (size == 0) {  // the last chunk: only an empty trailer section may follow
      if (bytes.size() - at < 2) return f;
      if (bytes.substr(at, 2) != "\r\n")
        return refuse(std::move(f), 400, "chunked body: trailers are not accepted");
      f.state = RequestFrame::State::complete;
      f.frame_bytes = at + 2;
      return f;
    }
    data += size;
    if (data > limits.max_body_bytes) return body_too_large(std::move(f), data, limits, "over ");
    if (bytes.size() - at < size + 2) return f;
    if (bytes.substr(at + size, 2) != "\r\n")
      return refuse(std::move(f), 400,
                    fmt::format("chunked body: a chunk of {} bytes is not followed by CRLF", size));
    at += size + 2;
  }
}

// A body of Content-Length bytes that ends at f.body_end.
RequestFrame frame_body(std::string_view bytes, RequestFrame f) {
  if (bytes.size() < f.body_end) {
    f.state = RequestFrame::State::need_body;
    return f;
  }
  f.state = RequestFrame::State::complete;
  f.frame_bytes = f.body_end;
  return f;
}

}  // namespace

RequestFrame frame_request(std::string_view bytes, const FramingLimits& limits,
                           const RequestFrame& resume) {
  if (resume.state == RequestFrame::State::need_body)
    return resume.chunked ? frame_chunks(bytes, resume, limits) : frame_body(bytes, resume);
  RequestFrame f;
  if (resume.state == RequestFrame::State::need_head)  // "\n\r\n" may straddle the old end
    f.head_searched = resume.head_searched < 2 ? 0 : resume.head_searched - 2;
  const size_t blank = bytes.find("\n\r\n", f.head_searched);  // the LF ending the last header
  if (blank == std::string_view::npos || blank + 3 > limits.max_head_bytes) {
    if (bytes.size() >= limits.max_head_bytes)
      return refuse(
          std::move(f), 431,
          fmt::format("the request line and headers are over {} bytes", limits.max_head_bytes));
    f.head_searched = bytes.size();
    return f;
  }
  f.head_bytes = blank + 3;

  std::optional<uint64_t> length;
  bool chunked = false, transfer_encoding = false;
  const size_t request_line_end = bytes.find('\n');
  for (size_t at = request_line_end + 1; at <= blank;) {
    const size_t newline = bytes.find('\n', at);
    const size_t line_begin = at;
    std::string_view line = bytes.substr(at, newline + 1 - at);
    at = newline + 1;
    if (line.size() < 2 || line[line.size() - 2] != '\r') continue;  // cpp-httplib skips it too
    line.remove_suffix(2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, colon), value = trim(line.substr(colon + 1));
    if (same_text(name, "Content-Length")) {
      const std::optional<uint64_t> n = decimal(value);
      if (!n)
        return refuse(std::move(f), 400,
                      fmt::format("Content-Length '{}' is not a number of bytes", shown(value)));
      if (length && *length != *n)
        return refuse(std::move(f), 400, "two different Content-Length headers");
      length = n;
    } else if (same_text(name, "Transfer-Encoding")) {
      if (!same_text(value, "chunked"))
        return refuse(
            std::move(f), 501,
            fmt::format("Transfer-Encoding '{}' is not supported (only chunked)", shown(value)));
      transfer_encoding = chunked = true;
    } else if (same_text(name, "Expect") && same_text(value, "100-continue")) {
      f.expects_continue = true;
      f.expect_begin = line_begin;
      f.expect_end = at;
    }
  }
  if (transfer_encoding && length)
    return refuse(std::move(f), 400,
                  "both Content-Length and Transfer-Encoding; a request may have only one");
  if (chunked) {
    f.chunked = true;
    f.next_chunk_at = f.head_bytes;
    return frame_chunks(bytes, std::move(f), limits);
  }
  const uint64_t body = length.value_or(0);  // no length and no chunks: no body
  if (body > limits.max_body_bytes) return body_too_large(std::move(f), body, limits, "");
  f.body_end = f.head_bytes + size_t(body);
  return frame_body(bytes, std::move(f));
}

}  // namespace sps::serve
