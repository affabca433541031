#pragma once
// A `torch.save` file read without running anything: a zip archive (read with libzip)
// holding PREFIX/data.pkl, parsed by the restricted unpickler, and one raw little-endian
// record PREFIX/data/KEY per storage. Every size is checked against the archive before
// anything is allocated; bad input is a UserError naming the file.
#include <cstdint>
#include <string>
#include <vector>

#include "interop/pickle.h"

typedef struct zip zip_t;

namespace sps {

class TorchArchive {
 public:
  explicit TorchArchive(const std::string& path);
  ~TorchArchive();
  TorchArchive(const TorchArchive&) = delete;
  TorchArchive& operator=(const TorchArchive&) = delete;

  const std::string& path() const { return path_; }
  const PickleDocument& document() const { return document_; }

  // A contiguous tensor's values converted to float (from F32, BF16, F16 or F64); `what`
  // names it in errors.
  std::vector<float> read_floats(const PickleTensor& tensor, const std::string& what) const;
  // The checks of read_floats that need no data (dtype, layout): a UserError if it would fail.
  void check_floats(const PickleTensor& tensor, const std::string& what) const;
  // Whether two tensors are the same view of the same storage (torch.save keeps tied
  // parameters as one storage).
  bool same_view(const PickleTensor& a, const PickleTensor& b) const;

 private:
  std::vector<uint8_t> read_record(const std::string& name, uint64_t expected_bytes,
                                   uint64_t limit) const;

  std::string path_, prefix_;
  zip_t* zip_ = nullptr;
  PickleDocument document_;
};

// The largest data.pkl accepted: the pickle holds structure only (the tensors are separate
// records), so a real checkpoint's is a few megabytes at most.
constexpr uint64_t kMaxPickleBytes = 64ull << 20;

// What the structure of an archive of `archive_bytes` may take: its data.pkl inflated, and
// the document the unpickler builds from it. torch.save stores data.pkl uncompressed, so a
// real one is smaller than its archive; both limits grow with the archive, from a floor for
// small files, so a small file that inflates (a zip bomb) cannot ask for much more than
// itself. The tensors are separate records, each checked against its declared storage.
uint64_t pickle_size_limit(uint64_t archive_bytes);
uint64_t pickle_memory_budget(uint64_t archive_bytes);

}  // namespace sps
