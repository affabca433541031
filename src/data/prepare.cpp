#include "data/prepare.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "data/shuffle.h"
#include "data/split.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/stop_signals.h"
#include "util/writer_lock.h"

namespace sps {

namespace fs = std::filesystem;

void check_token_dtype(uint32_t vocab_size, TokenDType dtype) {
  if (dtype == TokenDType::uint16 && vocab_size > 65536)
    fail("the tokenizer has {} ids (up to {}), more than uint16 token files hold (ids up to "
         "65535); pass --dtype uint32",
         vocab_size, vocab_size - 1);
}

namespace {

// Documents in file order, as the reader thread hands them on.
struct Batch {
  std::vector<RawDocument> docs;
  std::vector<uint32_t> file_of;  // index into the source files, per document
  uint64_t text_bytes = 0;        // of the documents in the batch
  uint64_t file_bytes_done = 0;   // progress of the reader when the batch was handed on
  uint64_t text_bytes_done = 0;
  std::exception_ptr error;  // the reader failed after these documents
  bool last = false;
};

// A bounded queue of batches between the reader thread and the main thread.
class BatchQueue {
 public:
  explicit BatchQueue(size_t capacity) : capacity_(capacity) {}
  // False when the consumer has stopped.
  bool push(Batch&& batch) {
    std::unique_lock<std::mutex> lock(mutex_);
    not_full_.wait(lock, [&] { return stopped_ || queue_.size() < capacity_; });
    if (stopped_) return false;
    queue_.push_back(std::move(batch));
    not_empty_.notify_one();
    return true;
  }
  Batch pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    not_empty_.wait(lock, [&] { return !queue_.empty(); });
    Batch batch = std::move(queue_.front());
    queue_.pop_front();
    not_full_.notify_one();
    return batch;
  }
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    not_full_.notify_all();
  }

 private:
  size_t capacity_;
  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Batch> queue_;
  bool stopped_ = false;
};

// Reads every source file in order and hands batches on until done, stopped, or failed.
void read_documents(const PrepareOptions& options, const std::vector<SourceFile>& files,
                    BatchQueue& queue, std::vector<uint64_t>& text_bytes_per_file) {
  Batch batch;
  uint64_t file_bytes_done = 0, text_bytes_done = 0;
  auto hand_on = [&](bool last, uint64_t current_file_bytes, uint64_t current_text_bytes) {
    batch.last = last;
    batch.file_bytes_done = file_bytes_done + current_file_bytes;
    batch.text_bytes_done = text_bytes_done + current_text_bytes;
    const bool ok = queue.push(std::move(batch));
    batch = Batch{};
    return ok;
  };
  try {
    for (size_t f = 0; f < files.size(); ++f) {
      DocumentSplitter splitter(ByteStream::open_file(files[f].path), options.format,
                                options.split_blank_lines);
      RawDocument doc;
      while (splitter.next(doc)) {
        batch.text_bytes += doc.text.size();
        batch.docs.push_back(std::move(doc));
        batch.file_of.push_back(static_cast<uint32_t>(f));
        doc = RawDocument{};
        if (batch.text_bytes >= options.batch_bytes || batch.docs.size() >= options.batch_documents)
          if (!hand_on(false, splitter.stream().raw_bytes(), splitter.text_bytes())) return;
      }
      text_bytes_per_file[f] = splitter.text_bytes();
      file_bytes_done += splitter.stream().raw_bytes();
      text_bytes_done += splitter.text_bytes();
    }
  } catch (...) {
    batch.error = std::current_exception();
  }
  hand_on(true, 0, 0);
}

enum class Outcome : uint8_t { kept, empty, bad };

struct Encoded {
  std::vector<uint32_t> tokens;  // EOS included
  Outcome outcome = Outcome::kept;
  bool val = false;
  uint64_t replacements = 0;
  std::string error;  // for bad records: "file:line: reason"
};

