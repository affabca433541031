#pragma once
// Runs a shell command for the whole-program tests: its exit status, and its stdout in *out.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace sps::testing {

inline int run_command(const std::string& command, std::string* out = nullptr) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return -1;
  std::string text;
  char buffer[1 << 14];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
  const int status = ::pclose(pipe);
  if (out) *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace sps::testing
