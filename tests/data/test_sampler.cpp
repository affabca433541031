// Samplers (docs/model.md §6): CPython's shuffle, window positions, rank splitting, resume skipping.
#include <gtest/gtest.h>

#include <set>

#include "data/sampler.h"
#include "util/error.h"

namespace sps {
namespace {

// Expected values printed by CPython 3.11: l = list(range(n)); random.Random(seed).shuffle(l)
TEST(PythonShuffle, MatchesCPython) {
  EXPECT_EQ(python_shuffled_range(10, 1337), (std::vector<int64_t>{0, 3, 7, 2, 1, 6, 4, 5, 8, 9}));
  EXPECT_EQ(python_shuffled_range(7, 0), (std::vector<int64_t>{4, 2, 1, 0, 5, 3, 6}));
  EXPECT_EQ(python_shuffled_range(40, 1337),
            (std::vector<int64_t>{32, 14, 31, 8,  4,  18, 28, 29, 27, 7,  1,  15, 5,  0,
                                  35, 9,  17, 26, 25, 16, 2,  30, 20, 13, 3,  11, 38, 33,
                                  6,  22, 12, 19, 37, 24, 21, 10, 36, 23, 34, 39}));
  EXPECT_EQ(python_shuffled_range(5, (uint64_t(1) << 40) + 3),
            (std::vector<int64_t>{4, 3, 2, 0, 1}));  // a seed of two 32-bit words
  const auto big = python_shuffled_range(1000, 1337);
  EXPECT_EQ(std::vector<int64_t>(big.begin(), big.begin() + 8),
            (std::vector<int64_t>{239, 310, 101, 624, 1, 628, 612, 482}));
  EXPECT_EQ(std::vector<int64_t>(big.end() - 4, big.end()), (std::vector<int64_t>{726, 546, 947, 632}));
  EXPECT_TRUE(python_shuffled_range(0, 1).empty());
  EXPECT_EQ(python_shuffled_range(1, 1), std::vector<int64_t>{0});
}

SamplerConfig config(SamplerType type, int64_t T, int64_t chunk, int rank = 0, int ranks = 1,
                     int64_t offset = 0) {
  SamplerConfig c;
  c.type = type;
  c.block_size = T;
  c.chunk_size_units = chunk;
  c.shuffle_seed = 1337;
  c.start_offset = offset;
  c.rank = rank;
  c.ranks = ranks;
  return c;
}

TEST(WindowSampler, FixedRandomChunkPositions) {
  // N = 105 tokens, T = 10: starts p in [0, 95), units 0..9 (⌈95/10⌉ = 10), chunks of 3
  // units: {0,1,2} {3,4,5} {6,7,8} {9}; shuffled chunk order for 4 chunks with seed 1337.
  const auto order = python_shuffled_range(4, 1337);
  const WindowSampler s(105, config(SamplerType::fixed_random_chunk, 10, 3), "t");
  EXPECT_EQ(s.units(), 10);
  EXPECT_EQ(s.rank_units(), 10);
  std::vector<int64_t> expected;
  for (int64_t chunk : order)
    for (int64_t u = chunk * 3; u < std::min<int64_t>(10, chunk * 3 + 3); ++u) expected.push_back(u * 10);
  std::vector<int64_t> got;
  for (int64_t i = 0; i < 10; ++i) got.push_back(s.position(i));
  EXPECT_EQ(got, expected);
  // Every window fits: p + T + 1 <= N.
  for (int64_t p : got) EXPECT_LE(p + 11, 105);
  // A second pass repeats the order.
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(s.position(10 + i), got[i]);
}

TEST(WindowSampler, StartOffsetShiftsEveryWindow) {
  const WindowSampler s(105, config(SamplerType::sequential, 10, 3, 0, 1, 7), "t");
  EXPECT_EQ(s.units(), 9);  // ⌈(95 − 7)/10⌉
  EXPECT_EQ(s.position(0), 7);
  EXPECT_EQ(s.position(8), 87);  // 87 + 11 <= 105
  EXPECT_EQ(s.position(9), 7);
}

TEST(WindowSampler, RankSplitTakesEveryRthChunk) {
  // 50 units in chunks of 4 (13 chunks); 3 ranks take shuffled chunks r, r+3, ….
  const int64_t N = 50 * 8 + 8, T = 8;
  const auto order = python_shuffled_range(13, 1337);
  std::set<int64_t> all;
  int64_t total = 0;
  for (int r = 0; r < 3; ++r) {
    const WindowSampler s(N, config(SamplerType::fixed_random_chunk, T, 4, r, 3), "t");
    std::vector<int64_t> expected;
    for (size_t k = size_t(r); k < order.size(); k += 3)
      for (int64_t u = order[k] * 4; u < std::min<int64_t>(50, order[k] * 4 + 4); ++u)
        expected.push_back(u * T);
    ASSERT_EQ(s.rank_units(), int64_t(expected.size())) << "rank " << r;
    for (int64_t i = 0; i < s.rank_units(); ++i) {
      EXPECT_EQ(s.position(i), expected[size_t(i)]) << "rank " << r << " window " << i;
      all.insert(s.position(i));
    }
    total += s.rank_units();
  }
  EXPECT_EQ(total, 50);            // the ranks partition the windows
  EXPECT_EQ(all.size(), size_t(50));
}

TEST(WindowSampler, SequentialRankSplit) {
  const int64_t T = 5, N = 7 * 5 + 5;  // 7 units
  const WindowSampler r0(N, config(SamplerType::sequential, T, 1, 0, 2), "t");
  const WindowSampler r1(N, config(SamplerType::sequential, T, 1, 1, 2), "t");
  EXPECT_EQ(r0.rank_units(), 4);
  EXPECT_EQ(r1.rank_units(), 3);
  EXPECT_EQ(r0.position(0), 0);
  EXPECT_EQ(r1.position(0), 5);
  EXPECT_EQ(r0.position(1), 10);
  EXPECT_EQ(r1.position(2), 25);
  EXPECT_EQ(r0.position(3), 30);
}

TEST(WindowSampler, ChunkSizeOneSplitsLikeOneProcessPerStep) {
  // With chunks of one window, R ranks reading k windows each cover the same windows as
  // one process reading R·k: what makes an R-process run equal a 1-process run.
  const int64_t N = 200, T = 4;
  const WindowSampler one(N, config(SamplerType::fixed_random_chunk, T, 1), "t");
  const WindowSampler a(N, config(SamplerType::fixed_random_chunk, T, 1, 0, 2), "t");
  const WindowSampler b(N, config(SamplerType::fixed_random_chunk, T, 1, 1, 2), "t");
  for (int64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(a.position(i), one.position(2 * i));
    EXPECT_EQ(b.position(i), one.position(2 * i + 1));
  }
}

TEST(WindowSampler, ResumeSkipsConsumedWindows) {
  // The windows a resumed run reads after k consumed ones are the tail of the uninterrupted
  // run's sequence, across chunk boundaries and into the second pass.
  const WindowSampler s(2000, config(SamplerType::fixed_random_chunk, 16, 5, 1, 2), "t");
  std::vector<int64_t> straight;
  for (int64_t i = 0; i < 2 * s.rank_units() + 3; ++i) straight.push_back(s.position(i));
  for (int64_t k : {int64_t(1), int64_t(4), int64_t(5), int64_t(6), int64_t(37), s.rank_units() - 1, s.rank_units(), s.rank_units() + 2}) {
    const WindowSampler resumed(2000, config(SamplerType::fixed_random_chunk, 16, 5, 1, 2), "t");
    for (int64_t i = 0; k + i < int64_t(straight.size()); ++i)
      ASSERT_EQ(resumed.position(k + i), straight[size_t(k + i)]) << k << " " << i;
  }
  // Inside a chunk windows are consecutive units.
  EXPECT_EQ(straight[1] - straight[0], 16);
}

TEST(WindowSampler, TooShortFilesAreUserErrors) {
  EXPECT_THROW(WindowSampler(10, config(SamplerType::sequential, 10, 1), "short.bin"), UserError);
  EXPECT_NO_THROW(WindowSampler(11, config(SamplerType::sequential, 10, 1), "ok.bin"));
  // One chunk for two ranks: rank 1 gets nothing.
  EXPECT_THROW(WindowSampler(100, config(SamplerType::fixed_random_chunk, 10, 64, 1, 2), "f"),
               UserError);
}

TEST(WindowSampler, TypeNames) {
  EXPECT_EQ(sampler_type_from_name("sequential", "f"), SamplerType::sequential);
  EXPECT_EQ(sampler_type_from_name("fixed_random_chunk", "f"), SamplerType::fixed_random_chunk);
  EXPECT_THROW(sampler_type_from_name("random", "f"), UserError);
}

}  // namespace
}  // namespace sps
