// prepare_data: counts against the tokenizer itself, the split, dtypes, thread-count
// independence, and bad input leaving nothing behind.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "data/split.h"
#include "data_fixtures.h"
#include "util/error.h"
#include "util/writer_lock.h"
#include "util/user_error.h"

namespace sps {
namespace {

using testing::error_of;

using testing::TempDir;
using testing::write_whole_file;
using Ids = std::vector<uint32_t>;
namespace fs = std::filesystem;

nlohmann::json read_meta(const std::string& folder) {
  return nlohmann::json::parse(testing::read_whole_file(folder + "/meta.json"));
}

PrepareOptions options_for(std::vector<std::string> inputs, std::string out) {
  PrepareOptions options;
  options.inputs = std::move(inputs);
  options.out_dir = std::move(out);
  options.threads = 2;
  options.shuffle = false;  // most tests check documents in input order; Shuffle* tests shuffle
  return options;
}

// Random documents mixing ASCII, UTF-8, white space runs and the EOS text.
std::vector<std::string> random_documents(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<std::string> words = {"the", "State", "prediction", " ", "  ", "\n", "\n\n",
                                          "é", "日本", "👍", "don't", "12345", "<|endoftext|>",
                                          "x", ",", "."};
  std::vector<std::string> docs(count);
  for (auto& doc : docs) {
    const size_t n = 1 + rng() % 60;
    for (size_t i = 0; i < n; ++i) doc += words[rng() % words.size()] + (rng() % 3 ? " " : "");
  }
  return docs;
}

void expect_counts_match(const BpeTokenizer& tokenizer) {
  TempDir dir;
  // Three text files in a folder, a JSON Lines file, gzip and zstd copies of it.
  const auto docs = random_documents(40, 7);
  fs::create_directories(dir / "folder/sub");
  write_whole_file(dir / "folder/a.txt", docs[0]);
  write_whole_file(dir / "folder/sub/b.txt", docs[1]);
  write_whole_file(dir / "folder/c.txt", docs[2]);
  std::string jsonl;
  for (size_t i = 3; i < docs.size(); ++i)
    jsonl += "{\"id\":\"doc-" + std::to_string(i) + "\",\"text\":" + testing::json_string(docs[i]) + "}\n";
  write_whole_file(dir / "r.jsonl", jsonl);
  write_whole_file(dir / "r.jsonl.gz", testing::gzip_bytes(jsonl));
  write_whole_file(dir / "r.jsonl.zst", testing::zstd_bytes(jsonl));

  PrepareOptions options =
      options_for({dir / "folder", dir / "r.jsonl", dir / "r.jsonl.gz", dir / "r.jsonl.zst"}, dir / "out");
  options.val_fraction = 0;
  const PrepareReport report = prepare_data(options, tokenizer);

  // Expected: the documents in input order (folder sorted: a, c, sub/b), each + EOS.
  Ids expected;
  const std::vector<size_t> order = {0, 2, 1};
  size_t documents = 0;
  auto add = [&](const std::string& text) {
    tokenizer.encode(text, expected);
    expected.push_back(tokenizer.eos_id());
    ++documents;
  };
  for (size_t i : order) add(docs[i]);
  for (int copy = 0; copy < 3; ++copy)
    for (size_t i = 3; i < docs.size(); ++i) add(docs[i]);
  EXPECT_EQ(testing::read_tokens(dir / "out/train.bin"), expected);
  EXPECT_EQ(fs::file_size(dir / "out/val.bin"), 0u);
  const auto meta = read_meta(dir / "out");
  EXPECT_EQ(meta["train"]["documents"], documents);
  EXPECT_EQ(meta["train"]["tokens"], expected.size());
  EXPECT_EQ(meta["val"]["documents"], 0);
  EXPECT_EQ(meta["val"]["tokens"], 0);
  EXPECT_EQ(report.train.tokens, expected.size());
  EXPECT_EQ(meta["dtype"], "uint16");
  EXPECT_EQ(meta["vocab_size"], tokenizer.vocab_size());
  EXPECT_EQ(meta["eos_token_id"], tokenizer.eos_id());
  EXPECT_EQ(meta["special_ids"]["eos"], tokenizer.eos_id());
  EXPECT_EQ(meta["special_ids"]["predict"], tokenizer.predict_id());
  EXPECT_EQ(meta["special_ids"]["pad"], tokenizer.pad_id());
  EXPECT_EQ(meta["tokenizer"]["name"], tokenizer.name());
  EXPECT_EQ(meta["tokenizer"]["fingerprint"], tokenizer.fingerprint());
  ASSERT_EQ(meta["sources"].size(), 4u);
  EXPECT_EQ(meta["sources"][0]["files"], 3);
  EXPECT_EQ(meta["sources"][0]["documents"], 3);
  EXPECT_EQ(meta["sources"][0]["bytes"], docs[0].size() + docs[1].size() + docs[2].size());
  for (int s = 1; s < 4; ++s) {
    EXPECT_EQ(meta["sources"][s]["documents"], docs.size() - 3);
    EXPECT_EQ(meta["sources"][s]["bytes"], jsonl.size());
  }
}

TEST(Prepare, CountsMatchTheByteTokenizer) { expect_counts_match(testing::byte_tokenizer()); }

TEST(Prepare, CountsMatchGpt2) {
  SPS_GPT2_OR_SKIP(gpt2);
  expect_counts_match(gpt2);
}

TEST(Prepare, SplitFollowsTheMd5RuleOnIds) {
  // With the paper's seed 42, of doc-7000 .. doc-13999 these four are below
  // floor(0.0005 · 2^64) (test_split.cpp).
  TempDir dir;
  std::string jsonl;
  std::vector<std::string> val_ids;
  const SplitRule rule(42, 0.0005);
  for (int i = 7000; i < 14000; ++i) {
    const std::string id = "doc-" + std::to_string(i);
    if (rule.is_validation(id)) val_ids.push_back(id);
    jsonl += fmt::format("{{\"text\":\"{}\",\"id\":\"{}\"}}\n", id, id);
  }
  ASSERT_EQ(val_ids, (std::vector<std::string>{"doc-7011", "doc-8641", "doc-10758", "doc-13687"}));
  write_whole_file(dir / "r.jsonl", jsonl);
  prepare_data(options_for({dir / "r.jsonl"}, dir / "out"), testing::byte_tokenizer());  // defaults
  const BpeTokenizer& bytes = testing::byte_tokenizer();
  EXPECT_EQ(bytes.decode(testing::read_tokens(dir / "out/val.bin")),
            "doc-7011<|endoftext|>doc-8641<|endoftext|>doc-10758<|endoftext|>doc-13687<|endoftext|>");
  const auto meta = read_meta(dir / "out");
  EXPECT_EQ(meta["val"]["documents"], 4);
  EXPECT_EQ(meta["train"]["documents"], 7000 - 4);
  EXPECT_EQ(meta["split"]["seed"], 42);
  EXPECT_EQ(meta["split"]["val_fraction"], 0.0005);
  EXPECT_EQ(meta["split"]["byte_order"], "little");
  EXPECT_EQ(meta["split"]["threshold"], 9223372036854776ull);

  // Without an id field the id is "<path>:<index>": for a file given directly, the path as
  // given. Which documents go to val follows md5("99:<path>:<index>").
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "{\"text\":\"t" + std::to_string(i) + "\"}\n";
  write_whole_file(dir / "noid.jsonl", text);
  PrepareOptions options = options_for({dir / "noid.jsonl"}, dir / "out2");
  options.val_fraction = 0.01;
  options.seed = 99;
  prepare_data(options, bytes);
  std::string expected_val;
  const SplitRule rule99(99, 0.01);
  for (int i = 0; i < 3000; ++i)
    if (rule99.is_validation((dir / "noid.jsonl") + ":" + std::to_string(i)))
      expected_val += fmt::format("t{}<|endoftext|>", i);
  EXPECT_FALSE(expected_val.empty());
  EXPECT_EQ(bytes.decode(testing::read_tokens(dir / "out2/val.bin")), expected_val);

  // In a folder, the path relative to the folder: moving the folder keeps the split.
  fs::create_directories(dir / "one/corpus");
  for (int i = 0; i < 400; ++i) write_whole_file(dir / ("one/corpus/f" + std::to_string(i) + ".txt"), "file " + std::to_string(i));
  options = options_for({dir / "one/corpus"}, dir / "out3");
  options.val_fraction = 0.05;
  prepare_data(options, bytes);
  fs::rename(dir / "one/corpus", dir / "moved");
  options = options_for({dir / "moved"}, dir / "out4");
  options.val_fraction = 0.05;
  prepare_data(options, bytes);
  EXPECT_EQ(testing::read_whole_file(dir / "out3/val.bin"), testing::read_whole_file(dir / "out4/val.bin"));
  // Files in byte order of their relative paths; val holds those whose "fN.txt:0" is in val.
  std::vector<std::string> names;
  for (int i = 0; i < 400; ++i) names.push_back("f" + std::to_string(i) + ".txt");
  std::sort(names.begin(), names.end());
  std::string expected_files;
  const SplitRule rule5(42, 0.05);
  for (const std::string& name : names)
    if (rule5.is_validation(name + ":0"))
      expected_files += "file " + name.substr(1, name.size() - 5) + "<|endoftext|>";
  EXPECT_EQ(bytes.decode(testing::read_tokens(dir / "out3/val.bin")), expected_files);
  EXPECT_GT(read_meta(dir / "out3")["val"]["documents"].get<int>(), 5);
}

TEST(Prepare, OutputDoesNotDependOnThreads) {
  TempDir dir;
  const auto docs = random_documents(3000, 11);
  std::string jsonl;
  for (size_t i = 0; i < docs.size(); ++i)
    jsonl += "{\"text\":" + testing::json_string(docs[i]) + "}\n";
  write_whole_file(dir / "r.jsonl.gz", testing::gzip_bytes(jsonl));
  std::string reference_train, reference_val, reference_meta;
  for (int threads : {1, 2, 3, 8}) {
    PrepareOptions options = options_for({dir / "r.jsonl.gz"}, dir / ("out" + std::to_string(threads)));
    options.threads = threads;
    options.val_fraction = 0.05;
    options.batch_bytes = 4096;  // many batches
    options.batch_documents = 37;
    prepare_data(options, testing::byte_tokenizer());
    const std::string train = testing::read_whole_file(dir / ("out" + std::to_string(threads) + "/train.bin"));
    const std::string val = testing::read_whole_file(dir / ("out" + std::to_string(threads) + "/val.bin"));
    const std::string meta = testing::read_whole_file(dir / ("out" + std::to_string(threads) + "/meta.json"));
    if (threads == 1) {
      reference_train = train, reference_val = val, reference_meta = meta;
      EXPECT_FALSE(val.empty());
    } else {
      EXPECT_EQ(train, reference_train) << threads << " threads";
      EXPECT_EQ(val, reference_val) << threads << " threads";
      EXPECT_EQ(meta, reference_meta) << threads << " threads";
    }
  }
}

TEST(Prepare, DtypeChecks) {
  EXPECT_NO_THROW(check_token_dtype(50257, TokenDType::uint16));
  EXPECT_NO_THROW(check_token_dtype(65536, TokenDType::uint16));  // ids 0..65535
  EXPECT_EQ(error_of([] { check_token_dtype(65537, TokenDType::uint16); }),
            "the tokenizer has 65537 ids (up to 65536), more than uint16 token files hold (ids "
            "up to 65535); pass --dtype uint32");
  EXPECT_NO_THROW(check_token_dtype(1u << 20, TokenDType::uint32));
}

TEST(Prepare, Uint32Output) {
  TempDir dir;
  write_whole_file(dir / "a.txt", "héllo");
  PrepareOptions options = options_for({dir / "a.txt"}, dir / "out");
  options.dtype = TokenDType::uint32;
  options.val_fraction = 0;  // the id holds the temporary path: keep the split out of it
  prepare_data(options, testing::byte_tokenizer());
  EXPECT_EQ(testing::read_tokens(dir / "out/train.bin", 4), (Ids{'h', 0xc3, 0xa9, 'l', 'l', 'o', 256}));
  EXPECT_EQ(read_meta(dir / "out")["dtype"], "uint32");
}

TEST(Prepare, EmptyDocumentsAndBlankLineBlocksAndReplacements) {
  TempDir dir;
  write_whole_file(dir / "empty.txt", "");
  write_whole_file(dir / "blank.txt", " \n\t\n");
  write_whole_file(dir / "blocks.txt", "p1 line1\np1 line2\n\n\np2\n \np3 \xff\n");
  write_whole_file(dir / "r.jsonl", "{\"text\":\"\"}\n{\"text\":\"  \"}\n{\"text\":\"ok\"}\n");
  PrepareOptions options =
      options_for({dir / "empty.txt", dir / "blank.txt", dir / "blocks.txt", dir / "r.jsonl"}, dir / "out");
  options.split_blank_lines = true;
  options.val_fraction = 0;
  const PrepareReport report = prepare_data(options, testing::byte_tokenizer());
  EXPECT_EQ(report.empty_documents, 2u);  // the empty JSON texts; empty files have no blocks
  EXPECT_EQ(report.train.documents, 4u);
  EXPECT_EQ(report.replacements, 1u);
  EXPECT_EQ(testing::byte_tokenizer().decode(testing::read_tokens(dir / "out/train.bin")),
            "p1 line1\np1 line2<|endoftext|>p2<|endoftext|>p3 \xEF\xBF\xBD<|endoftext|>ok<|endoftext|>");
  const auto meta = read_meta(dir / "out");
  EXPECT_EQ(meta["skipped"]["empty_documents"], 2);
  EXPECT_EQ(meta["utf8_replacements"], 1);

  // Without --split-blank-lines every file is a document; empty ones are skipped.
  options = options_for({dir / "empty.txt", dir / "blank.txt", dir / "blocks.txt"}, dir / "out2");
  const PrepareReport whole = prepare_data(options, testing::byte_tokenizer());
  EXPECT_EQ(whole.empty_documents, 2u);
  EXPECT_EQ(whole.train.documents + whole.val.documents, 1u);
}

TEST(Prepare, BadRecordsStopOrAreSkipped) {
  TempDir dir;
  write_whole_file(dir / "r.jsonl", "{\"text\":\"a\"}\n{\"text\": oops}\n{\"body\":\"b\"}\n{\"text\":\"c\"}\n");
  const std::string bad = dir / "r.jsonl";
  std::string error = error_of([&] { prepare_data(options_for({bad}, dir / "out"), testing::byte_tokenizer()); });
  EXPECT_EQ(error.rfind(bad + ":2: malformed JSON: parse error at line 1, column", 0), 0u) << error;
  EXPECT_NE(error.find("(pass --skip-bad-records to skip such records)"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "out"));  // made by the run, removed again

  PrepareOptions options = options_for({bad}, dir / "out");
  options.field = "body";
  error = error_of([&] { prepare_data(options, testing::byte_tokenizer()); });
  EXPECT_EQ(error.rfind(bad + ":1: no \"body\" field", 0), 0u) << error;

  options = options_for({bad}, dir / "out");
  options.skip_bad_records = true;
  options.val_fraction = 0;
  const PrepareReport report = prepare_data(options, testing::byte_tokenizer());
  EXPECT_EQ(report.bad_records, 2u);
  EXPECT_EQ(report.first_bad_record.rfind(bad + ":2: malformed JSON", 0), 0u);
  EXPECT_EQ(testing::byte_tokenizer().decode(testing::read_tokens(dir / "out/train.bin")),
            "a<|endoftext|>c<|endoftext|>");
  EXPECT_EQ(read_meta(dir / "out")["skipped"]["bad_records"], 2);
}

// Batches are encoded while the one before is written: the error reported is still the first
// in document order, whichever batch or thread met it, and nothing is left behind.
TEST(Prepare, FirstErrorInDocumentOrderAcrossBatches) {
  TempDir dir;
  std::string records, kept;
  for (int line = 1; line <= 200; ++line) {
    if (line == 150 || line == 180) records += "{\"text\": oops}\n";
    else records += fmt::format("{{\"text\":\"r{}\"}}\n", line), kept += fmt::format("r{}<|endoftext|>", line);
  }
  write_whole_file(dir / "r.jsonl", records);
  const std::string bad = dir / "r.jsonl";
  for (int threads : {1, 3}) {
    PrepareOptions options = options_for({bad}, dir / "out");
    options.threads = threads;
    options.batch_documents = 7;  // the bad records sit in the 22nd and 26th batch
    const std::string error = error_of([&] { prepare_data(options, testing::byte_tokenizer()); });
    EXPECT_EQ(error.rfind(bad + ":150: malformed JSON", 0), 0u) << threads << " threads: " << error;
    EXPECT_FALSE(fs::exists(dir / "out"));

    options.skip_bad_records = true;
    options.val_fraction = 0;
    const PrepareReport report = prepare_data(options, testing::byte_tokenizer());
    EXPECT_EQ(report.bad_records, 2u);
    EXPECT_EQ(report.first_bad_record.rfind(bad + ":150: malformed JSON", 0), 0u);
    EXPECT_EQ(testing::byte_tokenizer().decode(testing::read_tokens(dir / "out/train.bin")), kept);
    fs::remove_all(dir / "out");
  }
}

// The tokenizer loads on its own thread while the inputs are listed: its error comes through,
// after an error of the inputs.
TEST(Prepare, TokenizerErrorsComeThrough) {
  TempDir dir;
  write_whole_file(dir / "a.txt", "one");
  const TokenizerSource broken = []() -> const BpeTokenizer& { throw UserError("tokenizer.tok: broken"); };
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "a.txt"}, dir / "out"), broken); }),
            "tokenizer.tok: broken");
  EXPECT_FALSE(fs::exists(dir / "out"));
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "nope.txt"}, dir / "out"), broken); }),
            (dir / "nope.txt") + ": no such file or folder");
}