void encode_document(const PrepareOptions& options, const BpeTokenizer& tokenizer,
                     const SplitRule& rule, const SourceFile& file, RawDocument& doc,
                     Encoded& out) {
  std::string id;
  std::string_view text = doc.text;
  JsonRecord record;
  if (doc.json) {
    std::string reason;
    if (!parse_json_record(doc.text, options.field, record, &reason)) {
      out.outcome = Outcome::bad;
      out.error = fmt::format("{}:{}: {}", file.path, doc.line, reason);
      return;
    }
    out.replacements += record.replacements;
    text = record.text;
    if (record.has_id) id = std::move(record.id);
  }
  if (id.empty() && !(doc.json && record.has_id)) id = fmt::format("{}:{}", file.id_path, doc.index);
  if (is_blank(text)) {
    out.outcome = Outcome::empty;
    return;
  }
  out.val = rule.is_validation(id);
  EncodeStats stats;
  tokenizer.encode(text, out.tokens, &stats);
  out.tokens.push_back(tokenizer.eos_id());
  out.replacements += stats.replacements;
}

// Token ids as little-endian integers of the dtype, appended to `bytes`.
template <typename Int>
void append_as(const std::vector<uint32_t>& tokens, std::string& bytes) {
  static_assert(std::endian::native == std::endian::little, "token files are little-endian");
  const size_t old = bytes.size();
  bytes.resize(old + tokens.size() * sizeof(Int));
  char* p = bytes.data() + old;
  for (uint32_t id : tokens) {
    const Int value = static_cast<Int>(id);
    std::memcpy(p, &value, sizeof value);
    p += sizeof value;
  }
}

void append_tokens(const std::vector<uint32_t>& tokens, TokenDType dtype, std::string& bytes) {
  if (dtype == TokenDType::uint16) append_as<uint16_t>(tokens, bytes);
  else append_as<uint32_t>(tokens, bytes);
}

struct OutputFolder {
  std::string path;
  bool created = false;
};

// True when `folder` holds nothing but a writer's lock file: what a run killed before it
// wrote anything leaves (the lock is free again once its holder is gone; taking it says so).
bool holds_only_a_lock(const std::string& folder) {
  std::error_code ec;
  size_t entries = 0;
  bool lock = false;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    ++entries;
    lock = lock || entry.path().filename() == fs::path(folder_lock_path(folder)).filename();
  }
  return !ec && entries == 1 && lock;
}

OutputFolder open_output_folder(const std::string& path, bool overwrite) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status)) fail("{}: exists and is not a folder", path);
    // A folder a killed run made and left with only its lock is this run's to fill (and to
    // remove again on an error); a live writer's lock still stops this run below.
    if (holds_only_a_lock(path)) return {path, true};
    if (!overwrite)
      fail("{}: already exists (pass --overwrite to replace its train.bin, val.bin and meta.json)",
           path);
    return {path, false};
  }
  fs::create_directories(path, ec);
  if (ec) fail("{}: cannot create the folder ({})", path, ec.message());
  return {path, true};
}

nlohmann::ordered_json meta_json(const PrepareOptions& options, const BpeTokenizer& tokenizer,
                                 const PrepareReport& report) {
  using json = nlohmann::ordered_json;
  auto split = [&](const SplitCounts& counts, const char* file) {
    return json{{"file", file}, {"documents", counts.documents}, {"tokens", counts.tokens},
                {"max_id", counts.max_id}};
  };
  json sources = json::array();
  for (const SourceCounts& s : report.sources)
    sources.push_back({{"input", s.input}, {"files", s.files}, {"documents", s.documents},
                       {"bytes", s.text_bytes}});
  return json{
      {"format", "headerless little-endian token ids, EOS after each document"},
      {"dtype", token_dtype_name(options.dtype)},
      // The tokenizer's ids are below vocab_size (EOS included); the model's V is padded.
      {"vocab_size", tokenizer.vocab_size()},
      {"padded_vocab_size", tokenizer.padded_vocab_size()},
      {"eos_token_id", tokenizer.eos_id()},
      {"special_ids",
       {{"eos", tokenizer.eos_id()}, {"predict", tokenizer.predict_id()}, {"pad", tokenizer.pad_id()}}},
      {"tokenizer", {{"name", tokenizer.name()}, {"fingerprint", tokenizer.fingerprint()}}},
      {"train", split(report.train, "train.bin")},
      {"val", split(report.val, "val.bin")},
      {"split",
       {{"rule", "val when the first 8 bytes of md5(\"{seed}:{id}\"), read little-endian, are < floor(val_fraction * 2^64)"},
        {"byte_order", "little"},
        {"id", "the record's id field, else <source path>:<document index>"},
        {"seed", options.seed},
        {"val_fraction", options.val_fraction},
        {"threshold", SplitRule(options.seed, options.val_fraction).threshold}}},
      {"shuffle",
       report.shuffle_buckets == 0
           ? json(nullptr)
           : json{{"seed", options.shuffle_seed},
                  {"buckets", report.shuffle_buckets},
                  {"rule", "document i (input order, both splits) goes to bucket floor(splitmix64 "
                           "output i of seed * buckets / 2^64); each bucket is permuted by "
                           "Fisher-Yates (docs/data.md); buckets are written in order"}}},
      {"skipped", {{"empty_documents", report.empty_documents}, {"bad_records", report.bad_records}}},
      {"utf8_replacements", report.replacements},
      {"input_bytes", report.text_bytes},
      {"input",
       {{"format", format_name(options.format)},
        {"field", options.field},
        {"split_blank_lines", options.split_blank_lines},
        {"include", options.include}}},
      {"sources", sources},
  };
}

