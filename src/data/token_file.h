#pragma once
// Token files as the trainer reads them: headerless little-endian uint16 (or uint32) arrays
// (`train.bin`, `val.bin`, the layout of nanoGPT and of the paper's code), memory-mapped
// read-only, and the `meta.json` written beside them by `sps data prepare`.
#include <cstdint>
#include <string>

namespace sps {

enum class TokenDType { uint16, uint32 };

// "uint16" | "uint32"; anything else is a UserError naming `field`.
TokenDType token_dtype_from_name(const std::string& name, const std::string& field);
const char* token_dtype_name(TokenDType dtype);

class TokenFile {
 public:
  // Maps the file. A missing or unreadable file, an empty one, or one whose size is not a
  // multiple of the element size is a UserError naming the file.
  TokenFile(const std::string& path, TokenDType dtype);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  TokenDType dtype() const { return dtype_; }
  int64_t size() const { return tokens_; }  // in tokens
  // The mapped tokens (size() of the dtype's width), read-only, valid while the file is open.
  const void* data() const { return data_; }

  uint32_t at(int64_t i) const {
    return dtype_ == TokenDType::uint16 ? uint32_t(static_cast<const uint16_t*>(data_)[i])
                                        : static_cast<const uint32_t*>(data_)[i];
  }

  // Copies tokens [begin, begin + count) into out as int32 and checks every id against the
  // model's vocabulary [0, vocab_size) on the way (one compare per token, so every batch is
  // checked at no measurable cost): an id outside is a UserError naming the file, the
  // position and the id.
  void read(int64_t begin, int64_t count, int32_t* out, int64_t vocab_size) const;

  // The largest id in the file: one parallel pass over it.
  uint32_t max_id() const;

  // Checks at open that every id lies in [0, limit) (`vocabulary` names that range in the
  // error), so bad data stops a run before it starts rather than mid-run. `known_max` is the
  // maximum recorded by `sps data prepare` (-1: scan the file).
  void check_ids(int64_t limit, const std::string& vocabulary, int64_t known_max = -1) const;

 private:
  std::string path_;
  TokenDType dtype_;
  const void* data_ = nullptr;
  size_t bytes_ = 0;
  int64_t tokens_ = 0;
};

// What the trainer reads from a dataset folder's meta.json (every field optional; absent
// ones are -1 or empty): `dtype` ("uint16" | "uint32"), `vocab_size` (the tokenizer's or
// model's vocabulary; ids in the files are below it) and `eos_token_id`. Other fields are
// ignored. A malformed file or a field of the wrong type is a UserError naming the file.
struct DatasetMeta {
  std::string path;  // empty when the folder has no meta.json
  std::string dtype;
  int64_t vocab_size = -1;
  int64_t eos_token_id = -1;
  // Per split (`train`, `val`): token count and largest id, as `sps data prepare` records
  // them (-1 when absent, as in files made before it did).
  struct Split {
    int64_t tokens = -1, max_id = -1;
  } train, val;

  // The recorded maximum id of `file` (train.bin or val.bin of this folder) when its token
  // count matches the file's; -1 otherwise.
  int64_t known_max_id(const TokenFile& file) const;
};

// Reads `folder/meta.json` when it exists.
DatasetMeta read_dataset_meta(const std::string& folder);

}  // namespace sps
