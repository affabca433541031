#include "util/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "util/atomic_file.h"
#include "util/error.h"
#include "util/float_formats.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps");

namespace sps {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;  // the format's own limit
constexpr DType kAllDTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16,
                                DType::I64, DType::I32, DType::U16,  DType::U8};

// Names and messages come from the file: keep the error one printable line.
std::string printable(const std::string& text, size_t max_bytes = 96) {
  std::string out;
  size_t n = text.size();
  bool cut = false;
  if (n > max_bytes) {
    n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;  // whole UTF-8
    cut = true;
  }
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut) out += "...";
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

bool dtype_from_name(const std::string& name, DType* dtype) {
  for (DType d : kAllDTypes) {
    if (name == dtype_name(d)) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

// Builds the header straight from the JSON token stream: only the shape the format allows
// is accepted, so hostile input never builds a large or deep document.
class HeaderReader {
 public:
  using json = nlohmann::json;

  explicit HeaderReader(SafetensorsHeader* header) : header_(header) {}
  const std::string& error() const { return error_; }
  bool finished() const { return where_ == Where::done; }

  bool null() { return unexpected("null"); }
  bool boolean(bool) { return unexpected("a boolean"); }
  bool number_float(double, const std::string& text) {
    return unexpected(fmt::format("the number {}", printable(text, 32)));
  }
  bool binary(json::binary_t&) { return unexpected("binary data"); }

  bool number_integer(int64_t value) {
    if (value < 0) {
      if (where_ == Where::shape) return error_at(fmt::format("shape holds negative size {}", value));
      if (where_ == Where::offsets) return error_at(fmt::format("data_offsets hold negative {}", value));
      return unexpected(fmt::format("the number {}", value));
    }
    return number_unsigned(static_cast<uint64_t>(value));
  }

  bool number_unsigned(uint64_t value) {
    if (where_ == Where::shape) {
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return error_at(fmt::format("shape size {} is too large", value));
      current().shape.push_back(static_cast<int64_t>(value));
      return true;
    }
    if (where_ == Where::offsets) {
      if (offsets_count_ >= 2) return error_at("data_offsets must hold exactly two integers");
      (offsets_count_ == 0 ? current().begin : current().end) = value;
      ++offsets_count_;
      return true;
    }
    return unexpected(fmt::format("the number {}", value));
  }

  bool string(std::string& value) {
    if (where_ == Where::metadata) {
      header_->metadata[pending_key_] = value;
      return true;
    }
    if (where_ == Where::tensor && pending_key_ == "dtype") {
      if (!dtype_from_name(value, &current().dtype))
        return error_at(fmt::format(
            "unsupported dtype '{}' (expected F32, F64, BF16, F16, I64, I32, U16 or U8)",
            printable(value, 32)));
      return true;
    }
    return unexpected(fmt::format("the string '{}'", printable(value, 32)));
  }

  bool start_object(size_t) {
    switch (where_) {
      case Where::start:
        where_ = Where::top;
        return true;
      case Where::top:
        if (pending_key_ == "__metadata__") {
          where_ = Where::metadata;
        } else {
          header_->tensors.emplace_back();
          header_->tensors.back().name = pending_key_;
          fields_seen_ = 0;
          where_ = Where::tensor;
        }
        return true;
      default:
        return unexpected("an object");
    }
  }

  bool key(std::string& key) {
    switch (where_) {
      case Where::top:
        if (!top_keys_.insert(key).second)
          return fail_with(fmt::format("duplicate tensor name '{}'", printable(key)));
        break;
      case Where::metadata:
        if (header_->metadata.count(key))
          return fail_with(fmt::format("duplicate __metadata__ key '{}'", printable(key)));
        break;
      case Where::tensor: {
        int bit = key == "dtype" ? 1 : key == "shape" ? 2 : key == "data_offsets" ? 4 : 0;
        if (bit == 0)
          return error_at(fmt::format(
              "unknown field '{}' (expected dtype, shape and data_offsets)", printable(key, 32)));
        if (fields_seen_ & bit) return error_at(fmt::format("field '{}' appears twice", key));
        fields_seen_ |= bit;
        break;
      }
      default:
        SPS_ASSERT(false);  // keys only occur inside objects
    }
    pending_key_ = key;
    return true;
  }

  bool end_object() {
    switch (where_) {
      case Where::top:
        where_ = Where::done;
        return true;
      case Where::metadata:
        where_ = Where::top;
        return true;
      case Where::tensor:
        if (fields_seen_ != 7)
          return error_at(fmt::format("missing field '{}'", !(fields_seen_ & 1)   ? "dtype"
                                                            : !(fields_seen_ & 2) ? "shape"
                                                                                  : "data_offsets"));
        where_ = Where::top;
        return true;
      default:
        SPS_ASSERT(false);
        return false;
    }
  }

  bool start_array(size_t) {
    if (where_ == Where::tensor && pending_key_ == "shape") {
      where_ = Where::shape;
      return true;
    }
    if (where_ == Where::tensor && pending_key_ == "data_offsets") {
      where_ = Where::offsets;
      offsets_count_ = 0;
      return true;
    }
    return unexpected("an array");
  }

  bool end_array() {
    if (where_ == Where::offsets && offsets_count_ != 2)
      return error_at("data_offsets must hold exactly two integers");
    SPS_ASSERT(where_ == Where::shape || where_ == Where::offsets);
    where_ = Where::tensor;
    return true;
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    // Drop the "[json.exception.parse_error.101] " prefix; keep the explanation.
    std::string what = ex.what();
    size_t close = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    return fail_with(fmt::format("invalid JSON near byte {}: {}", position, printable(what, 200)));
  }

 private:
  enum class Where { start, top, metadata, tensor, shape, offsets, done };

  TensorInfo& current() { return header_->tensors.back(); }

  bool fail_with(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  // An error inside the current tensor entry.
  bool error_at(const std::string& message) {
    return fail_with(fmt::format("tensor '{}': {}", printable(current().name), message));
  }

  // A value of the wrong kind for where it stands.
  bool unexpected(const std::string& what) {
    switch (where_) {
      case Where::start:
        return fail_with(fmt::format("the header is {}, not a JSON object", what));
      case Where::top:
        if (pending_key_ == "__metadata__")
          return fail_with(fmt::format("__metadata__ is {}, not an object", what));
        return fail_with(
            fmt::format("entry '{}' is {}, not an object", printable(pending_key_), what));
      case Where::metadata:
        return fail_with(fmt::format("__metadata__ '{}' is {}, not a string",
                                     printable(pending_key_), what));
      case Where::tensor:
        if (pending_key_ == "dtype") return error_at(fmt::format("dtype is {}, not a string", what));
        return error_at(fmt::format("{} is {}, not an array", pending_key_, what));
      case Where::shape:
        return error_at(fmt::format("shape holds {}, not a non-negative integer", what));
      case Where::offsets:
        return error_at(fmt::format("data_offsets hold {}, not a non-negative integer", what));
      case Where::done:
        break;
    }
    return fail_with(fmt::format("unexpected {}", what));
  }

  SafetensorsHeader* header_;
  Where where_ = Where::start;
  std::string pending_key_;
  std::unordered_set<std::string> top_keys_;
  int fields_seen_ = 0;  // bits: dtype, shape, data_offsets
  int offsets_count_ = 0;
  std::string error_;
};

// numel of `shape`, false on overflow.
bool checked_numel(const std::vector<int64_t>& shape, int64_t* numel) {
  int64_t n = 1;
  for (int64_t s : shape)
    if (s == 0) {
      *numel = 0;
      return true;
    }
  for (int64_t s : shape)
    if (__builtin_mul_overflow(n, s, &n)) return false;
  *numel = n;
  return true;
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

template <typename Source, typename Out>
void convert(const uint8_t* src, size_t n, Out* dst) {
  for (size_t i = 0; i < n; ++i) {
    Source value;
    std::memcpy(&value, src + i * sizeof(Source), sizeof(Source));  // the data may be unaligned
    dst[i] = static_cast<Out>(value);
  }
}

// n elements of `dtype` at src into dst (through double for the 16-bit floats and the
// integers, whose values double holds exactly).
template <typename Out>
void convert_elements(DType dtype, const uint8_t* src, size_t n, Out* dst) {
  switch (dtype) {
    case DType::F32: convert<float>(src, n, dst); break;
    case DType::F64: convert<double>(src, n, dst); break;
    case DType::I64: convert<int64_t>(src, n, dst); break;
    case DType::I32: convert<int32_t>(src, n, dst); break;
    case DType::U16: convert<uint16_t>(src, n, dst); break;
    case DType::U8: convert<uint8_t>(src, n, dst); break;
    case DType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = static_cast<Out>(bf16_to_float(h));
      }
      break;
    case DType::F16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = static_cast<Out>(f16_to_float(h));
      }
      break;
  }
}

}  // namespace

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::BF16:
    case DType::F16:
    case DType::U16:
      return 2;
    case DType::U8:
      return 1;
  }
  SPS_ASSERT(false);
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::U16: return "U16";
    case DType::U8: return "U8";
  }
  SPS_ASSERT(false);
  return "";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

