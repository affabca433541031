#pragma once
// The streaming document shuffle of `sps data prepare` (docs/data.md). Documents come in, in
// input order, and leave in a uniformly random order fixed by the seed, the bucket count and
// the documents alone (not by threads or batch sizes), with memory bounded by one bucket.
//
// Document i (counting every document added, from 0) goes to bucket
//   b(i) = floor(x_i · K / 2^64),  x_i the (i+1)-th output of SplitMix64 seeded with `seed`,
// appended to that bucket's anonymous temporary file. At the end each bucket in turn is read
// back and its documents are handed on in the order of a Fisher–Yates shuffle driven by
// xoshiro256** (util/rng.h) seeded with the (b+1)-th SplitMix64 output of seed ^ kPermuteKey.
// Each document picks its bucket independently and uniformly and each bucket is permuted
// uniformly, so every order of the documents is equally likely whatever K is: K sets only
// the memory (one bucket at a time) and the number of open files.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "util/progress.h"

namespace sps {

// Buckets for `input_bytes` of input (on disk): one per `bucket_bytes`, between 1 and
// kMaxShuffleBuckets (beyond that, buckets grow with the input).
inline constexpr uint32_t kMaxShuffleBuckets = 1024;
uint32_t shuffle_bucket_count(uint64_t input_bytes, uint64_t bucket_bytes);

class DocumentShuffler {
 public:
  // Temporary files live in `folder`, unlinked from the start: nothing is left behind on
  // any exit, a kill included.
  DocumentShuffler(const std::string& folder, uint64_t seed, uint32_t buckets);
  ~DocumentShuffler();
  DocumentShuffler(const DocumentShuffler&) = delete;
  DocumentShuffler& operator=(const DocumentShuffler&) = delete;

  // A document's bytes and a tag (which output it belongs to), in input order.
  void add(uint8_t tag, std::string_view bytes);
  // Hands every document on in the shuffled order; each bucket's file is emptied once read.
  // `progress` gets (buckets done, buckets) before the first bucket and after each.
  void finish(const std::function<void(uint8_t tag, std::string_view bytes)>& sink,
              const ProgressCallback& progress = {});

  uint32_t buckets() const { return static_cast<uint32_t>(files_.size()); }

  // The bucket of document i, and the permutation of a bucket's n documents (exposed for tests).
  static uint32_t bucket_of(uint64_t seed, uint64_t i, uint32_t buckets);
  static std::vector<uint32_t> permutation(uint64_t seed, uint32_t bucket, uint32_t n);

 private:
  void flush();

  std::string folder_;
  uint64_t seed_;
  uint64_t added_ = 0;
  std::vector<int> files_;             // one anonymous file per bucket
  std::vector<std::string> pending_;   // per bucket, not yet written
  size_t pending_bytes_ = 0;
};

}  // namespace sps
