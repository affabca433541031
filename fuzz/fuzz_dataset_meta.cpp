// libFuzzer target: a dataset's meta.json (data/token_file.h) on arbitrary text. A UserError
// is the expected answer to bad input; any other exception, crash or sanitizer report is a
// bug, and so is a parsed file whose fields contradict each other.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/token_file.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const sps::DatasetMeta m =
        sps::parse_dataset_meta(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    if (m.vocab_size == 0 || m.vocab_size < -1 || m.eos_token_id < -1) __builtin_trap();
    if (m.eos_token_id >= 0 && m.vocab_size > 0 && m.eos_token_id >= m.vocab_size) __builtin_trap();
    for (const auto& split : {m.train, m.val}) {
      if (split.tokens < -1 || split.max_id < -1) __builtin_trap();
      if (split.max_id >= 0 && m.vocab_size > 0 && split.max_id >= m.vocab_size) __builtin_trap();
    }
  } catch (const sps::UserError&) {
  }
  return 0;
}