SafetensorsHeader parse_safetensors_header(const uint8_t* bytes, size_t size,
                                           const std::string& source) {
  if (size < 8)
    fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", source,
         size);
  const uint64_t header_bytes = read_u64_le(bytes);
  if (header_bytes > kMaxHeaderBytes)
    fail("{}: not a safetensors file: header length {} is over the 100 MB limit", source,
         header_bytes);
  if (header_bytes > size - 8)
    fail("{}: not a safetensors file (or truncated): header length {} exceeds the {} bytes "
         "after it",
         source, header_bytes, size - 8);

  SafetensorsHeader header;
  header.data_offset = 8 + header_bytes;
  HeaderReader reader(&header);
  const char* json_begin = reinterpret_cast<const char*>(bytes + 8);
  bool ok = nlohmann::json::sax_parse(json_begin, json_begin + header_bytes, &reader);
  if (!ok || !reader.finished()) {
    fail("{}: invalid safetensors header: {}", source,
         reader.error().empty() ? std::string("incomplete JSON") : reader.error());
  }

  const uint64_t data_bytes = size - header.data_offset;
  for (const TensorInfo& t : header.tensors) {
    const std::string name = printable(t.name);
    int64_t numel = 0;
    uint64_t need = 0;
    if (!checked_numel(t.shape, &numel) ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel), dtype_size(t.dtype), &need))
      fail("{}: invalid safetensors header: tensor '{}': shape {} is too large", source, name,
           shape_text(t.shape));
    if (t.begin > t.end)
      fail("{}: invalid safetensors header: tensor '{}': data_offsets [{}, {}] are decreasing",
           source, name, t.begin, t.end);
    if (t.end - t.begin != need)
      fail("{}: invalid safetensors header: tensor '{}': data_offsets [{}, {}] span {} bytes but "
           "{} {} needs {}",
           source, name, t.begin, t.end, t.end - t.begin, dtype_name(t.dtype),
           shape_text(t.shape), need);
    if (t.end > data_bytes)
      fail("{}: tensor '{}': data_offsets [{}, {}] lie outside the data section of {} bytes "
           "(file truncated?)",
           source, name, t.begin, t.end, data_bytes);
  }

  // The tensors tile the data section exactly, as the format's reference implementation
  // requires: in offset order each starts where the one before ended, the first at 0, the
  // last ends at the end of the file. A header length off by a byte, a gap or a trailing
  // byte shifts or hides data, so each is an error.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : header.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (t->begin < covered)
      fail("{}: invalid safetensors header: tensors '{}' and '{}' overlap", source,
           printable(previous->name), printable(t->name));
    if (t->begin > covered)
      fail("{}: invalid safetensors header: {} unused bytes of the data section before tensor "
           "'{}' (data_offsets [{}, {}])",
           source, t->begin - covered, printable(t->name), t->begin, t->end);
    covered = t->end;
    previous = t;
  }
  if (covered != data_bytes)
    fail("{}: invalid safetensors header: the tensors cover {} of the {} bytes after the header "
         "({} trailing bytes; header length or data damaged?)",
         source, covered, data_bytes, data_bytes - covered);
  return header;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open: {}", path, std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("{}: cannot read: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    parse_safetensors_header(nullptr, size, path);  // throws the usual message
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int err = errno;
  ::close(fd);  // the mapping stays valid
  if (map == MAP_FAILED) fail("{}: cannot map: {}", path, std::strerror(err));
  bytes_ = static_cast<const uint8_t*>(map);
  size_ = size;
  try {
    header_ = parse_safetensors_header(bytes_, size_, path_);
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(bytes_), size_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (bytes_) ::munmap(const_cast<uint8_t*>(bytes_), size_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  for (const TensorInfo& t : header_.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

const void* SafetensorsFile::data(const TensorInfo& info) const {
  SPS_ASSERT(header_.data_offset + info.end <= size_);
  return bytes_ + header_.data_offset + info.begin;
}

template <typename Out>
void SafetensorsFile::read_into(const std::string& name, Out* out, int64_t first,
                                int64_t count) const {
  const TensorInfo* info = find(name);
  if (!info) fail("{}: no tensor named '{}'", path_, printable(name));
  if (count < 0) count = info->numel() - first;
  SPS_ASSERT(first >= 0 && first + count <= info->numel());
  const size_t n = static_cast<size_t>(count), width = dtype_size(info->dtype);
  const uint8_t* src = static_cast<const uint8_t*>(data(*info)) + size_t(first) * width;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  constexpr size_t kChunk = size_t(1) << 20;  // elements
  for (size_t first = 0; first < n; first += kChunk) {
    const size_t count = std::min(kChunk, n - first);
    const uint8_t* begin = src + first * width;
    convert_elements(info->dtype, begin, count, out + first);
    // The pages read so far leave memory (the mapping is read-only and file-backed: a later
    // read faults them in again), so a file costs one chunk beyond what it is copied into.
    const uintptr_t from = uintptr_t(begin) / page * page;
    const uintptr_t to = uintptr_t(begin + count * width) / page * page;
    if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  }
}

template void SafetensorsFile::read_into<float>(const std::string&, float*, int64_t,
                                                int64_t) const;
template void SafetensorsFile::read_into<double>(const std::string&, double*, int64_t,
                                                 int64_t) const;

std::vector<double> SafetensorsFile::read_as_double(const std::string& name) const {
  const TensorInfo* info = find(name);
  if (!info) fail("{}: no tensor named '{}'", path_, printable(name));
  std::vector<double> out(static_cast<size_t>(info->numel()));
  read_into(name, out.data());
  return out;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  using json = nlohmann::json;
  auto quoted = [&](const std::string& text) {
    try {
      return json(text).dump();
    } catch (const json::exception&) {
      fail("{}: cannot write '{}': not valid UTF-8", path, printable(text));
    }
  };

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      header += quoted(key) + ':' + quoted(value);
    }
    header += '}';
  }
  std::unordered_set<std::string> names;
  std::vector<uint64_t> sizes;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    if (t.name == "__metadata__") fail("{}: '__metadata__' cannot name a tensor", path);
    if (!names.insert(t.name).second) fail("{}: duplicate tensor name '{}'", path, printable(t.name));
    int64_t numel = 0;
    uint64_t bytes = 0;
    for (int64_t s : t.shape)
      if (s < 0) fail("{}: tensor '{}': negative shape {}", path, printable(t.name), shape_text(t.shape));
    if (!checked_numel(t.shape, &numel) ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel), dtype_size(t.dtype), &bytes))
      fail("{}: tensor '{}': shape {} is too large", path, printable(t.name), shape_text(t.shape));
    SPS_ASSERT(bytes == 0 || t.data != nullptr);
    if (header.size() > 1) header += ',';
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          quoted(t.name), dtype_name(t.dtype), fmt::join(t.shape, ","), offset,
                          offset + bytes);
    offset += bytes;
    sizes.push_back(bytes);
  }
  header += '}';
  // Spaces up to a multiple of 8 keep the data section 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderBytes) fail("{}: safetensors header over 100 MB", path);

  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  AtomicFile file(path);
  file.write(length, sizeof length);
  file.write(header.data(), header.size());
  for (size_t i = 0; i < tensors.size(); ++i)
    if (sizes[i] > 0) file.write(tensors[i].data, sizes[i]);
  file.commit();
}

}  // namespace sps
