// The streaming document shuffle: the documented rule (pinned against a Python
// re-implementation of SplitMix64 and xoshiro256**), uniformity whatever the bucket count,
// and `sps data prepare` output that is a permutation fixed by the seed alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "data/shuffle.h"
#include "data_fixtures.h"

namespace sps {
namespace {

using testing::TempDir;
using testing::write_whole_file;
namespace fs = std::filesystem;

std::vector<std::string> shuffled(const std::string& folder, uint64_t seed, uint32_t buckets,
                                  const std::vector<std::string>& docs) {
  DocumentShuffler shuffler(folder, seed, buckets);
  for (const std::string& d : docs) shuffler.add(0, d);
  std::vector<std::string> out;
  shuffler.finish([&](uint8_t, std::string_view bytes) { out.emplace_back(bytes); });
  return out;
}

TEST(Shuffle, BucketsAndPermutationsFollowTheDocumentedRule) {
  // Python: floor(splitmix64 output i+1 of 2357 * 7 / 2^64) for i = 0..11, and the
  // Fisher-Yates order of xoshiro256** seeded from seed ^ 0x5eedf00dcafe2357.
  std::vector<uint32_t> buckets;
  for (uint64_t i = 0; i < 12; ++i) buckets.push_back(DocumentShuffler::bucket_of(2357, i, 7));
  EXPECT_EQ(buckets, (std::vector<uint32_t>{6, 6, 6, 3, 6, 5, 0, 5, 4, 4, 6, 4}));
  EXPECT_EQ(DocumentShuffler::permutation(2357, 0, 10), (std::vector<uint32_t>{8, 2, 5, 9, 0, 7, 1, 4, 3, 6}));
  EXPECT_EQ(DocumentShuffler::permutation(2357, 3, 10), (std::vector<uint32_t>{0, 6, 2, 5, 3, 9, 4, 1, 7, 8}));
  EXPECT_EQ(DocumentShuffler::bucket_of(2357, 5, 1), 0u);
}

TEST(Shuffle, BucketCount) {
  EXPECT_EQ(shuffle_bucket_count(0, 100), 1u);
  EXPECT_EQ(shuffle_bucket_count(100, 100), 1u);
  EXPECT_EQ(shuffle_bucket_count(101, 100), 2u);
  EXPECT_EQ(shuffle_bucket_count(uint64_t{1} << 50, 100), kMaxShuffleBuckets);
}

TEST(Shuffle, OutputIsAPermutationFixedByTheSeed) {
  TempDir dir;
  std::vector<std::string> docs;
  for (int i = 0; i < 500; ++i) docs.push_back(fmt::format("document {}", i) + std::string(i % 17, 'x'));
  for (uint32_t buckets : {1u, 3u, 64u}) {
    const auto a = shuffled(dir.path(), 9, buckets, docs);
    EXPECT_EQ(a, shuffled(dir.path(), 9, buckets, docs)) << buckets;
    EXPECT_NE(a, docs) << buckets;
    EXPECT_NE(a, shuffled(dir.path(), 10, buckets, docs)) << buckets;
    auto sorted_a = a, sorted_docs = docs;
    std::sort(sorted_a.begin(), sorted_a.end());
    std::sort(sorted_docs.begin(), sorted_docs.end());
    EXPECT_EQ(sorted_a, sorted_docs) << buckets;
  }
  // Temporary files are anonymous: nothing is ever visible in the folder.
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Shuffle, EveryOrderIsEquallyLikelyWhateverTheBucketCount) {
  // 4 documents have 24 orders; over 24,000 seeds each should come up about 1,000 times
  // (binomial sd ~31). Bucketing without the in-bucket permutation, or a biased index,
  // fails this by far.
  TempDir dir;
  const std::vector<std::string> docs = {"a", "b", "c", "d"};
  for (uint32_t buckets : {1u, 3u}) {
    std::map<std::string, int> counts;
    for (uint64_t seed = 0; seed < 24000; ++seed) {
      std::string order;
      DocumentShuffler shuffler(dir.path(), seed, buckets);
      for (const std::string& d : docs) shuffler.add(0, d);
      shuffler.finish([&](uint8_t, std::string_view bytes) { order += bytes; });
      ++counts[order];
    }
    EXPECT_EQ(counts.size(), 24u) << buckets;
    for (const auto& [order, n] : counts) EXPECT_NEAR(n, 1000, 160) << order << ", " << buckets << " buckets";
  }
}

TEST(Shuffle, TagsTravelWithTheirDocuments) {
  TempDir dir;
  DocumentShuffler shuffler(dir.path(), 1, 4);
  for (int i = 0; i < 100; ++i) shuffler.add(i % 3 == 0, std::to_string(i));
  int seen = 0;
  shuffler.finish([&](uint8_t tag, std::string_view bytes) {
    EXPECT_EQ(tag, std::stoi(std::string(bytes)) % 3 == 0) << bytes;
    ++seen;
  });
  EXPECT_EQ(seen, 100);
}

// uint16 token ids of a token file's bytes.
std::vector<uint32_t> tokens_of(const std::string& bytes) {
  std::vector<uint32_t> ids(bytes.size() / 2);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<unsigned char>(bytes[2 * i]) | static_cast<unsigned char>(bytes[2 * i + 1]) << 8;
  return ids;
}

// Splits token ids at EOS into documents (EOS kept).
std::vector<std::vector<uint32_t>> documents_of(const std::vector<uint32_t>& tokens, uint32_t eos) {
  std::vector<std::vector<uint32_t>> docs(1);
  for (uint32_t t : tokens) {
    docs.back().push_back(t);
    if (t == eos) docs.emplace_back();
  }
  docs.pop_back();
  return docs;
}

TEST(Shuffle, PrepareShufflesByDefaultIndependentlyOfThreadsAndBatches) {
  TempDir dir;
  std::string jsonl;
  for (int i = 0; i < 3000; ++i)
    jsonl += fmt::format("{{\"id\":\"doc-{}\",\"text\":\"text of document {}{}\"}}\n", i, i, std::string(i % 13, '.'));
  write_whole_file(dir / "r.jsonl", jsonl);
  const BpeTokenizer& bytes = testing::byte_tokenizer();
  const uint32_t eos = bytes.eos_id();

  PrepareOptions base;
  base.inputs = {dir / "r.jsonl"};
  base.val_fraction = 0.1;
  EXPECT_TRUE(base.shuffle);
  EXPECT_EQ(base.shuffle_seed, 2357u);

  auto run = [&](const std::string& name, const std::function<void(PrepareOptions&)>& change) {
    PrepareOptions options = base;
    options.out_dir = dir / name;
    change(options);
    prepare_data(options, bytes);
    return std::array<std::string, 3>{testing::read_whole_file(dir / (name + "/train.bin")),
                                      testing::read_whole_file(dir / (name + "/val.bin")),
                                      testing::read_whole_file(dir / (name + "/meta.json"))};
  };
  const auto ordered = run("ordered", [](PrepareOptions& o) { o.shuffle = false; });
  for (uint64_t bucket_bytes : {uint64_t{128} << 20, uint64_t{20000}}) {
    const auto reference = run(fmt::format("ref{}", bucket_bytes), [&](PrepareOptions& o) {
      o.threads = 1;
      o.shuffle_bucket_bytes = bucket_bytes;
    });
    for (int threads : {2, 3, 8}) {
      const auto other = run(fmt::format("t{}-{}", threads, bucket_bytes), [&](PrepareOptions& o) {
        o.threads = threads;
        o.batch_bytes = 4096;  // many batches
        o.batch_documents = 37;
        o.shuffle_bucket_bytes = bucket_bytes;
      });
      EXPECT_EQ(other[0], reference[0]) << threads << " threads, " << bucket_bytes;
      EXPECT_EQ(other[1], reference[1]) << threads << " threads, " << bucket_bytes;
      EXPECT_EQ(other[2], reference[2]) << threads << " threads, " << bucket_bytes;
    }
    // The same documents in each split, in another order.
    for (int split : {0, 1}) {
      auto shuffled_docs = documents_of(tokens_of(reference[split]), eos);
      auto ordered_docs = documents_of(tokens_of(ordered[split]), eos);
      EXPECT_NE(shuffled_docs, ordered_docs) << split;
      std::sort(shuffled_docs.begin(), shuffled_docs.end());
      std::sort(ordered_docs.begin(), ordered_docs.end());
      EXPECT_EQ(shuffled_docs, ordered_docs) << split;
    }
    const auto meta = nlohmann::json::parse(reference[2]);
    EXPECT_EQ(meta["shuffle"]["seed"], 2357);
    const uint32_t buckets = shuffle_bucket_count(jsonl.size(), bucket_bytes);
    EXPECT_EQ(meta["shuffle"]["buckets"], buckets);
    if (bucket_bytes == 20000) EXPECT_GE(buckets, 8u);
    else EXPECT_EQ(buckets, 1u);
  }
  EXPECT_TRUE(nlohmann::json::parse(ordered[2])["shuffle"].is_null());
  const auto reseeded = run("reseeded", [](PrepareOptions& o) { o.shuffle_seed = 7; });
  EXPECT_NE(reseeded[0], run("again", [](PrepareOptions&) {})[0]);
  // Nothing but the three files in an output folder.
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "again")) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"meta.json", "train.bin", "val.bin"}));
}

}  // namespace
}  // namespace sps
