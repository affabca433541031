#pragma once
// metrics.jsonl of a run folder: one JSON record per line, appended and flushed as the
// trainer writes it (rank 0 only), so a crash loses no line written before it.
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace sps {

class MetricsFile {
 public:
  MetricsFile() = default;
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  ~MetricsFile();

  // Opens `path` for appending, keeping its first `keep_bytes` (a resume drops the lines
  // written after its checkpoint; 0 starts the file afresh).
  void open(const std::string& path, int64_t keep_bytes);
  // Appends one line; nothing before open(). A failed write is a UserError.
  void write(const nlohmann::ordered_json& record);
  // The file's length so far: a checkpoint records it, so a resume can truncate back to it.
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace sps
