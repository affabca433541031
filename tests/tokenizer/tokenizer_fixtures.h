#pragma once
// Shared by the tokenizer tests: GPT-2's tokenizer (fetched by the setup script when
// missing), running shell commands, temporary folders.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "tokenizer/bpe.h"

namespace sps::testing {

inline bool has_command(const char* name) {
  return std::system(("command -v " + std::string(name) + " >/dev/null 2>&1").c_str()) == 0;
}

// Runs a shell command; returns its exit status and stdout.
inline int run_shell(const std::string& command, std::string* out = nullptr) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
  const int status = ::pclose(pipe);
  if (out) *out = std::move(text);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_whole_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fresh folder under the system's temporary folder, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "sps-tok-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

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
    if (run_shell("bash '" + script + "' >&2") != 0) {
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
