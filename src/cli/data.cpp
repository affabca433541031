// sps data prepare: text files, folders and JSON Lines -> train.bin, val.bin, meta.json.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "data/prepare.h"
#include "tokenizer/bpe.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/stop_signals.h"

namespace sps::cli {

namespace {

struct PrepareArgs {
  PrepareOptions options;
  std::string tokenizer = "gpt2";
  std::string format = "auto";
  std::string dtype = "uint16";
};

void run_prepare(PrepareArgs args) {
  static const std::map<std::string, InputFormat> formats{
      {"auto", InputFormat::auto_detect}, {"text", InputFormat::text}, {"jsonl", InputFormat::jsonl}};
  args.options.format = formats.at(args.format);
  args.options.dtype = args.dtype == "uint32" ? TokenDType::uint32 : TokenDType::uint16;
  std::optional<BpeTokenizer> tokenizer;  // loaded by prepare_data while it starts reading

  // Reading and encoding by input bytes, then the shuffle's write-out by buckets.
  ProgressReporter reading("prepare", progress_in_bytes());
  std::optional<ProgressReporter> shuffling;
  args.options.progress = [&](const PrepareProgress& p) {
    if (p.buckets == 0) {
      reading.update(int64_t(p.file_bytes_done), int64_t(p.file_bytes_total),
                     fmt::format("{} documents, {} tokens", p.documents, p.tokens));
      return;
    }
    if (!shuffling) {
      reading.finish();
      shuffling.emplace("shuffle", progress_in("buckets"));
    }
    shuffling->update(p.buckets_written, p.buckets);
  };
  const auto finish_progress = [&] {
    reading.finish();
    shuffling.reset();
  };
  // SIGINT/SIGTERM stop at the next batch: the run's files are removed, then the process
  // ends by the signal as before.
  const StopSignals signals;
  args.options.stop_requested = [&] { return signals.requested(); };
  PrepareReport report;
  try {
    report = prepare_data(args.options, [&]() -> const BpeTokenizer& {
      return tokenizer.emplace(BpeTokenizer::load(args.tokenizer));
    });
  } catch (const Interrupted&) {
    finish_progress();
    signals.die_by_signal();
  }
  finish_progress();
  std::fprintf(stderr,
               "sps: %s: train %llu documents, %llu tokens; val %llu documents, %llu tokens "
               "(%s, %s, %s); %zu files, %.1f MB in %.1f s (%.1f MB/s, %d thread%s)\n",
               args.options.out_dir.c_str(), static_cast<unsigned long long>(report.train.documents),
               static_cast<unsigned long long>(report.train.tokens),
               static_cast<unsigned long long>(report.val.documents),
               static_cast<unsigned long long>(report.val.tokens), tokenizer->name().c_str(),
               token_dtype_name(args.options.dtype),
               report.shuffle_buckets ? "shuffled" : "input order", static_cast<size_t>(report.files),
               report.text_bytes / 1e6, report.seconds,
               report.text_bytes / 1e6 / std::max(1e-9, report.seconds), report.threads,
               report.threads == 1 ? "" : "s");
  if (report.val.documents == 0 && args.options.val_fraction > 0)
    std::fprintf(stderr,
                 "sps: warning: no document fell in val.bin (val fraction %g of %llu documents); "
                 "training with validation needs some: raise --val-fraction\n",
                 args.options.val_fraction, static_cast<unsigned long long>(report.train.documents));
  if (report.empty_documents)
    std::fprintf(stderr, "sps: skipped %llu empty document(s)\n",
                 static_cast<unsigned long long>(report.empty_documents));
  if (report.bad_records)
    std::fprintf(stderr, "sps: skipped %llu bad record(s), the first: %s\n",
                 static_cast<unsigned long long>(report.bad_records), report.first_bad_record.c_str());
  if (report.replacements)
    std::fprintf(stderr, "sps: replaced %llu ill-formed UTF-8 sequence(s) with U+FFFD\n",
                 static_cast<unsigned long long>(report.replacements));
}

}  // namespace

void register_data(CLI::App& app) {
  auto* data = app.add_subcommand("data", "prepare token files from text");
  data->require_subcommand(1);

  static PrepareArgs args;
  auto* prepare = data->add_subcommand(
      "prepare",
      "tokenize text files, folders and JSON Lines (plain, .gz or .zst) into train.bin and val.bin "
      "(headerless little-endian token ids, EOS after every document, documents in a seeded "
      "random order) and meta.json; as in the paper, a document is in val when the first 8 bytes "
      "of md5(\"{seed}:{id}\") read little-endian are below floor(val-fraction * 2^64), id "
      "being the record's `id` field or else <path>:<index> (path relative to a folder input, "
      "or as given)");
  prepare->add_option("inputs", args.options.inputs,
                      "text files (one document each), folders (searched recursively) and JSON Lines "
                      "files (*.jsonl, *.ndjson; one document per record)")
      ->required();
  prepare->add_option("--out", args.options.out_dir, "the output folder")->required();
  prepare->add_option("--tokenizer", args.tokenizer,
                      "gpt2, a folder with encoder.json + vocab.bpe, or a tiktoken rank file "
                      "(what `sps tokenizer train` writes)")
      ->capture_default_str();
  prepare->add_option("--include", args.options.include,
                      "in folders, keep only files whose name matches one of these globs (*.rst); "
                      "a glob with '/' matches the path below the folder");
  prepare->add_option("--format", args.format, "input format: auto (by name), text or jsonl")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "text", "jsonl"}));
  prepare->add_option("--field", args.options.field, "the JSON Lines field holding the text")
      ->capture_default_str();
  prepare->add_flag("--split-blank-lines", args.options.split_blank_lines,
                    "in text files, one document per block of lines between blank lines");
  prepare->add_option("--val-fraction", args.options.val_fraction,
                      "share of documents for val.bin, by hash")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  prepare->add_option("--seed", args.options.seed, "seed of the hash split (the paper's: 42)")
      ->capture_default_str();
  prepare->add_option("--shuffle-seed", args.options.shuffle_seed,
                      "seed of the document shuffle (docs/data.md)")
      ->capture_default_str();
  prepare->add_flag("--no-shuffle{false}", args.options.shuffle,
                    "keep the documents in input order (the paper's sampler then reads chunks "
                    "of neighbouring documents)");
  prepare->add_option("--dtype", args.dtype,
                      "token width: uint16 (nanoGPT's layout; ids up to 65535) or uint32")
      ->capture_default_str()
      ->check(CLI::IsMember({"uint16", "uint32"}));
  prepare->add_option("--threads", args.options.threads, "tokenizer threads (default: all cores)")
      ->check(CLI::Range(0, 4096));
  prepare->add_flag("--overwrite", args.options.overwrite,
                    "replace train.bin, val.bin and meta.json in an existing --out folder");
  prepare->add_flag("--skip-bad-records", args.options.skip_bad_records,
                    "skip (and count) malformed JSON Lines records instead of stopping");
  prepare->callback([] { run_prepare(args); });
}

}  // namespace sps::cli
