#include "tokenizer/loader_text.h"

#include <fmt/format.h>

namespace sps {

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7F)
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > 80) out += "...";
  return out;
}

}  // namespace sps
