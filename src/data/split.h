#pragma once
// The document-level validation split (SPEC §6): a document goes to val.bin when
//
//   h = the first 8 bytes of md5("{seed}:{id}"), read as a big-endian unsigned 64-bit integer,
//   h < val_fraction · 2^64   (compared exactly)
//
// and to train.bin otherwise. In Python, the same rule reads
//   int.from_bytes(hashlib.md5(f"{seed}:{id}".encode()).digest()[:8], "big") < val_fraction * 2**64
// (Python compares an int with a float exactly). `id` is the record's own `id` field when it
// has one (so an export of FineWeb-Edu splits as in the paper), else "<source path>:<index>".
#include <array>
#include <cstdint>
#include <string_view>

namespace sps {

using Md5Digest = std::array<uint8_t, 16>;

Md5Digest md5(std::string_view bytes);

// The first 8 bytes of md5("{seed}:{id}") as a big-endian integer.
uint64_t split_hash(uint64_t seed, std::string_view id);

// The exact threshold for h: a document is in val when h < threshold, or always when
// `all` is set (val_fraction >= 1). val_fraction must lie in [0, 1] (UserError otherwise).
struct SplitRule {
  uint64_t seed = 1337;
  uint64_t threshold = 0;
  bool all = false;

  SplitRule(uint64_t seed, double val_fraction);
  bool is_validation(std::string_view id) const;
};

}  // namespace sps
