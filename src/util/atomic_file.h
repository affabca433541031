#pragma once
// Writes a file so that readers see either the old content or the whole new content: write
// to an unnamed file in the target's folder (O_TMPFILE; a named temporary `path.tmp.<pid>`
// where the file system lacks it), fsync, give it the temporary name, rename it over the
// target, fsync the folder.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sps {

class AtomicFile {
 public:
  explicit AtomicFile(const std::string& path);
  ~AtomicFile();  // removes the temporary file unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);  // throws UserError (e.g. disk full)
  void commit();                              // fsync + rename; throws UserError

 private:
  std::string path_, tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
  bool anonymous_ = false;  // unnamed (O_TMPFILE) until commit
  uint64_t written_ = 0, written_back_ = 0;  // bytes written; of those, handed to writeback
};

// The temporary name of `path` written by process `pid`.
std::string temporary_path(const std::string& path, long pid);

// Removes the temporary files (`*.tmp.<pid>`) in `folder` whose process has ended, as a
// crash or a kill leaves them where files cannot be unnamed; returns how many.
int remove_stale_temporaries(const std::string& folder);

// Convenience: the whole content at once.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace sps