TEST(Prepare, OutputFolderRules) {
  TempDir dir;
  write_whole_file(dir / "a.txt", "one");
  write_whole_file(dir / "b.txt", "two");
  prepare_data(options_for({dir / "a.txt"}, dir / "out"), testing::byte_tokenizer());
  write_whole_file(dir / "out/notes.txt", "mine");
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "b.txt"}, dir / "out"), testing::byte_tokenizer()); }),
            (dir / "out") + ": already exists (pass --overwrite to replace its train.bin, val.bin and meta.json)");
  PrepareOptions options = options_for({dir / "b.txt"}, dir / "out");
  options.overwrite = true;
  options.val_fraction = 0;
  prepare_data(options, testing::byte_tokenizer());
  EXPECT_EQ(testing::byte_tokenizer().decode(testing::read_tokens(dir / "out/train.bin")), "two<|endoftext|>");
  EXPECT_EQ(testing::read_whole_file(dir / "out/notes.txt"), "mine");
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "a.txt"}, dir / "a.txt"), testing::byte_tokenizer()); }),
            (dir / "a.txt") + ": exists and is not a folder");

  // A failed run into an existing folder leaves its old files and no temporary ones.
  write_whole_file(dir / "bad.jsonl", "{\"text\":\"x\"}\nnot json\n");
  options = options_for({dir / "bad.jsonl"}, dir / "out");
  options.overwrite = true;
  EXPECT_THROW(prepare_data(options, testing::byte_tokenizer()), UserError);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "out")) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"meta.json", "notes.txt", "train.bin", "val.bin"}));
  EXPECT_EQ(testing::byte_tokenizer().decode(testing::read_tokens(dir / "out/train.bin")), "two<|endoftext|>");
}

