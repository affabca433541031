// BpeTokenizer::load: a tokenizer named on the command line or in a config.
#include <filesystem>
#include <string>
#include <system_error>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_impl.h"
#include "util/error.h"
#include "util/sps_home.h"

namespace sps {

namespace {

bool exists(const std::string& path) {
  std::error_code ec;  // a path that cannot be examined does not exist
  return std::filesystem::exists(path, ec);
}

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

}  // namespace

BpeTokenizer BpeTokenizer::load(const std::string& spec) {
  if (spec == "gpt2") {
    const std::string dir = sps_home() + "/gpt2";
    if (!exists(dir + "/encoder.json") || !exists(dir + "/vocab.bpe"))
      fail("GPT-2's tokenizer files are not in {} (run `make deps`, or "
           "scripts/get-gpt2-files.sh)",
           dir);
    auto tokenizer = from_gpt2_files(dir + "/encoder.json", dir + "/vocab.bpe");
    tokenizer.impl_->name = "gpt2";
    return tokenizer;
  }
  if (is_directory(spec)) {
    if (!exists(spec + "/encoder.json") || !exists(spec + "/vocab.bpe"))
      fail("{}: a tokenizer folder must hold encoder.json and vocab.bpe", spec);
    return from_gpt2_files(spec + "/encoder.json", spec + "/vocab.bpe");
  }
  if (!exists(spec))
    fail("{}: no such tokenizer (expected gpt2, a folder with encoder.json + vocab.bpe, "
         "or a tiktoken rank file)",
         spec);
  return from_rank_file(spec);
}

}  // namespace sps
