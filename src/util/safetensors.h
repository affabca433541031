#pragma once
// safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the
// data. Reading validates everything against the file size and throws UserError with one
// line naming the file; writing is atomic (temporary name, fsync, rename).
//
// Every file written here carries a checksum of each tensor's bytes: XXH3-128, in the
// metadata entry `xxh3_128` (a JSON object {tensor name: 32 hex digits, the canonical form
// `xxh128sum` prints}). Reading a tensor verifies it and names the file and the tensor that
// fails; files without the entry (written before it existed, or by other tools) read
// unverified, which `SafetensorsFile::has_checksums` tells.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sps {

enum class DType { F32, F64, BF16, F16, I64, I32, U16, U8 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "F32", ...

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets into the data section
  uint64_t end = 0;
  std::string checksum;  // XXH3-128 of its bytes, 32 hex digits; empty when the file has none
  int64_t numel() const;
};

// The metadata key of the tensors' checksums (taken out of SafetensorsHeader::metadata).
inline constexpr const char* kChecksumsKey = "xxh3_128";

// XXH3-128 of `bytes`, as 32 lowercase hex digits (XXH128's canonical big-endian form).
std::string xxh3_128_hex(const void* bytes, size_t size);

// The one-line note for a file read without checksums to verify.
std::string unverified_note(const std::string& what);

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in file order
  std::map<std::string, std::string> metadata;  // without the checksums' entry
  uint64_t data_offset = 0;  // 8 + N
  bool checksummed = false;  // the file records a checksum of every tensor
};

// Parses and validates the header of a whole file image `bytes[0, size)`. `source` names
// the file in errors. Never reads outside the buffer.
SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& source);

// A file opened read-only (memory-mapped) with its parsed header.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const TensorInfo* find(const std::string& name) const;  // null when absent
  // The tensor's bytes as they are in the file, unverified.
  const void* data(const TensorInfo& info) const;
  // True when the file records checksums (then every tensor has one).
  bool has_checksums() const { return header_.checksummed; }
  // Copies a tensor converted to Out (float or double) from F32, F64, BF16, F16, I64, I32, U16
  // or U8 into out[numel], releasing the file's pages as it goes, and verifies its checksum
  // when the file has one (a UserError naming the file and the tensor when it differs). With
  // `first` and `count`, only the elements [first, first + count) of the flat order, unverified:
  // the reader verifies the tensor once itself (verify).
  template <typename Out>
  void read_into(const std::string& name, Out* out, int64_t first = 0, int64_t count = -1) const;
  std::vector<double> read_as_double(const std::string& name) const;
  // Verifies the tensor's checksum, when the file has them, releasing its pages as it goes.
  void verify(const std::string& name) const;

 private:
  // n elements of `info` from src, a chunk at a time: each chunk to use(chunk, elements before
  // it, its elements), then its pages released; the checksum taken on the way when verifying.
  void scan_pages(const TensorInfo& info, const uint8_t* src, size_t n, bool verifying,
                  const std::function<void(const uint8_t*, size_t, size_t)>& use) const;

  std::string path_;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
};

struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // numel · dtype_size bytes
};

// Writes the tensors with their checksums (`metadata` may not use kChecksumsKey).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sps
