#pragma once
// safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the
// data. Reading validates everything against the file size and throws UserError with one
// line naming the file; writing is atomic (temporary name, fsync, rename).
#include <cstddef>
#include <cstdint>
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
  int64_t numel() const;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // 8 + N
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
  const void* data(const TensorInfo& info) const;
  // Copies a tensor converted to Out (float or double) from F32, F64, BF16, F16, I64, I32, U16
  // or U8 into out[numel], releasing the file's pages as it goes; or only its elements
  // [first, first + count) of the flat order.
  template <typename Out>
  void read_into(const std::string& name, Out* out, int64_t first = 0, int64_t count = -1) const;
  std::vector<double> read_as_double(const std::string& name) const;

 private:
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

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace sps