// The output side of a run: train.bin and val.bin in document order (through the shuffler's
// buckets when shuffling), meta.json last, and the document counts of the report.
class PrepareWriter {
 public:
  PrepareWriter(const PrepareOptions& options, const std::vector<SourceFile>& files,
                const std::string& out_dir, uint64_t file_bytes_total, PrepareReport& report)
      : options_(options),
        files_(files),
        out_dir_(out_dir),
        report_(report),
        train_file_(out_dir + "/train.bin"),
        val_file_(out_dir + "/val.bin") {
    if (options.shuffle) {
      shuffler_.emplace(out_dir, options.shuffle_seed,
                        shuffle_bucket_count(file_bytes_total, options.shuffle_bucket_bytes));
      report.shuffle_buckets = shuffler_->buckets();
    }
  }

  // One encoded batch, in document order; the first error of a document or of the reader
  // is thrown after the documents before it are written.
  void write(const Batch& batch, std::vector<Encoded>& encoded,
             const std::vector<std::exception_ptr>& errors) {
    train_bytes_.clear();
    val_bytes_.clear();
    for (size_t i = 0; i < batch.docs.size(); ++i) {
      if (errors[i]) std::rethrow_exception(errors[i]);
      Encoded& e = encoded[i];
      report_.replacements += e.replacements;
      if (e.outcome == Outcome::bad) {
        if (!options_.skip_bad_records)
          throw UserError(e.error + " (pass --skip-bad-records to skip such records)");
        if (report_.bad_records++ == 0) report_.first_bad_record = e.error;
        continue;
      }
      if (e.outcome == Outcome::empty) {
        ++report_.empty_documents;
        continue;
      }
      SplitCounts& counts = e.val ? report_.val : report_.train;
      ++counts.documents;
      counts.tokens += e.tokens.size();
      counts.max_id = std::max(counts.max_id, *std::max_element(e.tokens.begin(), e.tokens.end()));
      ++report_.sources[files_[batch.file_of[i]].input].documents;
      if (shuffler_) {
        document_bytes_.clear();
        append_tokens(e.tokens, options_.dtype, document_bytes_);
        shuffler_->add(e.val, document_bytes_);
      } else {
        append_tokens(e.tokens, options_.dtype, e.val ? val_bytes_ : train_bytes_);
      }
    }
    if (!train_bytes_.empty()) train_file_.write(train_bytes_.data(), train_bytes_.size());
    if (!val_bytes_.empty()) val_file_.write(val_bytes_.data(), val_bytes_.size());
    if (batch.error) std::rethrow_exception(batch.error);
  }

  // Shuffled runs: the buckets' documents in their shuffled order, written in large pieces.
  void finish_shuffle(const ProgressCallback& buckets_written) {
    if (!shuffler_) return;
    train_bytes_.clear();
    val_bytes_.clear();
    auto write_out = [&](AtomicFile& file, std::string& bytes, size_t at_least) {
      if (bytes.size() < at_least) return;
      file.write(bytes.data(), bytes.size());
      bytes.clear();
    };
    constexpr size_t kWriteBytes = size_t{8} << 20;
    shuffler_->finish(
        [&](uint8_t val, std::string_view document) {
          std::string& bytes = val ? val_bytes_ : train_bytes_;
          bytes.append(document);
          write_out(val ? val_file_ : train_file_, bytes, kWriteBytes);
        },
        buckets_written);
    write_out(train_file_, train_bytes_, 1);
    write_out(val_file_, val_bytes_, 1);
  }

