#pragma once
// Text helpers of the tokenizer file loaders: lines of a file, and excerpts of it that are
// safe to print in an error message.
#include <cstddef>
#include <string>
#include <string_view>

namespace sps {

// Splits a file into lines (without '\n' or a trailing '\r').
template <typename F>
void for_each_line(std::string_view text, F&& line) {
  size_t number = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    line(++number, l);
    pos = end + 1;
  }
}

// At most 80 bytes of `s`, each byte outside printable ASCII as \xNN, "..." when cut.
std::string printable(std::string_view s);

}  // namespace sps
