#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

namespace sps {

size_t utf8_sequence_length(std::string_view text, size_t i, size_t* maximal_subpart) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned char lead = s[i];
  if (lead < 0x80) return 1;
  size_t need;                       // continuation bytes after the lead
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 1;
  } else if (lead == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
    need = 2;
  } else if (lead == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (lead == 0xF0) {
    need = 3, lo = 0x90;
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    need = 3;
  } else if (lead == 0xF4) {
    need = 3, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    if (maximal_subpart) *maximal_subpart = 1;
    return 0;
  }
  size_t k = 1;
  for (; k <= need; ++k) {
    if (i + k >= n) break;
    const unsigned char c = s[i + k];
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) break;
  }
  if (k > need) return need + 1;
  if (maximal_subpart) *maximal_subpart = k;  // the lead and the valid continuations
  return 0;
}

size_t find_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Skip ASCII eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (s[i] < 0x80) {
      ++i;
      continue;
    }
    const size_t len = utf8_sequence_length(text, i, nullptr);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

size_t append_repaired_utf8(std::string_view text, std::string& out) {
  size_t replacements = 0;
  size_t i = 0;
  while (i < text.size()) {
    const size_t bad = find_invalid_utf8(text.substr(i));
    if (bad == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, bad));
    size_t skip = 1;
    utf8_sequence_length(text, i + bad, &skip);
    out.append("\xEF\xBF\xBD");
    ++replacements;
    i += bad + skip;
  }
  return replacements;
}

}  // namespace sps