  // meta.json marks a complete folder: drop an old one first, write the new one last.
  void commit(const std::string& meta) {
    const std::string meta_path = out_dir_ + "/meta.json";
    std::error_code ec;
    fs::remove(meta_path, ec);
    if (ec) fail("{}: cannot remove the old file ({})", meta_path, ec.message());
    AtomicFile meta_file(meta_path);
    meta_file.write(meta.data(), meta.size());
    train_file_.commit();
    val_file_.commit();
    meta_file.commit();
  }

 private:
  const PrepareOptions& options_;
  const std::vector<SourceFile>& files_;
  std::string out_dir_;
  PrepareReport& report_;
  AtomicFile train_file_, val_file_;
  std::optional<DocumentShuffler> shuffler_;
  std::string train_bytes_, val_bytes_, document_bytes_;
};

// One of the two batches in flight: while one thread writes batch k-1 in document order,
// the others already encode batch k (a writing step alone left the other cores idle).
struct BatchSlot {
  Batch batch;
  bool full = false;
  std::vector<Encoded> encoded;
  std::vector<std::exception_ptr> errors;
  std::vector<uint32_t> order;  // largest documents first, so no thread ends alone on one
};

// Fills `slot` with the reader's next batch, or leaves it empty after the last one.
void take_next(BatchSlot& slot, BatchQueue& queue, bool& last_popped,
               const PrepareOptions& options) {
  if (options.stop_requested && options.stop_requested()) throw Interrupted();
  slot.full = !last_popped;
  if (!slot.full) return;
  slot.batch = queue.pop();
  last_popped = slot.batch.last;
  const size_t n = slot.batch.docs.size();
  slot.encoded.assign(n, Encoded{});
  slot.errors.assign(n, nullptr);
  slot.order.resize(n);
  for (size_t i = 0; i < n; ++i) slot.order[i] = static_cast<uint32_t>(i);
  std::stable_sort(slot.order.begin(), slot.order.end(), [&](uint32_t a, uint32_t b) {
    return slot.batch.docs[a].text.size() > slot.batch.docs[b].text.size();
  });
}

// The report before any document: threads, files and the inputs they came from.
PrepareReport empty_report(const PrepareOptions& options, const std::vector<SourceFile>& files) {
  PrepareReport report;
  report.threads = options.threads > 0
                       ? options.threads
                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  report.files = files.size();
  for (size_t i = 0; i < options.inputs.size(); ++i) report.sources.push_back({options.inputs[i]});
  for (const SourceFile& f : files) ++report.sources[f.input].files;
  return report;
}

// Once every document is read: the text bytes per input; a run that found no document fails.
void count_text_bytes(PrepareReport& report, const std::vector<SourceFile>& files,
                      const std::vector<uint64_t>& text_bytes_per_file) {
  for (size_t f = 0; f < files.size(); ++f) {
    report.text_bytes += text_bytes_per_file[f];
    report.sources[files[f].input].text_bytes += text_bytes_per_file[f];
  }
  if (report.train.documents + report.val.documents == 0)
    fail("no documents to write ({} empty document(s){})", report.empty_documents,
         report.bad_records ? fmt::format(" and {} bad record(s)", report.bad_records) : "");
}

