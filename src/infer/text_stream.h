#pragma once
// Streaming a row's generated text: bytes arrive token by token; a piece is released as soon
// as it can no longer become part of a stop string and does not end inside a UTF-8
// character. When a stop string appears the text ends just before it.
#include <string>
#include <string_view>
#include <vector>

namespace sps {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop_strings = {});

  // Appends a token's bytes; returns the text that became final (possibly empty). After a
  // stop string appeared, stopped() is true and further pushes return nothing.
  std::string push(std::string_view bytes);
  // Releases whatever is held back (the stream is over).
  std::string finish();

  bool stopped() const { return stopped_; }
  // The whole text so far (cut before the stop string once stopped).
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  std::string text_;
  size_t emitted_ = 0;
  bool stopped_ = false;
};

}  // namespace sps
