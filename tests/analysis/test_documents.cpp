// Choosing the analysed sequences from a token file.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "analysis/documents.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

using namespace analysis;

constexpr int32_t kEos = 99;

// Documents of lengths 3, 8, 6, 10 (EOS included), token value = 10·doc + index.
std::string write_file(const TempDir& dir) {
  std::vector<uint16_t> t;
  int doc = 0;
  for (int len : {3, 8, 6, 10}) {
    for (int i = 0; i + 1 < len; ++i) t.push_back(uint16_t(10 * doc + i));
    t.push_back(kEos);
    ++doc;
  }
  const std::string path = dir.file("val.bin");
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(t.data()), std::streamsize(t.size() * 2));
  return path;
}

TEST(SampleDocuments, LongEnoughDocumentsFromTheirStart) {
  TempDir dir;
  const TokenFile file(write_file(dir), TokenDType::uint16);
  const Sequences s = sample_documents(file, 5, 10, 1, kEos, 100);  // needs 6 tokens
  EXPECT_EQ(s.candidates, 3);
  ASSERT_EQ(s.tokens.size(), 3u);
  std::vector<int32_t> firsts;
  for (const auto& seq : s.tokens) {
    ASSERT_EQ(seq.size(), 6u);
    firsts.push_back(seq[0]);
    for (size_t i = 1; i < seq.size(); ++i)
      EXPECT_TRUE(seq[i] == seq[i - 1] + 1 || (seq[i] == kEos && i == 5)) << seq[i];
  }
  std::sort(firsts.begin(), firsts.end());
  EXPECT_EQ(firsts, (std::vector<int32_t>{10, 20, 30}));
  // A seed picks the same documents every time; another seed may order them differently.
  EXPECT_EQ(sample_documents(file, 5, 2, 1, kEos, 100).tokens,
            std::vector<std::vector<int32_t>>(s.tokens.begin(), s.tokens.begin() + 2));
  EXPECT_TRUE(sample_documents(file, 10, 4, 1, kEos, 100).tokens.empty());
}

TEST(SampleWindows, SeededStartsInsideTheFile) {
  TempDir dir;
  const TokenFile file(write_file(dir), TokenDType::uint16);
  const Sequences s = sample_windows(file, 25, 5, 3, 100);  // 26 of 27 tokens: starts 0 or 1
  EXPECT_EQ(s.candidates, 2);
  ASSERT_EQ(s.tokens.size(), 5u);
  for (const auto& seq : s.tokens) EXPECT_TRUE(seq[0] == 0 || seq[0] == 1);
  EXPECT_TRUE(sample_windows(file, 27, 1, 3, 100).tokens.empty());
}

}  // namespace
}  // namespace sps::testing
