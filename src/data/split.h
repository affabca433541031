#pragma once
// The document-level validation split of the paper's data preparation: a document goes to
// val.bin when
//
//   h = the first 8 bytes of md5("{seed}:{id}"), read as a little-endian unsigned 64-bit integer,
//   h < floor(val_fraction · 2^64)
//
// and to train.bin otherwise; seed 42 and val_fraction 0.0005 by default. In Python, the same
// rule reads
//   int.from_bytes(hashlib.md5(f"{seed}:{id}".encode()).digest()[:8], "little") < int(val_fraction * 2**64)
// (val_fraction * 2**64 is exact in double, so int() is the floor). `id` is the record's own
// `id` field when it has one (so an export of FineWeb-Edu splits as in the paper), else
// "<source path>:<index>".
#include <array>
#include <cstdint>
#include <string_view>

namespace sps {

using Md5Digest = std::array<uint8_t, 16>;

Md5Digest md5(std::string_view bytes);

// The first 8 bytes of md5("{seed}:{id}") as a little-endian integer.
uint64_t split_hash(uint64_t seed, std::string_view id);

inline constexpr uint64_t kDefaultSplitSeed = 42;
inline constexpr double kDefaultValFraction = 0.0005;

// A document is in val when its hash h < threshold, or always when `all` is set
// (val_fraction = 1, whose threshold 2^64 no uint64 holds). val_fraction must lie in [0, 1]
// (UserError otherwise).
struct SplitRule {
  uint64_t seed = kDefaultSplitSeed;
  uint64_t threshold = 0;  // floor(val_fraction · 2^64)
  bool all = false;

  SplitRule(uint64_t seed, double val_fraction);
  bool is_validation_hash(uint64_t h) const { return all || h < threshold; }
  bool is_validation(std::string_view id) const { return is_validation_hash(split_hash(seed, id)); }
};

}  // namespace sps
