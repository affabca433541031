#include "data/shuffle.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/rng.h"

namespace sps {

namespace {

constexpr uint64_t kPermuteKey = 0x5eedf00dcafe2357ull;
constexpr size_t kFlushBytes = size_t{8} << 20;  // pending bytes of all buckets together

// The n-th output (from 0) of SplitMix64 seeded with `seed`.
uint64_t splitmix64_at(uint64_t seed, uint64_t n) {
  uint64_t state = seed + n * 0x9E3779B97F4A7C15ull;
  return splitmix64(state);
}

// An anonymous read-write file in `folder`: O_TMPFILE where the file system has it, else a
// named file unlinked at once.
int anonymous_file(const std::string& folder) {
  int fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return fd;
  std::string name = folder + "/.shuffle.XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) fail("{}: cannot create the shuffle's temporary file: {}", folder, std::strerror(errno));
  ::unlink(name.c_str());
  return fd;
}

// Makes room for `files` more open files under the soft limit, raising it up to the hard one.
void ensure_open_file_limit(uint64_t files) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const uint64_t needed = files + 64;  // the files, plus what the process already holds
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < needed) {
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed)
      fail("the shuffle needs {} open files but the limit is {} (ulimit -Hn)", needed, limit.rlim_max);
    limit.rlim_cur = needed;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0)
      fail("the shuffle needs {} open files and the limit cannot be raised: {}", needed, std::strerror(errno));
  }
}

void write_all(int fd, const std::string& bytes, const std::string& folder) {
  const char* p = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail("{}: cannot write the shuffle's temporary file: {}", folder,
           n < 0 ? std::strerror(errno) : "no progress (device full?)");
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::string read_all(int fd, const std::string& folder) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("{}: cannot read the shuffle's temporary file: {}", folder, std::strerror(errno));
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail("{}: cannot read the shuffle's temporary file: {}", folder,
           n < 0 ? std::strerror(errno) : "shorter than written");
    done += static_cast<size_t>(n);
  }
  return bytes;
}

// A record in a bucket file: tag (1 byte), size (8 bytes, native order), the bytes.
constexpr size_t kRecordHeader = 1 + sizeof(uint64_t);

}  // namespace

uint32_t shuffle_bucket_count(uint64_t input_bytes, uint64_t bucket_bytes) {
  SPS_ASSERT(bucket_bytes > 0);
  const uint64_t buckets = input_bytes / bucket_bytes + (input_bytes % bucket_bytes != 0);
  return static_cast<uint32_t>(std::clamp<uint64_t>(buckets, 1, kMaxShuffleBuckets));
}

uint32_t DocumentShuffler::bucket_of(uint64_t seed, uint64_t i, uint32_t buckets) {
  return static_cast<uint32_t>((static_cast<unsigned __int128>(splitmix64_at(seed, i)) * buckets) >> 64);
}

std::vector<uint32_t> DocumentShuffler::permutation(uint64_t seed, uint32_t bucket, uint32_t n) {
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  Rng rng(splitmix64_at(seed ^ kPermuteKey, bucket));
  for (uint32_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

DocumentShuffler::DocumentShuffler(const std::string& folder, uint64_t seed, uint32_t buckets)
    : folder_(folder), seed_(seed), pending_(buckets) {
  SPS_ASSERT(buckets >= 1);
  ensure_open_file_limit(buckets);
  files_.reserve(buckets);
  for (uint32_t b = 0; b < buckets; ++b) files_.push_back(anonymous_file(folder));
}

DocumentShuffler::~DocumentShuffler() {
  for (int fd : files_)
    if (fd >= 0) ::close(fd);
}

void DocumentShuffler::add(uint8_t tag, std::string_view bytes) {
  std::string& out = pending_[bucket_of(seed_, added_++, buckets())];
  const uint64_t size = bytes.size();
  out.push_back(static_cast<char>(tag));
  out.append(reinterpret_cast<const char*>(&size), sizeof size);
  out.append(bytes);
  pending_bytes_ += kRecordHeader + bytes.size();
  if (pending_bytes_ >= kFlushBytes) flush();
}

void DocumentShuffler::flush() {
  for (size_t b = 0; b < pending_.size(); ++b) {
    if (pending_[b].empty()) continue;
    write_all(files_[b], pending_[b], folder_);
    pending_[b].clear();
  }
  pending_bytes_ = 0;
}

void DocumentShuffler::finish(const std::function<void(uint8_t tag, std::string_view bytes)>& sink,
                              const ProgressCallback& progress) {
  flush();
  struct Record {
    size_t offset, size;
    uint8_t tag;
  };
  std::vector<Record> records;
  if (progress) progress(0, buckets());
  for (uint32_t b = 0; b < buckets(); ++b) {
    std::string bytes = read_all(files_[b], folder_);
    // Frees the disk while later buckets are written out; a failure only keeps it longer.
    [[maybe_unused]] const int freed = ::ftruncate(files_[b], 0);
    records.clear();
    for (size_t at = 0; at < bytes.size();) {
      SPS_ASSERT(bytes.size() - at >= kRecordHeader);
      uint64_t size = 0;
      std::memcpy(&size, bytes.data() + at + 1, sizeof size);
      SPS_ASSERT(size <= bytes.size() - at - kRecordHeader);
      records.push_back({at + kRecordHeader, static_cast<size_t>(size), static_cast<uint8_t>(bytes[at])});
      at += kRecordHeader + size;
    }
    SPS_ASSERT(records.size() <= UINT32_MAX);
    for (uint32_t i : permutation(seed_, b, static_cast<uint32_t>(records.size()))) {
      const Record& r = records[i];
      sink(r.tag, std::string_view(bytes).substr(r.offset, r.size));
    }
    if (progress) progress(b + 1, buckets());
  }
}

}  // namespace sps
