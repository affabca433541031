#pragma once
// Corpora for the rolling NLL: text files (one document each), folders of them, or JSON
// Lines files (the `field` of every record, default "text"), plain or compressed, read
// with the data area's readers.
#include <cstdint>
#include <string>
#include <vector>

#include "eval/rolling.h"
#include "tokenizer/bpe.h"

namespace sps::eval {

struct CorpusDocument {
  std::string text;
  std::string id;  // the record's id, else "<path relative to the input>:<index>" (as prepare)
};

// Every non-blank document under `path`. A malformed JSON Lines record is a UserError naming
// file:line; a corpus without documents is a UserError.
std::vector<CorpusDocument> read_corpus(const std::string& path, const std::string& field = "text");

// Tokenizes, scores (rolling, context = the model's block_size) and pools.
template <typename T>
CorpusScore score_corpus(Model<T>& model, const BpeTokenizer& tokenizer,
                         const std::vector<CorpusDocument>& docs, int64_t batch,
                         const ProgressCallback& progress = {});

}  // namespace sps::eval
