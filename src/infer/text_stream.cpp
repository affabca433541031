#include "infer/text_stream.h"

#include <algorithm>

namespace sps {

TextStream::TextStream(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings)
    if (!s.empty()) stops_.push_back(std::move(s));
}

namespace {

// Bytes at the end of `text` that start a UTF-8 character not yet complete.
size_t incomplete_utf8_tail(const std::string& text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return length > back ? back : 0;
  }
  return 0;
}

}  // namespace

std::string TextStream::push(std::string_view bytes) {
  if (stopped_) return {};
  const size_t search_from = emitted_;
  text_.append(bytes);
  // The earliest stop string wins.
  size_t cut = std::string::npos;
  for (const std::string& s : stops_) cut = std::min(cut, text_.find(s, search_from));
  if (cut != std::string::npos) {
    stopped_ = true;
    text_.resize(cut);
    std::string piece = text_.substr(emitted_);
    emitted_ = text_.size();
    return piece;
  }
  // Hold back the longest tail that could still grow into a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, text_.size() - emitted_); k > hold; --k)
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  hold = std::max(hold, incomplete_utf8_tail(text_));
  const size_t end = std::max(emitted_, text_.size() - std::min(hold, text_.size()));
  std::string piece = text_.substr(emitted_, end - emitted_);
  emitted_ = end;
  return piece;
}

std::string TextStream::finish() {
  std::string piece = text_.substr(emitted_);
  emitted_ = text_.size();
  return piece;
}

}  // namespace sps
