// meta.json as the trainer and the evaluators read it (data/token_file.h): what `sps data
// prepare` writes parses, and fields that contradict each other are refused in one line
// naming the file and the field.
#include <gtest/gtest.h>

#include <string>

#include "data/token_file.h"
#include "util/error.h"
#include "util/user_error.h"

namespace sps {
namespace {

using testing::error_of;

const std::string kMeta = R"({"dtype": "uint16", "vocab_size": 50257, "padded_vocab_size": 50304,
  "eos_token_id": 50256, "train": {"documents": 3, "tokens": 120, "max_id": 50256},
  "val": {"documents": 0, "tokens": 0, "max_id": 0}})";

// kMeta with `from` replaced by `to`.
std::string edited(const std::string& from, const std::string& to) {
  std::string text = kMeta;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(DatasetMeta, WhatPrepareWritesParses) {
  const DatasetMeta meta = parse_dataset_meta(kMeta, "data/meta.json");
  EXPECT_EQ(meta.path, "data/meta.json");
  EXPECT_EQ(meta.dtype, "uint16");
  EXPECT_EQ(meta.vocab_size, 50257);
  EXPECT_EQ(meta.eos_token_id, 50256);
  EXPECT_EQ(meta.train.tokens, 120);
  EXPECT_EQ(meta.train.max_id, 50256);
  EXPECT_EQ(meta.val.max_id, 0);
  // Every field is optional: files made before a field existed still read.
  const DatasetMeta bare = parse_dataset_meta("{}", "m");
  EXPECT_EQ(bare.vocab_size, -1);
  EXPECT_EQ(bare.train.max_id, -1);
}

TEST(DatasetMeta, ContradictionsAreRefused) {
  const auto error = [](const std::string& text) {
    return error_of([&] { parse_dataset_meta(text, "data/meta.json"); });
  };
  EXPECT_EQ(error(edited("\"vocab_size\": 50257", "\"vocab_size\": -5")),
            "data/meta.json: vocab_size: must be at least 1, got -5");
  EXPECT_EQ(error(edited("\"vocab_size\": 50257", "\"vocab_size\": 0")),
            "data/meta.json: vocab_size: must be at least 1, got 0");
  EXPECT_EQ(error(edited("\"max_id\": 50256", "\"max_id\": -1")),
            "data/meta.json: train.max_id: must be at least 0, got -1");
  EXPECT_EQ(error(edited("\"tokens\": 120", "\"tokens\": -120")),
            "data/meta.json: train.tokens: must be at least 0, got -120");
  EXPECT_EQ(error(edited("\"padded_vocab_size\": 50304", "\"padded_vocab_size\": 50000")),
            "data/meta.json: padded_vocab_size 50000 is below vocab_size 50257");
  EXPECT_EQ(error(edited("\"eos_token_id\": 50256", "\"eos_token_id\": 50257")),
            "data/meta.json: eos_token_id 50257 is not below vocab_size 50257");
  EXPECT_EQ(error(edited("\"max_id\": 50256", "\"max_id\": 50257")),
            "data/meta.json: train.max_id 50257 is not below vocab_size 50257");
  // Without vocab_size, the padded size still bounds the ids.
  EXPECT_EQ(error(R"({"padded_vocab_size": 64, "val": {"max_id": 64}})"),
            "data/meta.json: val.max_id 64 is not below padded_vocab_size 64");
  EXPECT_EQ(error(edited("\"vocab_size\": 50257", "\"vocab_size\": 18446744073709551615")),
            "data/meta.json: vocab_size: 18446744073709551615 is out of range");
  EXPECT_EQ(error(edited("\"vocab_size\": 50257", "\"vocab_size\": 1.5")),
            "data/meta.json: vocab_size: expected an integer");
  EXPECT_EQ(error("[1]"), "data/meta.json: expected a JSON object");
}

}  // namespace
}  // namespace sps
