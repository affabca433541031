#pragma once
// GPT-2's byte alphabet: the token strings of encoder.json and vocab.bpe write each byte as
// a printable code point, so that every token is text.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/utf8.h"

namespace sps {

// GPT-2's reversible map from bytes to printable code points (token strings in
// encoder.json and vocab.bpe are written in it).
struct ByteAlphabet {
  std::array<uint32_t, 256> to_code_point{};
  std::array<int, 512> to_byte{};  // by code point; -1 = not in the alphabet
  ByteAlphabet() {
    to_byte.fill(-1);
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_code_point[b] = printable ? b : 256 + extra++;
      to_byte[to_code_point[b]] = b;
    }
  }
  // Token string -> bytes; false if a character is not in the alphabet.
  bool decode(std::string_view s, std::string& out) const {
    out.clear();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
      uint32_t cp;
      size_t len = utf8_sequence_length(s, i, nullptr);
      if (len == 1) {
        cp = p[i];
      } else if (len == 2) {
        cp = ((p[i] & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
      } else {
        return false;  // ill-formed, or beyond U+07FF: not in the alphabet
      }
      if (cp >= to_byte.size() || to_byte[cp] < 0) return false;
      out.push_back(static_cast<char>(to_byte[cp]));
      i += len;
    }
    return true;
  }
};

inline const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

}  // namespace sps
