#include "tokenizer/pretokenizer.h"

#include <stdexcept>
#include <string>

#include "util/error.h"

namespace sps {

namespace {

// Unicode White_Space (what `\s` means in tiktoken's pattern).
#define SPS_WS "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

const char kPattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" SPS_WS "\\p{L}\\p{N}]+"
    "|[" SPS_WS "]+(?![^" SPS_WS "])|[" SPS_WS "]+";

#undef SPS_WS

}  // namespace

const char* PreTokenizer::pattern() { return kPattern; }

PreTokenizer::PreTokenizer() {
  int error = 0;
  PCRE2_SIZE offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                        PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::runtime_error("pre-tokenizer pattern does not compile at offset " +
                             std::to_string(offset) + ": " +
                             reinterpret_cast<const char*>(message));
  }
  if (pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) != 0) {
    pcre2_code_free(code_);
    throw std::runtime_error("PCRE2 JIT is not available for the pre-tokenizer pattern");
  }
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(code_); }

PreTokenizer::Matcher::Matcher(const PreTokenizer& pre) : pre_(pre) {
  match_data_ = pcre2_match_data_create_from_pattern(pre.code_, nullptr);
  context_ = pcre2_match_context_create(nullptr);
  // Matching runs of one class needs no deep backtracking; 1 MiB is ample headroom.
  jit_stack_ = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
  if (!match_data_ || !context_ || !jit_stack_) throw std::bad_alloc();
  pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
}

PreTokenizer::Matcher::~Matcher() {
  pcre2_jit_stack_free(jit_stack_);
  pcre2_match_context_free(context_);
  pcre2_match_data_free(match_data_);
}

size_t PreTokenizer::Matcher::next_end(PCRE2_SPTR subject, size_t size, size_t pos) {
  const int rc = pcre2_jit_match(pre_.code_, subject, size, pos, 0, match_data_, context_);
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof message);
    throw std::runtime_error(std::string("pre-tokenizer match failed: ") +
                             reinterpret_cast<const char*>(message));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data_);
  // Every character is matched by one of the alternatives, so pieces tile the text.
  SPS_ASSERT(ovector[0] == pos && ovector[1] > pos);
  return ovector[1];
}

}  // namespace sps
