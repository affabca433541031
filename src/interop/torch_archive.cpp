#include "interop/torch_archive.h"

#include <zip.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "util/error.h"
#include "util/float_formats.h"

namespace sps {


TorchArchive::TorchArchive(const std::string& path) : path_(path) {
  int code = 0;
  zip_ = zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code);
  if (!zip_) {
    zip_error_t error;
    zip_error_init_with_code(&error, code);
    const std::string message = zip_error_strerror(&error);
    zip_error_fini(&error);
    fail("{}: not a readable torch.save archive (zip: {})", path, message);
  }
  // Exactly one PREFIX/data.pkl at the top level.
  const zip_int64_t entries = zip_get_num_entries(zip_, 0);
  int found = 0;
  for (zip_int64_t i = 0; i < entries; ++i) {
    const char* name = zip_get_name(zip_, static_cast<zip_uint64_t>(i), 0);
    if (!name) continue;
    const std::string n = name;
    const size_t slash = n.find('/');
    if (slash != std::string::npos && n.substr(slash) == "/data.pkl") {
      prefix_ = n.substr(0, slash);
      ++found;
    }
  }
  if (found != 1) {
    zip_discard(zip_);
    fail("{}: a torch.save archive has one PREFIX/data.pkl, this zip has {}", path, found);
  }
  try {
    const std::vector<uint8_t> pickle = read_record("data.pkl", 0, kMaxPickleBytes);
    document_ = unpickle(pickle.data(), pickle.size(), path_ + " (data.pkl)");
  } catch (...) {
    zip_discard(zip_);
    throw;
  }
}

TorchArchive::~TorchArchive() {
  if (zip_) zip_discard(zip_);
}

// Reads PREFIX/NAME whole. With expected_bytes > 0 its size must be exactly that; else it
// must not exceed `limit`. The size is checked before anything is allocated, and reading
// stops there, so a compressed record that claims little and inflates to much is caught.
std::vector<uint8_t> TorchArchive::read_record(const std::string& name, uint64_t expected_bytes,
                                               uint64_t limit) const {
  const std::string full = prefix_ + "/" + name;
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat(zip_, full.c_str(), 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
    fail("{}: the archive has no record {}", path_, full);
  if (expected_bytes > 0 && st.size != expected_bytes)
    fail("{}: record {} holds {} bytes, the pickle expects {}", path_, full, st.size, expected_bytes);
  if (expected_bytes == 0 && st.size > limit)
    fail("{}: record {} would inflate to {} bytes, over the limit of {}", path_, full, st.size, limit);
  zip_file_t* file = zip_fopen(zip_, full.c_str(), 0);
  if (!file) fail("{}: cannot open record {}: {}", path_, full, zip_strerror(zip_));
  std::vector<uint8_t> bytes(st.size);
  zip_uint64_t done = 0;
  while (done < st.size) {
    const zip_int64_t n = zip_fread(file, bytes.data() + done, st.size - done);
    if (n <= 0) {
      const std::string message = n < 0 ? zip_file_strerror(file) : "unexpected end of data";
      zip_fclose(file);
      fail("{}: cannot read record {}: {}", path_, full, message);
    }
    done += static_cast<zip_uint64_t>(n);
  }
  if (zip_fclose(file) != 0) fail("{}: record {} is corrupt (checksum or length)", path_, full);
  return bytes;
}

std::vector<float> TorchArchive::read_floats(const PickleTensor& t, const std::string& what) const {
  const PickleStorage& s = document_.at(t.storage).storage;
  if (s.dtype != DType::F32 && s.dtype != DType::BF16 && s.dtype != DType::F16 && s.dtype != DType::F64)
    fail("{}: tensor {} is {}, expected floating point (F32, BF16, F16, F64)", path_, what,
         dtype_name(s.dtype));
  // Contiguous row-major views only (state dicts are).
  int64_t numel = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.stride[i] != numel)
      fail("{}: tensor {} is not contiguous (stride {}), expected a plain row-major tensor", path_,
           what, fmt::join(t.stride, "x"));
    numel *= t.shape[i];
  }
  const size_t element = dtype_size(s.dtype);
  if (uint64_t(s.numel) > std::numeric_limits<uint64_t>::max() / element)
    fail("{}: tensor {}: its storage of {} elements is too large", path_, what, s.numel);
  const std::vector<uint8_t> bytes =
      read_record("data/" + s.key, static_cast<uint64_t>(s.numel) * element, 0);
  std::vector<float> out(static_cast<size_t>(numel));
  const uint8_t* base = bytes.data() + static_cast<size_t>(t.offset) * element;
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = base + i * element;
    switch (s.dtype) {
      case DType::F32: std::memcpy(&out[i], p, 4); break;
      case DType::F64: { double d; std::memcpy(&d, p, 8); out[i] = static_cast<float>(d); break; }
      case DType::BF16: out[i] = bf16_to_float(uint16_t(p[0] | (p[1] << 8))); break;
      default: out[i] = f16_to_float(uint16_t(p[0] | (p[1] << 8))); break;
    }
  }
  return out;
}

bool TorchArchive::same_view(const PickleTensor& a, const PickleTensor& b) const {
  return document_.at(a.storage).storage.key == document_.at(b.storage).storage.key &&
         a.offset == b.offset && a.shape == b.shape && a.stride == b.stride;
}

}  // namespace sps
