#include "data/document_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fnmatch.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace sps {

namespace fs = std::filesystem;

const char* compression_name(Compression c) {
  switch (c) {
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
    default: return "none";
  }
}

const char* format_name(InputFormat f) {
  switch (f) {
    case InputFormat::text: return "text";
    case InputFormat::jsonl: return "jsonl";
    default: return "auto";
  }
}

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The name without a compression suffix, and which suffix it had.
std::string_view strip_compression_suffix(std::string_view name, Compression* named) {
  *named = Compression::none;
  for (std::string_view gz : {".gz", ".dz"})
    if (ends_with(name, gz)) {
      *named = Compression::gzip;
      return name.substr(0, name.size() - gz.size());
    }
  for (std::string_view zst : {".zst", ".zstd"})
    if (ends_with(name, zst)) {
      *named = Compression::zstd;
      return name.substr(0, name.size() - zst.size());
    }
  return name;
}

bool glob_matches(const std::string& glob, const std::string& name, const std::string& relative) {
  const std::string& subject = glob.find('/') != std::string::npos ? relative : name;
  return fnmatch(glob.c_str(), subject.c_str(), 0) == 0;
}

}  // namespace

std::vector<SourceFile> list_source_files(const std::vector<std::string>& inputs,
                                          const std::vector<std::string>& include_globs) {
  std::vector<SourceFile> files;
  for (size_t input = 0; input < inputs.size(); ++input) {
    const std::string& path = inputs[input];
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
      fail("{}: cannot access ({})", path, ec.message());
    if (!fs::exists(status)) fail("{}: no such file or folder", path);
    if (!fs::is_directory(status)) {
      const uint64_t size = fs::is_regular_file(status) ? fs::file_size(path, ec) : 0;
      files.push_back({path, path, ec ? 0 : size, input});
      continue;
    }
    std::vector<SourceFile> found;
    fs::recursive_directory_iterator it(path, ec), end;
    if (ec) fail("{}: cannot list the folder ({})", path, ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) fail("{}: cannot list the folder ({})", path, ec.message());
      std::error_code file_ec;
      if (!it->is_regular_file(file_ec)) continue;
      const std::string relative = it->path().lexically_relative(path).generic_string();
      const std::string name = it->path().filename().string();
      bool keep = include_globs.empty();
      for (const std::string& glob : include_globs) keep = keep || glob_matches(glob, name, relative);
      if (!keep) continue;
      const uint64_t size = it->file_size(file_ec);
      found.push_back({it->path().string(), relative, file_ec ? 0 : size, input});
    }
    if (ec) fail("{}: cannot list the folder ({})", path, ec.message());
    std::sort(found.begin(), found.end(),
              [](const SourceFile& a, const SourceFile& b) { return a.id_path < b.id_path; });
    files.insert(files.end(), std::make_move_iterator(found.begin()),
                 std::make_move_iterator(found.end()));
  }
  return files;
}

InputFormat format_for_name(std::string_view path, InputFormat requested) {
  if (requested != InputFormat::auto_detect) return requested;
  Compression named;
  const std::string_view base = strip_compression_suffix(path, &named);
  return ends_with(base, ".jsonl") || ends_with(base, ".ndjson") ? InputFormat::jsonl
                                                                  : InputFormat::text;
}

// ---------------------------------------------------------------------------------------
// ByteStream

struct ByteStream::Decoder {
  z_stream z{};
  bool z_open = false;
  bool member_done = false;  // gzip: between members (a valid end of the stream)
  ZSTD_DStream* zstd = nullptr;
  size_t zstd_last = 0;  // last ZSTD_decompressStream result; 0 when a frame just ended
  ~Decoder() {
    if (z_open) inflateEnd(&z);
    if (zstd) ZSTD_freeDStream(zstd);
  }
};

namespace {
constexpr size_t kChunk = size_t{1} << 16;  // below malloc's mmap threshold, so reused
}  // namespace

ByteStream::ByteStream(std::string name)
    : name_(std::move(name)), input_(new char[kChunk]), input_size_(kChunk) {}

