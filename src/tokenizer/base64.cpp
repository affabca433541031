#include "tokenizer/base64.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace sps {

namespace {

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

bool base64_decode(std::string_view s, std::string& out) {
  out.clear();
  if (s.empty() || s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = static_cast<unsigned char>(s[i + k]);
      if (c == '=' && last && k >= 2) {
        v[k] = 0, ++pad;
      } else {
        if (pad) return false;  // data after padding
        v[k] = base64_value(c);
        if (v[k] < 0) return false;
      }
    }
    const uint32_t triple = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>(triple >> 16));
    if (pad < 2) out.push_back(static_cast<char>((triple >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(triple & 0xFF));
  }
  return true;
}

std::string base64_encode(std::string_view bytes) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t triple = 0;
    for (size_t k = 0; k < 3; ++k)
      triple = (triple << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0);
    out.push_back(digits[(triple >> 18) & 63]);
    out.push_back(digits[(triple >> 12) & 63]);
    out.push_back(n > 1 ? digits[(triple >> 6) & 63] : '=');
    out.push_back(n > 2 ? digits[triple & 63] : '=');
  }
  return out;
}

}  // namespace sps
