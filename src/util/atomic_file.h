#pragma once
// Writes a file so that readers see either the old content or the whole new content:
// write to a temporary name beside it, fsync, rename over the target, fsync the folder.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sps {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);  // opens path + ".tmp.<pid>"
  ~AtomicFile();  // removes the temporary file unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);  // throws UserError (e.g. disk full)
  void commit();                              // fsync + rename; throws UserError

 private:
  std::string path_, tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
  uint64_t written_ = 0, written_back_ = 0;  // bytes written; of those, handed to writeback
};

// Convenience: the whole content at once.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace sps