ByteStream::~ByteStream() {
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<ByteStream> ByteStream::open_file(const std::string& path) {
  std::unique_ptr<ByteStream> stream(new ByteStream(path));
  stream->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (stream->fd_ < 0) fail("{}: cannot open ({})", path, std::strerror(errno));
  struct stat st;
  if (::fstat(stream->fd_, &st) == 0 && S_ISREG(st.st_mode)) stream->size_hint_ = static_cast<uint64_t>(st.st_size);
  stream->start();
  return stream;
}

std::unique_ptr<ByteStream> ByteStream::from_memory(std::string bytes, std::string name) {
  std::unique_ptr<ByteStream> stream(new ByteStream(std::move(name)));
  stream->memory_ = std::move(bytes);
  stream->size_hint_ = stream->memory_.size();
  stream->start();
  return stream;
}

size_t ByteStream::fill_input() {
  if (input_pos_ > 0) {
    std::memmove(input_.get(), input_.get() + input_pos_, input_end_ - input_pos_);
    input_end_ -= input_pos_;
    input_pos_ = 0;
  }
  if (input_eof_ || input_end_ == input_size_) return 0;
  size_t n = 0;
  if (fd_ >= 0) {
    ssize_t got;
    do {
      got = ::read(fd_, input_.get() + input_end_, input_size_ - input_end_);
    } while (got < 0 && errno == EINTR);
    if (got < 0) fail("{}: cannot read ({})", name_, std::strerror(errno));
    n = static_cast<size_t>(got);
  } else {
    n = std::min(input_size_ - input_end_, memory_.size() - memory_pos_);
    std::memcpy(input_.get() + input_end_, memory_.data() + memory_pos_, n);
    memory_pos_ += n;
  }
  if (n == 0) input_eof_ = true;
  input_end_ += n;
  raw_bytes_ += n;
  return n;
}

void ByteStream::start() {
  while (input_end_ < 4 && fill_input() > 0) {
  }
  const auto* b = reinterpret_cast<const unsigned char*>(input_.get());
  const size_t have = input_end_;
  if (have >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
    compression_ = Compression::gzip;
  } else if (have >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) {
    compression_ = Compression::zstd;
  }
  Compression named;
  strip_compression_suffix(name_, &named);
  if (named != Compression::none && named != compression_)
    fail("{}: named like {} data but is not (its first bytes say otherwise)", name_,
         compression_name(named));
  decoder_ = std::make_unique<Decoder>();
  if (compression_ == Compression::gzip) {
    // 16 + MAX_WBITS: a gzip header and trailer, checked.
    if (inflateInit2(&decoder_->z, 16 + MAX_WBITS) != Z_OK) fail("{}: zlib: out of memory", name_);
    decoder_->z_open = true;
  } else if (compression_ == Compression::zstd) {
    decoder_->zstd = ZSTD_createDStream();
    if (!decoder_->zstd) fail("{}: zstd: out of memory", name_);
    ZSTD_initDStream(decoder_->zstd);
  }
}

size_t ByteStream::read(char* out, size_t size) {
  if (size == 0) return 0;
  if (compression_ == Compression::none) {
    if (input_pos_ == input_end_ && fill_input() == 0) return 0;
    const size_t n = std::min(size, input_end_ - input_pos_);
    std::memcpy(out, input_.get() + input_pos_, n);
    input_pos_ += n;
    return n;
  }
  Decoder& d = *decoder_;
  while (true) {
    if (input_pos_ == input_end_) fill_input();
    const size_t available = input_end_ - input_pos_;
    if (compression_ == Compression::gzip) {
      if (d.member_done) {
        // Another member may follow (gzip files may be concatenated).
        if (available == 0) return 0;
        if (available < 2 && !input_eof_) {
          fill_input();
          continue;
        }
        const auto* b = reinterpret_cast<const unsigned char*>(input_.get() + input_pos_);
        if (input_end_ - input_pos_ < 2 || b[0] != 0x1f || b[1] != 0x8b)
          fail("{}: unexpected bytes after the end of the gzip data", name_);
        inflateReset(&d.z);
        d.member_done = false;
      }
      if (available == 0) fail("{}: truncated gzip data", name_);
      d.z.next_in = reinterpret_cast<Bytef*>(input_.get() + input_pos_);
      d.z.avail_in = static_cast<uInt>(std::min<size_t>(available, UINT32_MAX));
      d.z.next_out = reinterpret_cast<Bytef*>(out);
      d.z.avail_out = static_cast<uInt>(std::min<size_t>(size, UINT32_MAX));
      const int rc = inflate(&d.z, Z_NO_FLUSH);
      input_pos_ += d.z.avail_in == 0 ? available : available - d.z.avail_in;
      const size_t produced = size - d.z.avail_out;
      if (rc == Z_STREAM_END) {
        d.member_done = true;
      } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
        fail("{}: corrupt gzip data ({})", name_, d.z.msg ? d.z.msg : "bad data");
      } else if (rc == Z_MEM_ERROR) {
        fail("{}: zlib: out of memory", name_);
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail("{}: zlib error {}", name_, rc);
      } else if (produced == 0 && input_eof_ && input_pos_ == input_end_) {
        fail("{}: truncated gzip data", name_);
      }
      if (produced > 0) return produced;
    } else {
      if (available == 0) {
        if (d.zstd_last != 0) fail("{}: truncated zstd data", name_);
        return 0;
      }
      ZSTD_inBuffer in{input_.get() + input_pos_, available, 0};
      ZSTD_outBuffer o{out, size, 0};
      const size_t rc = ZSTD_decompressStream(d.zstd, &o, &in);
      if (ZSTD_isError(rc)) fail("{}: corrupt zstd data ({})", name_, ZSTD_getErrorName(rc));
      d.zstd_last = rc;
      input_pos_ += in.pos;
      if (o.pos > 0) return o.pos;
    }
  }
}