// A run killed right after it made its folder leaves the folder holding only its lock file:
// that folder is the next run's to fill without --overwrite (and to remove if it fails),
// while a live writer's lock still stops it.
TEST(Prepare, AFolderHoldingOnlyAStaleLockIsFilled) {
  TempDir dir;
  write_whole_file(dir / "a.txt", "one");
  fs::create_directories(dir / "out");
  write_whole_file(folder_lock_path(dir / "out"), "");
  {
    const WriterLock live(folder_lock_path(dir / "out"), dir / "out");
    EXPECT_NE(error_of([&] {
                prepare_data(options_for({dir / "a.txt"}, dir / "out"), testing::byte_tokenizer());
              }).find("in use by another sps process"),
              std::string::npos);
    EXPECT_TRUE(fs::exists(folder_lock_path(dir / "out")));
  }
  write_whole_file(folder_lock_path(dir / "out"), "");  // what a SIGKILL leaves
  write_whole_file(dir / "bad.jsonl", "not json\n");
  EXPECT_THROW(
      prepare_data(options_for({dir / "bad.jsonl"}, dir / "out"), testing::byte_tokenizer()),
      UserError);
  EXPECT_FALSE(fs::exists(dir / "out"));  // a failed run removes the folder, as one it made
  fs::create_directories(dir / "out");
  write_whole_file(folder_lock_path(dir / "out"), "");
  prepare_data(options_for({dir / "a.txt"}, dir / "out"), testing::byte_tokenizer());
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir / "out"))
    names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"meta.json", "train.bin", "val.bin"}));
}

