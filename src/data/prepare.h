#pragma once
// `sps data prepare`: text → train.bin, val.bin, meta.json (docs/model.md §6).
//
// Documents (document_reader.h) are read in order by one thread and handed on in batches of
// a few MB; each batch is parsed, split (split.h) and tokenized on `threads` threads while
// one of them writes the batch before in document order, so the output bytes do not depend
// on the thread count and memory stays bounded by a few batches (plus the largest
// document). With `shuffle` (the default), documents pass through the bucketed shuffle of
// shuffle.h on their way out, so the token files hold them in a seeded random order, as the
// paper's preparation does. Every document is followed by EOS. Token files are headerless little-endian uint16 (or uint32 with
// TokenDType::uint32). All three files are written under temporary names and renamed into
// place only when everything succeeded, meta.json last; on any error nothing new is left
// behind (a folder created by the run is removed again).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/document_reader.h"
#include "data/split.h"
#include "data/token_file.h"
#include "tokenizer/bpe.h"

namespace sps {

// Refuses (UserError) a tokenizer whose ids do not fit the dtype: uint16 holds ids up to
// 65535, so at most 65536 ids (vocab_size counts EOS; PREDICT and PAD never occur in data).
void check_token_dtype(uint32_t vocab_size, TokenDType dtype);

struct PrepareProgress {
  uint64_t file_bytes_done = 0, file_bytes_total = 0;  // on disk (compressed), for the ETA
  uint64_t text_bytes = 0;                             // decompressed bytes read
  uint64_t documents = 0, tokens = 0;                  // written so far
  uint32_t buckets_written = 0, buckets = 0;           // the shuffle's write-out, after the input
  double seconds = 0;
};

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::vector<std::string> include;  // globs for files inside folders
  InputFormat format = InputFormat::auto_detect;
  std::string field = "text";
  bool split_blank_lines = false;
  double val_fraction = kDefaultValFraction;
  uint64_t seed = kDefaultSplitSeed;  // of the split
  bool shuffle = true;
  uint64_t shuffle_seed = 2357;  // the paper's preparation's shuffle seed
  uint64_t shuffle_bucket_bytes = uint64_t{128} << 20;  // input bytes per shuffle bucket
  TokenDType dtype = TokenDType::uint16;
  int threads = 0;  // 0: all cores
  bool overwrite = false;
  bool skip_bad_records = false;
  size_t batch_bytes = size_t{8} << 20;  // text per batch (a larger document is a batch alone)
  size_t batch_documents = 16384;
  std::function<void(const PrepareProgress&)> progress;  // after each batch
  // Asked before each batch: true ends the run with Interrupted (util/stop_signals.h),
  // leaving nothing new behind.
  std::function<bool()> stop_requested;
};

struct SplitCounts {
  uint64_t documents = 0, tokens = 0;  // tokens include one EOS per document
  uint32_t max_id = 0;                 // the largest id written (readers check against it)
};

struct SourceCounts {
  std::string input;
  uint64_t files = 0, documents = 0, text_bytes = 0;
};

struct PrepareReport {
  SplitCounts train, val;
  uint64_t empty_documents = 0;  // skipped: nothing but white space
  uint64_t bad_records = 0;      // skipped with skip_bad_records
  std::string first_bad_record;  // "file:line: reason" of the first one
  uint64_t replacements = 0;     // ill-formed UTF-8 subsequences replaced by U+FFFD
  uint64_t text_bytes = 0, files = 0;
  std::vector<SourceCounts> sources;
  uint32_t shuffle_buckets = 0;  // 0: not shuffled
  int threads = 1;
  double seconds = 0;
};

PrepareReport prepare_data(const PrepareOptions& options, const BpeTokenizer& tokenizer);

// The tokenizer, loaded on first call: prepare_data calls it once, on a thread of its own,
// so loading overlaps listing and reading the inputs. Errors it throws propagate as usual
// (after an error of the inputs, which is reported first).
using TokenizerSource = std::function<const BpeTokenizer&()>;
PrepareReport prepare_data(const PrepareOptions& options, const TokenizerSource& tokenizer);

}  // namespace sps
