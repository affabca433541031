#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/read_file.h"

namespace sps {

TokenDType token_dtype_from_name(const std::string& name, const std::string& field) {
  if (name == "uint16") return TokenDType::uint16;
  if (name == "uint32") return TokenDType::uint32;
  fail("{}: expected uint16 or uint32, got '{}'", field, name);
}

const char* token_dtype_name(TokenDType dtype) {
  return dtype == TokenDType::uint16 ? "uint16" : "uint32";
}

TokenFile::TokenFile(const std::string& path, TokenDType dtype) : path_(path), dtype_(dtype) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open the token file: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  const size_t element = dtype == TokenDType::uint16 ? 2 : 4;
  bytes_ = size_t(st.st_size);
  if (bytes_ == 0) {
    ::close(fd);
    fail("{}: the token file is empty", path);
  }
  if (bytes_ % element != 0) {
    ::close(fd);
    fail("{}: {} bytes is not a whole number of {} tokens (wrong data.dtype?)", path, bytes_,
         token_dtype_name(dtype));
  }
  void* mapped = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (mapped == MAP_FAILED) fail("{}: cannot map the token file: {}", path, std::strerror(err));
  data_ = mapped;
  tokens_ = int64_t(bytes_ / element);
}

TokenFile::~TokenFile() {
  if (data_) ::munmap(const_cast<void*>(data_), bytes_);
}

void TokenFile::read(int64_t begin, int64_t count, int32_t* out, int64_t vocab_size) const {
  if (begin < 0 || count < 0 || begin + count > tokens_)
    fail("{}: tokens [{}, {}) are outside the file's {} tokens", path_, begin, begin + count,
         tokens_);
  uint32_t bad = 0;  // OR of (id >= vocab) flags keeps the loop branch-free
  const uint32_t limit = uint32_t(std::min<int64_t>(vocab_size, int64_t(UINT32_MAX)));
  if (dtype_ == TokenDType::uint16) {
    const uint16_t* src = static_cast<const uint16_t*>(data_) + begin;
    for (int64_t i = 0; i < count; ++i) {
      out[i] = int32_t(src[i]);
      bad |= uint32_t(src[i] >= limit);
    }
  } else {
    const uint32_t* src = static_cast<const uint32_t*>(data_) + begin;
    for (int64_t i = 0; i < count; ++i) {
      out[i] = int32_t(src[i]);
      bad |= uint32_t(src[i] >= limit);
    }
  }
  if (bad) {
    for (int64_t i = 0; i < count; ++i)
      if (at(begin + i) >= limit)
        fail("{}: token id {} at position {} is outside the model's vocabulary [0, {}) "
             "(data from another tokenizer, or the wrong model.vocab_size?)",
             path_, at(begin + i), begin + i, vocab_size);
  }
}

uint32_t TokenFile::max_id() const {
  uint32_t best = 0;
  if (dtype_ == TokenDType::uint16) {
    const uint16_t* ids = static_cast<const uint16_t*>(data_);
#pragma omp parallel for reduction(max : best) schedule(static)
    for (int64_t i = 0; i < tokens_; ++i) best = std::max<uint32_t>(best, ids[i]);
  } else {
    const uint32_t* ids = static_cast<const uint32_t*>(data_);
#pragma omp parallel for reduction(max : best) schedule(static)
    for (int64_t i = 0; i < tokens_; ++i) best = std::max(best, ids[i]);
  }
  return best;
}

void TokenFile::check_ids(int64_t limit, const std::string& vocabulary, int64_t known_max) const {
  const int64_t largest = known_max >= 0 ? known_max : int64_t(max_id());
  if (largest < limit) return;
  for (int64_t i = 0; i < tokens_; ++i)
    if (at(i) >= limit)
      fail("{}: token id {} at position {} is outside {} [0, {}) (data from another tokenizer, "
           "or a damaged file?)",
           path_, at(i), i, vocabulary, limit);
  fail("{}: meta.json records a largest token id of {}, outside {} [0, {}), but the file holds "
       "none (meta.json from another file?)",
       path_, largest, vocabulary, limit);
}

int64_t DatasetMeta::known_max_id(const TokenFile& file) const {
  const std::string name = std::filesystem::path(file.path()).filename().string();
  const Split& split = name == "train.bin" ? train : name == "val.bin" ? val : Split{};
  return split.tokens == file.size() ? split.max_id : -1;
}

DatasetMeta read_dataset_meta(const std::string& folder) {
  const std::string path = (std::filesystem::path(folder) / "meta.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  return parse_dataset_meta(read_file(path, "the dataset's meta.json"), path);
}

DatasetMeta parse_dataset_meta(const std::string& text, const std::string& path) {
  DatasetMeta meta;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object", path);
  meta.path = path;
  if (j.contains("dtype")) {
    if (!j["dtype"].is_string()) fail("{}: dtype: expected a string", path);
    meta.dtype = j["dtype"].get<std::string>();
  }
  // An integer field, at least `least`: a negative count or id would otherwise read as
  // "absent" (-1) or wrap around in a comparison.
  auto read_int = [&](const nlohmann::json& o, const std::string& field, int64_t least,
                      int64_t* out) {
    const std::string key = field.substr(field.rfind('.') + 1);
    if (!o.contains(key)) return;
    if (!o[key].is_number_integer()) fail("{}: {}: expected an integer", path, field);
    if (o[key].is_number_unsigned() && o[key].get<uint64_t>() > uint64_t(INT64_MAX))
      fail("{}: {}: {} is out of range", path, field, o[key].get<uint64_t>());
    *out = o[key].get<int64_t>();
    if (*out < least) fail("{}: {}: must be at least {}, got {}", path, field, least, *out);
  };
  int64_t padded_vocab_size = -1;
  read_int(j, "vocab_size", 1, &meta.vocab_size);
  read_int(j, "padded_vocab_size", 1, &padded_vocab_size);
  read_int(j, "eos_token_id", 0, &meta.eos_token_id);
  if (padded_vocab_size >= 0 && meta.vocab_size >= 0 && padded_vocab_size < meta.vocab_size)
    fail("{}: padded_vocab_size {} is below vocab_size {}", path, padded_vocab_size,
         meta.vocab_size);
  if (meta.eos_token_id >= 0 && meta.vocab_size >= 0 && meta.eos_token_id >= meta.vocab_size)
    fail("{}: eos_token_id {} is not below vocab_size {}", path, meta.eos_token_id,
         meta.vocab_size);
  for (auto [key, split] : {std::pair{"train", &meta.train}, std::pair{"val", &meta.val}}) {
    if (!j.contains(key) || !j[key].is_object()) continue;
    const std::string name = key;
    read_int(j[key], name + ".tokens", 0, &split->tokens);
    read_int(j[key], name + ".max_id", 0, &split->max_id);
    // The ids in the files are below vocab_size, and so below the padded size too.
    for (auto [limit, limit_name] : {std::pair{meta.vocab_size, "vocab_size"},
                                     std::pair{padded_vocab_size, "padded_vocab_size"}})
      if (split->max_id >= 0 && limit >= 0 && split->max_id >= limit)
        fail("{}: {}.max_id {} is not below {} {}", path, name, split->max_id, limit_name, limit);
  }
  return meta;
}

}  // namespace sps
