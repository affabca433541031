// sps.prepare (`sps data prepare`, data/prepare.h), token files as read-only numpy arrays over
// their memory map (data/token_file.h), and the trainer's validation windows.
#include <pybind11/stl.h>

#include <filesystem>

#include "data/prepare.h"
#include "data/token_file.h"
#include "python/support.h"
#include "python/tokenizer.h"
#include "train/trainer.h"

namespace sps::python {

namespace {

py::dict split_dict(const SplitCounts& s) {
  py::dict d;
  d["documents"] = s.documents;
  d["tokens"] = s.tokens;
  d["max_id"] = s.max_id;
  return d;
}

py::dict prepare(const std::vector<std::string>& inputs, const std::string& out,
                 const std::string& tokenizer_spec, const std::vector<std::string>& include,
                 const std::string& format, const std::string& field, bool split_blank_lines,
                 double val_fraction, uint64_t seed, bool shuffle, uint64_t shuffle_seed,
                 const std::string& dtype, int threads, bool overwrite, bool skip_bad_records,
                 const py::object& progress) {
  if (inputs.empty()) fail("inputs: no input files or folders");
  for (size_t i = 0; i < inputs.size(); ++i) require_path(inputs[i], fmt::format("inputs[{}]", i));
  if (out.empty()) fail("out: empty path");
  if (!(val_fraction >= 0 && val_fraction <= 1))
    fail("val_fraction: expected a share in [0, 1], got {}", val_fraction);
  if (threads < 0) fail("threads: expected a count >= 0 (0: all cores), got {}", threads);
  PrepareOptions options;
  options.inputs = inputs;
  options.out_dir = out;
  options.include = include;
  if (format == "auto")
    options.format = InputFormat::auto_detect;
  else if (format == "text")
    options.format = InputFormat::text;
  else if (format == "jsonl")
    options.format = InputFormat::jsonl;
  else
    fail("format: expected \"auto\", \"text\" or \"jsonl\", got \"{}\"", format);
  options.field = field;
  options.split_blank_lines = split_blank_lines;
  options.val_fraction = val_fraction;
  options.seed = seed;
  options.shuffle = shuffle;
  options.shuffle_seed = shuffle_seed;
  options.dtype = token_dtype_from_name(dtype, "dtype");
  options.threads = threads;
  options.overwrite = overwrite;
  options.skip_bad_records = skip_bad_records;
  const PyCallable show(progress);  // (done, total) in input bytes
  if (tokenizer_spec != "gpt2") require_path(tokenizer_spec, "tokenizer");
  std::optional<BpeTokenizer> tokenizer;
  const PrepareReport report = without_gil([&](const StopScope& scope) {
    options.stop_requested = [&] { return scope.stop_requested(); };
    if (show)
      options.progress = [&](const PrepareProgress& p) {
        if (p.buckets == 0) show(int64_t(p.file_bytes_done), int64_t(p.file_bytes_total));
      };
    return prepare_data(options, [&]() -> const BpeTokenizer& {
      return tokenizer.emplace(BpeTokenizer::load(tokenizer_spec));
    });
  });
  py::dict d;
  d["out"] = out;
  d["train"] = split_dict(report.train);
  d["val"] = split_dict(report.val);
  d["documents_skipped_empty"] = report.empty_documents;
  d["bad_records"] = report.bad_records;
  d["first_bad_record"] = report.first_bad_record;
  d["replacements"] = report.replacements;
  d["text_bytes"] = report.text_bytes;
  d["files"] = report.files;
  d["shuffled"] = report.shuffle_buckets > 0;
  d["threads"] = report.threads;
  d["seconds"] = report.seconds;
  d["tokenizer"] = tokenizer ? tokenizer->name() : tokenizer_spec;
  return d;
}

// A token file as a read-only array over its memory map; the map lives as long as the array.
py::array open_tokens(const std::string& path, const std::optional<std::string>& dtype_name,
                      const std::optional<int64_t>& vocab_size) {
  require_path(path, "path");
  if (vocab_size && *vocab_size < 1)
    fail("vocab_size: expected a count of ids >= 1, got {}", *vocab_size);
  const DatasetMeta meta = read_dataset_meta(std::filesystem::path(path).parent_path().string());
  TokenDType dtype = TokenDType::uint16;
  if (dtype_name)
    dtype = token_dtype_from_name(*dtype_name, "dtype");
  else if (!meta.dtype.empty())
    dtype = token_dtype_from_name(meta.dtype, meta.path + ": dtype");
  auto file = std::make_shared<const TokenFile>(path, dtype);
  // Ids checked as the trainer checks them: against the vocabulary asked for, else the one
  // meta.json records (its recorded largest id when it is this file's).
  const int64_t limit = vocab_size ? *vocab_size : meta.vocab_size;
  if (limit > 0)
    without_gil([&](const StopScope&) {
      file->check_ids(limit, vocab_size ? "vocab_size" : meta.path + "'s vocab_size",
                      meta.known_max_id(*file));
    });
  const py::ssize_t n = py::ssize_t(file->size());
  if (dtype == TokenDType::uint16)
    return array_owning(static_cast<uint16_t*>(const_cast<void*>(file->data())), {n}, file, false);
  return array_owning(static_cast<uint32_t*>(const_cast<void*>(file->data())), {n}, file, false);
}

}  // namespace

void register_data(py::module_& m) {
  m.def("prepare", &prepare, py::arg("inputs"), py::arg("out"), py::arg("tokenizer"),
        py::arg("include"), py::arg("format"), py::arg("field"), py::arg("split_blank_lines"),
        py::arg("val_fraction"), py::arg("seed"), py::arg("shuffle"), py::arg("shuffle_seed"),
        py::arg("dtype"), py::arg("threads"), py::arg("overwrite"), py::arg("skip_bad_records"),
        py::arg("progress"));
  m.def("open_tokens", &open_tokens, py::arg("path"), py::arg("dtype"), py::arg("vocab_size"));
  m.def(
      "validation_windows",
      [](int64_t file_tokens, int64_t block_size, int64_t eval_total_tokens, uint64_t seed) {
        if (block_size < 1 || file_tokens <= block_size)
          fail("file_tokens: {} tokens hold no window of block_size + 1 = {}", file_tokens,
               block_size + 1);
        std::vector<int64_t> starts =
            validation_windows(file_tokens, block_size, eval_total_tokens, seed);
        int64_t* data = starts.data();
        const py::ssize_t n = py::ssize_t(starts.size());
        return array_owning(data, {n}, std::move(starts));
      },
      py::arg("file_tokens"), py::arg("block_size"), py::arg("eval_total_tokens"), py::arg("seed"));
}

}  // namespace sps::python
