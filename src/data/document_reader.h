#pragma once
// Reading documents for `sps data prepare`: finding input files, decompressing them, and
// cutting them into documents.
//
// - Files are plain, gzip (also dictzip .dz and concatenated members) or zstd; the
//   compression is recognised by the first bytes, whatever the name says (a file named
//   .gz/.zst that is not such data is refused).
// - The format comes from the name with any .gz/.zst/.zstd/.dz removed: .jsonl or .ndjson
//   is JSON Lines, anything else is text; `format` overrides that.
// - Documents: a text file is one document (or, with split_blank_lines, one per block of
//   lines between blank lines); a JSON Lines file has one record per non-blank line, its
//   document the string in `field` and its id the `id` field (string or integer) if present.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sps {

enum class Compression { none, gzip, zstd };
enum class InputFormat { auto_detect, text, jsonl };

const char* compression_name(Compression c);
const char* format_name(InputFormat f);

struct SourceFile {
  std::string path;     // what to open
  std::string id_path;  // the path in document ids: relative to a folder input, else as given
  uint64_t size = 0;    // bytes on disk (compressed)
  size_t input = 0;     // index of the INPUT argument it came from
};

// Files as given; folders recursively, keeping files whose name (or, for a glob holding '/',
// the path relative to the folder) matches one of `include_globs` (all files when empty),
// sorted by relative path. Missing inputs raise UserError naming them.
std::vector<SourceFile> list_source_files(const std::vector<std::string>& inputs,
                                          const std::vector<std::string>& include_globs);

// The format a file name implies (auto_detect resolved).
InputFormat format_for_name(std::string_view path, InputFormat requested);

// A stream of decompressed bytes from a file or a memory buffer. Errors (unreadable file,
// corrupt or truncated compressed data) raise UserError naming the source.
class ByteStream {
 public:
  static std::unique_ptr<ByteStream> open_file(const std::string& path);
  static std::unique_ptr<ByteStream> from_memory(std::string bytes, std::string name);
  virtual ~ByteStream();

  // Reads up to `size` bytes; 0 only at the end.
  size_t read(char* out, size_t size);
  Compression compression() const { return compression_; }
  uint64_t raw_bytes() const { return raw_bytes_; }  // bytes taken from the file so far
  uint64_t size_hint() const { return size_hint_; }  // the file's size, 0 when unknown
  const std::string& name() const { return name_; }

 private:
  struct Decoder;
  ByteStream(std::string name);
  size_t fill_input();  // more raw bytes into input_; 0 at the end of the file
  void start();         // sniff the compression

  std::string name_;
  int fd_ = -1;
  std::string memory_;  // for from_memory
  size_t memory_pos_ = 0;
  std::unique_ptr<char[]> input_;  // raw bytes; not zeroed (one per file)
  size_t input_size_ = 0, input_pos_ = 0, input_end_ = 0;
  uint64_t size_hint_ = 0;
  bool input_eof_ = false;
  Compression compression_ = Compression::none;
  uint64_t raw_bytes_ = 0;
  std::unique_ptr<Decoder> decoder_;
};

// One document (or JSON Lines record) as read, before parsing and tokenizing.
struct RawDocument {
  std::string text;    // the document, or the JSON line for a record
  bool json = false;   // text is a JSON Lines record
  uint64_t index = 0;  // 0-based index of the document (record) in its file
  uint64_t line = 0;   // 1-based line of a record (or the first line of a block)
};

// Cuts one stream into raw documents. Text files without split_blank_lines come as one
// document (possibly empty).
class DocumentSplitter {
 public:
  DocumentSplitter(std::unique_ptr<ByteStream> stream, InputFormat format, bool split_blank_lines);
  bool next(RawDocument& doc);
  const ByteStream& stream() const { return *stream_; }
  uint64_t text_bytes() const { return text_bytes_; }  // decompressed bytes read so far

 private:
  bool next_line(std::string& line);  // without the '\n'; false at the end

  std::unique_ptr<ByteStream> stream_;
  InputFormat format_;
  bool split_blank_lines_;
  bool done_ = false;
  uint64_t index_ = 0, line_ = 0, text_bytes_ = 0;
  std::unique_ptr<char[]> buffer_;  // decompressed bytes for line splitting
  size_t pos_ = 0, end_ = 0;
};

// A parsed JSON Lines record.
struct JsonRecord {
  std::string text;
  std::string id;
  bool has_id = false;
  size_t replacements = 0;  // ill-formed UTF-8 subsequences in the line, replaced by U+FFFD
};

// Parses one JSON Lines record: the line is first repaired to UTF-8, then must be a JSON
// object whose `field` is a string; `id`, when present and not null, must be a string or an
// integer. On failure returns false with a one-line reason in *error (without file:line).
bool parse_json_record(std::string_view line, std::string_view field, JsonRecord& out,
                       std::string* error);

// Whether a document has nothing but ASCII white space (such documents are skipped).
bool is_blank(std::string_view text);

}  // namespace sps
