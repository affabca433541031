#pragma once
// Shared by the data tests: a byte-level tokenizer that needs no files, compressed fixtures
// made with zlib and zstd, and reading token files back.
#include <zlib.h>
#include <zstd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer_fixtures.h"

namespace sps::testing {

// 256 single-byte tokens and EOS = 256: one token per byte of (UTF-8-repaired) text.
inline const BpeTokenizer& byte_tokenizer() {
  static const BpeTokenizer tokenizer = [] {
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
    return BpeTokenizer::from_ranks(std::move(tokens), "bytes");
  }();
  return tokenizer;
}

// One gzip member holding `text`.
inline std::string gzip_bytes(const std::string& text) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  std::string out(deflateBound(&z, text.size()) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

inline std::string zstd_bytes(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3);
  if (ZSTD_isError(n)) throw std::runtime_error("ZSTD_compress");
  out.resize(n);
  return out;
}

// Token ids of a headerless little-endian file of 2- or 4-byte ids.
inline std::vector<uint32_t> read_tokens(const std::string& path, int width = 2) {
  const std::string bytes = read_whole_file(path);
  std::vector<uint32_t> ids(bytes.size() / width);
  for (size_t i = 0; i < ids.size(); ++i) {
    uint32_t id = 0;
    for (int b = 0; b < width; ++b)
      id |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i * width + b])) << (8 * b);
    ids[i] = id;
  }
  return ids;
}

// A JSON string literal for ASCII-and-UTF-8 text (quotes, backslashes, control characters).
inline std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      out += buffer;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace sps::testing
