#include "eval/corpus.h"

#include <fmt/format.h>

#include "data/document_reader.h"
#include "util/error.h"

namespace sps::eval {

std::vector<CorpusDocument> read_corpus(const std::string& path, const std::string& field) {
  std::vector<CorpusDocument> docs;
  for (const SourceFile& file : list_source_files({path}, {})) {
    const InputFormat format = format_for_name(file.path, InputFormat::auto_detect);
    DocumentSplitter splitter(ByteStream::open_file(file.path), format, false);
    RawDocument raw;
    while (splitter.next(raw)) {
      CorpusDocument doc;
      if (raw.json) {
        JsonRecord record;
        std::string reason;
        if (!parse_json_record(raw.text, field, record, &reason))
          fail("{}:{}: {}", file.path, raw.line, reason);
        doc.text = std::move(record.text);
        if (record.has_id) doc.id = std::move(record.id);
      } else {
        doc.text = std::move(raw.text);
      }
      if (doc.id.empty()) doc.id = fmt::format("{}:{}", file.id_path, raw.index);
      if (is_blank(doc.text)) continue;
      docs.push_back(std::move(doc));
    }
  }
  if (docs.empty()) fail("{}: the corpus has no documents", path);
  return docs;
}

template <typename T>
CorpusScore score_corpus(Model<T>& model, const BpeTokenizer& tokenizer,
                         const std::vector<CorpusDocument>& docs, int64_t batch,
                         const ProgressCallback& progress) {
  CorpusScore score;
  std::vector<std::vector<int32_t>> tokens(docs.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < docs.size(); ++i) {
    const auto ids = tokenizer.encode(docs[i].text);
    tokens[i].assign(ids.begin(), ids.end());
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    score.documents += 1;
    score.tokens += int64_t(tokens[i].size());
    score.words += whitespace_words(docs[i].text);
    score.bytes += int64_t(docs[i].text.size());
  }
  for (const double ll : rolling_logliks(model, tokens, model.config().block_size, batch, progress))
    score.loglik += ll;
  return score;
}

template CorpusScore score_corpus<float>(Model<float>&, const BpeTokenizer&,
                                         const std::vector<CorpusDocument>&, int64_t,
                                         const ProgressCallback&);
template CorpusScore score_corpus<double>(Model<double>&, const BpeTokenizer&,
                                          const std::vector<CorpusDocument>&, int64_t,
                                          const ProgressCallback&);

}  // namespace sps::eval
