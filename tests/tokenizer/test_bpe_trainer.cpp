// BPE training: merges on small corpora equal hand-derived ones, ties break by ids, the
// result does not depend on threads, and trained tokenizers round-trip text.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer_fixtures.h"
#include "util/error.h"

namespace sps {
namespace {

using Ids = std::vector<uint32_t>;
using Tokens = std::vector<std::string>;

Tokens train_text(const std::string& text, uint32_t vocab_size) {
  PieceCounter counter;
  counter.add_document(text);
  return train_bpe(counter, vocab_size);
}

Tokens merges_of(const Tokens& tokens) { return Tokens(tokens.begin() + 256, tokens.end()); }

TEST(BpeTraining, HandDerivedMerges) {
  // Pieces "aab" 1, " aab" 2, " ab" 1. Pairs: (a,b) 4, (a,a) 3, (' ',a) 3 -> "ab";
  // then (a,ab) 3 -> "aab"; then (' ',aab) 2 -> " aab"; then (' ',ab) 1 -> " ab".
  const Tokens tokens = train_text("aab aab aab ab", 261);
  ASSERT_EQ(tokens.size(), 260u);
  EXPECT_EQ(merges_of(tokens), (Tokens{"ab", "aab", " aab", " ab"}));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(tokens[b], std::string(1, static_cast<char>(b)));
  EXPECT_THROW(train_text("aab aab aab ab", 262), UserError);  // no pairs left
}

TEST(BpeTraining, TiesGoToTheSmallerPair) {
  // Every pair occurs once: (' ',y) = (32,121) < (x,y) = (120,121) < (y,x) = (121,120).
  EXPECT_EQ(merges_of(train_text("xy yx", 260)), (Tokens{" y", "xy", " yx"}));
}

TEST(BpeTraining, HandDerivedMergesWithCounts) {
  // Pieces: "hug" 1, " hug" 2, " pug" 1, " pun" 1, " bun" 1, " hugs" 1.
  //  1. (u,g) 5          -> "ug"      2. (h,ug) 4     -> "hug"     3. (' ',hug) 3 -> " hug"
  //  4. (' ',p) 2 ties (u,n) 2; (32,112) < (117,110) -> " p"      5. (u,n) 2      -> "un"
  //  then all pairs occur once, taken by (left id, right id):
  //  6. (32,98) " b"  7. (" hug"=258,s) " hugs"  8. (" p"=259,"ug"=256) " pug"
  //  9. (259,"un"=260) " pun"  10. (" b"=261,260) " bun"
  const std::string text = "hug hug hug pug pun bun hugs";
  const Tokens tokens = train_text(text, 267);
  EXPECT_EQ(merges_of(tokens), (Tokens{"ug", "hug", " hug", " p", "un", " b", " hugs", " pug",
                                       " pun", " bun"}));
  const BpeTokenizer tokenizer = BpeTokenizer::from_ranks(tokens, "hug");
  EXPECT_EQ(tokenizer.eos_id(), 266u);
  EXPECT_EQ(tokenizer.predict_id(), 267u);
  EXPECT_EQ(tokenizer.padded_vocab_size(), 320u);
  EXPECT_EQ(tokenizer.pad_id(), 319u);
  EXPECT_EQ(tokenizer.encode(text), (Ids{257, 258, 258, 263, 264, 265, 262}));
  EXPECT_THROW(train_text(text, 268), UserError);
}

TEST(BpeTraining, CountsArePerDocumentAndMerged) {
  // The same pieces counted in two documents, or by two counters merged, train the same.
  PieceCounter one, two, three;
  one.add_document("hug hug hug pug pun bun hugs");
  two.add_document("hug hug hug pug");
  three.add_document(" pun bun hugs");
  two.merge(std::move(three));
  EXPECT_EQ(train_bpe(one, 267), train_bpe(two, 267));
}

std::string random_text(uint32_t seed, size_t words) {
  const std::vector<std::string> pool = {"the", "of", "token", "model", "state", "predict", "slot",
                                         "caf\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87", "\xF0\x9F\x98\x80",
                                         "2024", "it's", "aaaa", "a", "x", "-", "\n", "  ", "\t"};
  std::mt19937 rng(seed);
  std::string text;
  for (size_t i = 0; i < words; ++i) {
    text += pool[rng() % pool.size()];
    if (rng() % 4) text += pool[rng() % pool.size()];
    text += rng() % 7 ? " " : ".\n";
  }
  return text;
}

TEST(BpeTraining, DeterministicAcrossThreadsAndRuns) {
  testing::TempDir dir;
  for (int f = 0; f < 6; ++f)
    testing::write_whole_file(dir / ("doc" + std::to_string(f) + ".txt"), random_text(f, 3000));
  testing::write_whole_file(dir / "skip.md", random_text(99, 3000));
  const std::vector<std::string> files = collect_text_files({dir.path()}, {"*.txt"});
  ASSERT_EQ(files.size(), 6u);
  TrainReport report;
  const Tokens a = train_bpe_on_files(files, 600, 1, &report);
  const Tokens b = train_bpe_on_files(files, 600, 3);
  const Tokens c = train_bpe_on_files(files, 600, 2);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  EXPECT_EQ(report.files, 6u);
  EXPECT_GT(report.stats.bytes, 0u);
  EXPECT_EQ(std::set<std::string>(a.begin(), a.end()).size(), a.size());  // no duplicate tokens
}

TEST(BpeTraining, RepeatedCharactersNeverDuplicateTokens) {
  // Runs of one letter can form the same bytes by different pairs ("aa"+"aaa", "aaa"+"aa").
  std::string text;
  for (int n = 1; n <= 40; ++n) text += std::string(n, 'a') + " " + std::string(n % 7 + 1, 'b') + " ";
  const Tokens tokens = train_text(text, 300);
  EXPECT_EQ(std::set<std::string>(tokens.begin(), tokens.end()).size(), tokens.size());
  const BpeTokenizer tokenizer = BpeTokenizer::from_ranks(tokens, "runs");
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text);
}

TEST(BpeTraining, TrainedTokenizerRoundTripsAndSaves) {
  const std::string corpus = random_text(1, 20000);
  const BpeTokenizer tokenizer = BpeTokenizer::from_ranks(train_text(corpus, 700), "trained");
  EXPECT_EQ(tokenizer.vocab_size(), 700u);
  EXPECT_EQ(tokenizer.eos_id(), 699u);
  EXPECT_EQ(tokenizer.padded_vocab_size(), 704u);
  const std::string unseen = "Unseen text: \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, "
                             "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9, <|endoftext|> \t\n 42";
  for (const std::string& text : {corpus, unseen, random_text(2, 500)}) {
    const Ids ids = tokenizer.encode(text);
    EXPECT_EQ(tokenizer.decode(ids), text);
    for (uint32_t id : ids) EXPECT_LT(id, 699u);
  }
  EXPECT_LT(tokenizer.encode(corpus).size(), corpus.size() / 2);  // it learned something
  testing::TempDir dir;
  tokenizer.save_rank_file(dir / "t.tiktoken");
  const BpeTokenizer loaded = BpeTokenizer::load(dir / "t.tiktoken");
  EXPECT_EQ(loaded.encode(corpus), tokenizer.encode(corpus));
  EXPECT_EQ(loaded.eos_id(), 699u);
}

}  // namespace
}  // namespace sps
