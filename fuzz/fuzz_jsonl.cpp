// libFuzzer target: the JSON Lines reader (decompression by magic, line splitting, record
// parsing) on arbitrary bytes. A UserError is the expected answer to bad input (corrupt
// gzip or zstd); any crash, sanitizer report or other exception is a bug, and so is a
// parsed record that breaks what the reader promises.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/document_reader.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace {

// Decompressed bytes looked at per input; zstd and gzip can expand a few KB a thousandfold.
constexpr uint64_t kMaxText = uint64_t{1} << 24;

void read_records(const std::string& bytes, const char* name, bool split_blank_lines) {
  try {
    sps::DocumentSplitter splitter(sps::ByteStream::from_memory(bytes, name),
                                   sps::InputFormat::auto_detect, split_blank_lines);
    sps::RawDocument doc;
    sps::JsonRecord record;
    std::string error;
    uint64_t expected_index = 0, last_line = 0;
    while (splitter.text_bytes() <= kMaxText && splitter.next(doc)) {
      if (doc.index != expected_index++ || doc.line <= last_line) __builtin_trap();
      last_line = doc.line;
      if (!doc.json) {
        if (split_blank_lines && sps::is_blank(doc.text)) __builtin_trap();
        continue;
      }
      if (doc.text.find('\n') != std::string::npos || sps::is_blank(doc.text)) __builtin_trap();
      if (sps::parse_json_record(doc.text, "text", record, &error)) {
        // Repaired before parsing, so the text and id are always valid UTF-8.
        if (sps::find_invalid_utf8(record.text) != std::string::npos) __builtin_trap();
        if (record.has_id && sps::find_invalid_utf8(record.id) != std::string::npos) __builtin_trap();
      } else if (error.empty() || error.find('\n') != std::string::npos) {
        __builtin_trap();  // errors are one line
      }
    }
  } catch (const sps::UserError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  read_records(bytes, "fuzz.jsonl", false);
  read_records(bytes, "fuzz.txt", true);
  return 0;
}
