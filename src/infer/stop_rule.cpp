#include "infer/stop_rule.h"

#include "util/error.h"

namespace sps {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::eos: return "eos";
    case StopReason::stop_string: return "stop";
    case StopReason::length: return "length";
  }
  return "length";
}

RowStop::RowStop(const StopRule& rule, const BpeTokenizer* tokenizer)
    : eos_token_id_(rule.eos_token_id), stop_at_eos_(rule.stop_at_eos),
      max_new_tokens_(rule.max_new_tokens), tokenizer_(tokenizer), stream_(rule.stop_strings) {
  SPS_ASSERT(tokenizer || rule.stop_strings.empty());
}

std::string RowStop::push(int32_t token) {
  SPS_ASSERT(!stopped());
  ++generated_;
  std::string text;
  if (token == eos_token_id_ && stop_at_eos_) {
    reason_ = StopReason::eos;
  } else if (tokenizer_) {
    const uint32_t id = uint32_t(token);
    text = stream_.push(tokenizer_->decode({&id, 1}));
    if (stream_.stopped()) reason_ = StopReason::stop_string;
  }
  if (!reason_ && generated_ >= max_new_tokens_) reason_ = StopReason::length;
  if (reason_) text += stream_.finish();
  return text;
}

}  // namespace sps
