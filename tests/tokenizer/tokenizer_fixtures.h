#pragma once
// Shared by the tokenizer tests: GPT-2's tokenizer (fetched by the setup script when
// missing), whether a command is installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "tokenizer/bpe.h"
#include "run_command.h"
#include "util/temp_dir.h"

namespace sps::testing {

inline bool has_command(const char* name) {
  return std::system(("command -v " + std::string(name) + " >/dev/null 2>&1").c_str()) == 0;
}

// GPT-2's tokenizer, loaded once per test binary. The setup script (what `make deps` runs)
// fetches the files when they are missing; without npm that cannot work, and the tests
// that need GPT-2 skip.
inline const BpeTokenizer* gpt2_or_null(std::string* why) {
  static std::unique_ptr<BpeTokenizer> tokenizer;
  static std::string reason;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const std::string script = std::string(SPS_SOURCE_DIR) + "/scripts/get-gpt2-files.sh";
    if (run_command("bash '" + script + "' >&2") != 0) {
      reason = has_command("npm") ? "scripts/get-gpt2-files.sh failed"
                                  : "npm is absent, so GPT-2's tokenizer files cannot be fetched";
    } else {
      tokenizer = std::make_unique<BpeTokenizer>(BpeTokenizer::load("gpt2"));
    }
  }
  *why = reason;
  return tokenizer.get();
}

#define SPS_GPT2_OR_SKIP(var)                                          \
  std::string var##_why;                                               \
  const ::sps::BpeTokenizer* var##_ptr = ::sps::testing::gpt2_or_null(&var##_why); \
  if (!var##_ptr) {                                                    \
    if (!::sps::testing::has_command("npm")) GTEST_SKIP() << var##_why; \
    FAIL() << var##_why;                                               \
  }                                                                    \
  const ::sps::BpeTokenizer& var = *var##_ptr

}  // namespace sps::testing
