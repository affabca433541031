#pragma once
// GPT-2's pre-tokenizer: the text is cut into pieces by
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// run with PCRE2 (UTF, UCP, JIT). `\s` is spelled out as the Unicode White_Space property,
// which is what tiktoken's regex engine means by it (PCRE2's own \s also takes U+180E,
// JavaScript's takes U+FEFF but not U+0085).
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <cstddef>
#include <string_view>

namespace sps {

class PreTokenizer {
 public:
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // The pattern in PCRE2 syntax (tests hand the same pattern to the reference tokenizer).
  static const char* pattern();

  // Per-thread matching state; one per thread, used with one PreTokenizer.
  class Matcher {
   public:
    explicit Matcher(const PreTokenizer& pre);
    ~Matcher();
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;

    // Calls piece(std::string_view) for each piece of `text`, in order; the pieces tile
    // the text. `text` must be well-formed UTF-8.
    template <typename F>
    void split(std::string_view text, F&& piece) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t end = next_end(subject, text.size(), pos);
        piece(text.substr(pos, end - pos));
        pos = end;
      }
    }

   private:
    size_t next_end(PCRE2_SPTR subject, size_t size, size_t pos);
    const PreTokenizer& pre_;
    pcre2_match_data* match_data_ = nullptr;
    pcre2_match_context* context_ = nullptr;
    pcre2_jit_stack* jit_stack_ = nullptr;
  };

 private:
  pcre2_code* code_ = nullptr;
};

}  // namespace sps