TEST(Prepare, MissingAndEmptyInputs) {
  TempDir dir;
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "nope.txt"}, dir / "out"), testing::byte_tokenizer()); }),
            (dir / "nope.txt") + ": no such file or folder");
  fs::create_directories(dir / "empty_folder");
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "empty_folder"}, dir / "out"), testing::byte_tokenizer()); }),
            "no input files (check the paths and --include)");
  write_whole_file(dir / "e.txt", "");
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "e.txt"}, dir / "out"), testing::byte_tokenizer()); }),
            "no documents to write (1 empty document(s))");
  EXPECT_FALSE(fs::exists(dir / "out"));
  write_whole_file(dir / "t.txt.gz", testing::gzip_bytes("some text").substr(0, 12));
  EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "t.txt.gz"}, dir / "out"), testing::byte_tokenizer()); }),
            (dir / "t.txt.gz") + ": truncated gzip data");
  EXPECT_FALSE(fs::exists(dir / "out"));
  if (::geteuid() != 0) {  // root reads everything
    write_whole_file(dir / "locked.txt", "x");
    fs::permissions(dir / "locked.txt", fs::perms::none);
    EXPECT_EQ(error_of([&] { prepare_data(options_for({dir / "locked.txt"}, dir / "out"), testing::byte_tokenizer()); }),
              (dir / "locked.txt") + ": cannot open (Permission denied)");
  }
}

TEST(Prepare, OneWriterPerFolderAndTheLargestIdRecorded) {
  TempDir dir;
  write_whole_file(dir / "a.txt", "zzz a");
  fs::create_directories(dir / "out");
  PrepareOptions options = options_for({dir / "a.txt"}, dir / "out");
  options.overwrite = true;
  options.val_fraction = 0;
  {
    const WriterLock other(folder_lock_path(dir / "out"), dir / "out");
    EXPECT_EQ(error_of([&] { prepare_data(options, testing::byte_tokenizer()); }),
              (dir / "out") + ": in use by another sps process (PID " + std::to_string(::getpid()) +
                  "); wait for it to end or choose another output");
    EXPECT_FALSE(fs::exists(dir / "out/train.bin"));
  }
  prepare_data(options, testing::byte_tokenizer());
  const auto meta = read_meta(dir / "out");
  EXPECT_EQ(meta["train"]["max_id"], testing::byte_tokenizer().eos_id());  // EOS above 'z'
  EXPECT_FALSE(fs::exists(dir / "out/.sps.lock"));
}

}  // namespace
}  // namespace sps
