#pragma once
// The whole of a file, for configs, JSON, vocabularies and prompts. Errors are one line that
// names the file, what it was meant to be, and the system's reason:
//   "PATH: cannot open WHAT: No such file or directory"   ("PATH: cannot open: …" without WHAT)
//   "PATH: cannot read WHAT: Is a directory"
#include <string>
#include <string_view>

namespace sps {

std::string read_file(const std::string& path, std::string_view what = {});

}  // namespace sps