PrepareReport run(const PrepareOptions& options, const TokenizerSource& tokenizer_source,
                  const std::vector<SourceFile>& files, const std::string& out_dir) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const SplitRule rule(options.seed, options.val_fraction);
  PrepareReport report = empty_report(options, files);
  uint64_t file_bytes_total = 0;
  for (const SourceFile& f : files) file_bytes_total += f.size;

  PrepareWriter writer(options, files, out_dir, file_bytes_total, report);
  BatchQueue queue(2);
  std::vector<uint64_t> text_bytes_per_file(files.size(), 0);
  std::thread reader([&] { read_documents(options, files, queue, text_bytes_per_file); });
  struct StopReader {
    BatchQueue& queue;
    std::thread& reader;
    ~StopReader() {
      queue.stop();
      if (reader.joinable()) reader.join();
    }
  } stop_reader{queue, reader};
  const BpeTokenizer& tokenizer = tokenizer_source();  // waits while the reader already reads
  check_token_dtype(tokenizer.vocab_size(), options.dtype);

  BatchSlot slots[2];
  PrepareProgress progress;
  progress.file_bytes_total = file_bytes_total;
  bool last_popped = false, stop = false;
  std::exception_ptr failure;  // the first error, in document order; ends the run
  auto write = [&](BatchSlot& slot) {
    slot.full = false;
    writer.write(slot.batch, slot.encoded, slot.errors);
    if (!options.progress) return;
    progress.file_bytes_done = slot.batch.file_bytes_done;
    progress.text_bytes = slot.batch.text_bytes_done;
    progress.documents = report.train.documents + report.val.documents;
    progress.tokens = report.train.tokens + report.val.tokens;
    progress.seconds = elapsed();
    options.progress(progress);
  };

  // Step k: one thread takes batch k; then one thread writes batch k-1 while the rest (and
  // then it) encode batch k. The barriers keep the two slots apart; every thread sees the
  // same `stop` after them, so all leave together.
#pragma omp parallel num_threads(report.threads)
  for (size_t k = 0;; ++k) {
    BatchSlot& current = slots[k % 2];
    BatchSlot& previous = slots[(k + 1) % 2];
#pragma omp barrier
#pragma omp single
    {
      if (failure) stop = true;
      else {
        try {
          take_next(current, queue, last_popped, options);
        } catch (...) {
          failure = std::current_exception();
        }
        stop = failure || (!current.full && !previous.full);
      }
    }
    if (stop) break;
#pragma omp single nowait
    if (previous.full) {
      try {
        write(previous);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    const int64_t n = current.full ? static_cast<int64_t>(current.batch.docs.size()) : 0;
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t i = current.order[j];
      RawDocument& doc = current.batch.docs[i];
      try {
        encode_document(options, tokenizer, rule, files[current.batch.file_of[i]], doc,
                        current.encoded[i]);
      } catch (...) {
        current.errors[i] = std::current_exception();
      }
      doc.text = std::string();  // free the text early
    }
  }
  if (failure) std::rethrow_exception(failure);
  reader.join();
  count_text_bytes(report, files, text_bytes_per_file);
  const auto buckets_written = [&](int64_t done, int64_t buckets) {
    progress.buckets_written = uint32_t(done);
    progress.buckets = uint32_t(buckets);
    progress.seconds = elapsed();
    options.progress(progress);
  };
  writer.finish_shuffle(options.progress ? ProgressCallback(buckets_written) : ProgressCallback());
  writer.commit(meta_json(options, tokenizer, report).dump(2) + "\n");
  report.seconds = elapsed();
  return report;
}

}  // namespace

PrepareReport prepare_data(const PrepareOptions& options, const BpeTokenizer& tokenizer) {
  check_token_dtype(tokenizer.vocab_size(), options.dtype);
  return prepare_data(options, [&]() -> const BpeTokenizer& { return tokenizer; });
}

PrepareReport prepare_data(const PrepareOptions& options, const TokenizerSource& tokenizer) {
  if (options.inputs.empty()) fail("no inputs given");
  if (options.field.empty()) fail("--field must not be empty");
  (void)SplitRule(options.seed, options.val_fraction);  // validates the fraction
  // Loaded while the input files are listed and then read: a fixed cost of every run
  // (~0.03 s for GPT-2), a large share of a small corpus's time.
  std::future<const BpeTokenizer*> loading =
      std::async(std::launch::async, [&]() -> const BpeTokenizer* { return &tokenizer(); });
  const std::vector<SourceFile> files = list_source_files(options.inputs, options.include);
  if (files.empty()) fail("no input files (check the paths and --include)");
  const OutputFolder folder = open_output_folder(options.out_dir, options.overwrite);
  std::optional<WriterLock> lock;
  try {
    lock.emplace(folder_lock_path(folder.path), folder.path);
    remove_stale_temporaries(folder.path);
    return run(options, [&]() -> const BpeTokenizer& { return *loading.get(); }, files, folder.path);
  } catch (...) {
    // The temporary files are gone already (AtomicFile); a folder made by this run goes too.
    lock.reset();
    if (folder.created) {
      std::error_code ec;
      fs::remove(folder.path, ec);
    }
    throw;
  }
}

}  // namespace sps
