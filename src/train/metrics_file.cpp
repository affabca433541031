#include "train/metrics_file.h"

#include <algorithm>
#include <filesystem>

#include "util/error.h"

namespace sps {

namespace fs = std::filesystem;

void MetricsFile::open(const std::string& path, int64_t keep_bytes) {
  path_ = path;
  std::error_code ec;
  const int64_t size = fs::exists(path, ec) ? int64_t(fs::file_size(path, ec)) : 0;
  bytes_ = std::min(size, keep_bytes);
  if (size > bytes_) fs::resize_file(path, uintmax_t(bytes_), ec);
  if (ec) fail("{}: cannot truncate: {}", path, ec.message());
  file_ = std::fopen(path.c_str(), bytes_ > 0 ? "ab" : "wb");
  if (!file_) fail("{}: cannot open for writing", path);
}

MetricsFile::~MetricsFile() {
  if (file_) std::fclose(file_);
}

void MetricsFile::write(const nlohmann::ordered_json& record) {
  if (!file_) return;
  const std::string text = record.dump() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    fail("{}: cannot write (disk full?)", path_);
  bytes_ += int64_t(text.size());
}

}  // namespace sps