// ---------------------------------------------------------------------------------------
// DocumentSplitter

DocumentSplitter::DocumentSplitter(std::unique_ptr<ByteStream> stream, InputFormat format,
                                   bool split_blank_lines)
    : stream_(std::move(stream)),
      format_(format_for_name(stream_->name(), format)),
      split_blank_lines_(split_blank_lines),
      buffer_(new char[kChunk]) {}

bool DocumentSplitter::next_line(std::string& line) {
  line.clear();
  bool any = false;
  while (true) {
    if (pos_ == end_) {
      pos_ = 0;
      end_ = stream_->read(buffer_.get(), kChunk);
      text_bytes_ += end_;
      if (end_ == 0) {
        if (any) ++line_;
        return any;
      }
    }
    any = true;
    const char* begin = buffer_.get() + pos_;
    const void* newline = std::memchr(begin, '\n', end_ - pos_);
    if (newline) {
      const size_t n = static_cast<const char*>(newline) - begin;
      line.append(begin, n);
      pos_ += n + 1;
      ++line_;
      return true;
    }
    line.append(begin, end_ - pos_);
    pos_ = end_;
  }
}

bool is_blank(std::string_view text) {
  return text.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos;
}

bool DocumentSplitter::next(RawDocument& doc) {
  if (done_) return false;
  doc.text.clear();
  doc.json = format_ == InputFormat::jsonl;
  if (format_ == InputFormat::jsonl) {
    while (next_line(doc.text)) {
      if (is_blank(doc.text)) continue;
      doc.index = index_++;
      doc.line = line_;
      return true;
    }
    done_ = true;
    return false;
  }
  if (!split_blank_lines_) {
    // The whole file is one document.
    if (stream_->compression() == Compression::none) doc.text.reserve(stream_->size_hint());
    size_t n;
    while ((n = stream_->read(buffer_.get(), kChunk)) > 0) {
      doc.text.append(buffer_.get(), n);
      text_bytes_ += n;
    }
    doc.index = index_++;
    doc.line = 1;
    done_ = true;
    return true;
  }
  std::string line;
  bool in_block = false;
  while (next_line(line)) {
    if (is_blank(line)) {
      if (in_block) break;
      continue;
    }
    if (in_block) {
      doc.text += '\n';
    } else {
      in_block = true;
      doc.line = line_;
    }
    doc.text += line;
  }
  if (!in_block) {
    done_ = true;
    return false;
  }
  doc.index = index_++;
  return true;
}

// ---------------------------------------------------------------------------------------
// JSON Lines records

namespace {

// "a number", "an array", "null", ...
std::string a_type(const nlohmann::json& value) {
  const std::string name = value.type_name();
  if (value.is_null()) return name;
  return (name[0] == 'a' || name[0] == 'o' ? "an " : "a ") + name;
}

std::string shorten(std::string text, size_t limit = 160) {
  if (text.size() > limit) {
    text.resize(limit);
    std::string repaired;
    append_repaired_utf8(text, repaired);  // do not end in half a character
    text = std::move(repaired) + "…";
  }
  return text;
}

}  // namespace

bool parse_json_record(std::string_view line, std::string_view field, JsonRecord& out,
                       std::string* error) {
  using nlohmann::json;
  out.has_id = false;
  out.id.clear();
  out.text.clear();
  out.replacements = 0;
  std::string repaired;
  if (find_invalid_utf8(line) != std::string_view::npos) {
    out.replacements = append_repaired_utf8(line, repaired);
    line = repaired;
  }
  json record;
  try {
    record = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at ...": keep what follows the tag.
    if (const size_t tag = what.find("] "); what.rfind("[json.exception.", 0) == 0 && tag != std::string::npos)
      what.erase(0, tag + 2);
    *error = "malformed JSON: " + shorten(std::move(what));
    return false;
  }
  if (!record.is_object()) {
    *error = fmt::format("expected a JSON object, got {}", a_type(record));
    return false;
  }
  const auto text = record.find(field);
  if (text == record.end()) {
    *error = fmt::format("no \"{}\" field", shorten(std::string(field), 60));
    return false;
  }
  if (!text->is_string()) {
    *error = fmt::format("field \"{}\" is {}, expected a string", shorten(std::string(field), 60),
                         a_type(*text));
    return false;
  }
  out.text = std::move(text->get_ref<std::string&>());
  const auto id = record.find("id");
  if (id != record.end() && !id->is_null()) {
    if (id->is_string()) {
      out.id = std::move(id->get_ref<std::string&>());
    } else if (id->is_number_unsigned()) {
      out.id = std::to_string(id->get<uint64_t>());
    } else if (id->is_number_integer()) {
      out.id = std::to_string(id->get<int64_t>());
    } else {
      *error = fmt::format("field \"id\" is {}, expected a string or an integer", a_type(*id));
      return false;
    }
    out.has_id = true;
  }
  return true;
}

}  // namespace sps
