#pragma once
// When a generated row ends, the one rule of `sps generate`, the Python module and `sps serve`:
// at EOS (unless stop_at_eos is off: then EOS starts a new document and the row goes on), at a
// stop string (the text ends just before it), or after max_new_tokens tokens, checked in that
// order on each token.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "infer/text_stream.h"
#include "tokenizer/bpe.h"

namespace sps {

enum class StopReason { eos, stop_string, length };
const char* stop_reason_name(StopReason reason);  // "eos" | "stop" | "length"

struct StopRule {
  int32_t eos_token_id = 0;
  bool stop_at_eos = true;
  int64_t max_new_tokens = 0;
  std::vector<std::string> stop_strings = {};  // needs a tokenizer
};

// One row under a StopRule: its generated tokens in, the text that became final out.
class RowStop {
 public:
  // `tokenizer` may be null: then the row has no text and no stop strings.
  RowStop(const StopRule& rule, const BpeTokenizer* tokenizer);

  // The row's next token; returns the text that became final with it (when the token ends
  // the row, the held-back rest too). Call only while !stopped().
  std::string push(int32_t token);

  bool stopped() const { return reason_.has_value(); }
  StopReason reason() const { return reason_.value_or(StopReason::length); }
  // The row's whole text so far (complete once stopped): without a stopping EOS, cut before a
  // stop string.
  const std::string& text() const { return stream_.text(); }
  int64_t generated() const { return generated_; }  // tokens pushed

 private:
  int32_t eos_token_id_ = 0;
  bool stop_at_eos_ = true;
  int64_t max_new_tokens_ = 0;
  const BpeTokenizer* tokenizer_ = nullptr;
  TextStream stream_;
  int64_t generated_ = 0;
  std::optional<StopReason> reason_;
};

}  // namespace sps
