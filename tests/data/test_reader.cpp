// Reading inputs: compression by magic, JSON Lines records, blank-line blocks, file lists.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/document_reader.h"
#include "data_fixtures.h"
#include "util/error.h"
#include "util/user_error.h"

namespace sps {
namespace {

using testing::error_of;

using testing::TempDir;

std::string read_all(std::unique_ptr<ByteStream> stream) {
  std::string out;
  char buffer[7];  // small reads cross every boundary
  size_t n;
  while ((n = stream->read(buffer, sizeof buffer)) > 0) out.append(buffer, n);
  return out;
}

std::vector<RawDocument> split_all(std::string bytes, std::string name, InputFormat format,
                                   bool blank_lines) {
  DocumentSplitter splitter(ByteStream::from_memory(std::move(bytes), std::move(name)), format,
                            blank_lines);
  std::vector<RawDocument> docs;
  RawDocument doc;
  while (splitter.next(doc)) docs.push_back(doc);
  return docs;
}

std::string big_text() {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "line " + std::to_string(i) + " of the text\n";
  return text;  // ~2 MB, larger than the reader's buffers
}

TEST(ByteStream, PlainGzipZstdByMagic) {
  const std::string text = big_text();
  auto plain = ByteStream::from_memory(text, "a.txt");
  EXPECT_EQ(plain->compression(), Compression::none);
  EXPECT_EQ(read_all(std::move(plain)), text);
  auto gz = ByteStream::from_memory(testing::gzip_bytes(text), "a.txt.gz");
  EXPECT_EQ(gz->compression(), Compression::gzip);
  EXPECT_EQ(read_all(std::move(gz)), text);
  auto zst = ByteStream::from_memory(testing::zstd_bytes(text), "a.zst");
  EXPECT_EQ(zst->compression(), Compression::zstd);
  EXPECT_EQ(read_all(std::move(zst)), text);
  // The name does not matter when the bytes say gzip or zstd.
  EXPECT_EQ(read_all(ByteStream::from_memory(testing::gzip_bytes("x"), "noname")), "x");
  EXPECT_EQ(read_all(ByteStream::from_memory(testing::zstd_bytes("y"), "noname")), "y");
  EXPECT_EQ(read_all(ByteStream::from_memory("", "empty.txt")), "");
}

TEST(ByteStream, ConcatenatedMembersAndFrames) {
  EXPECT_EQ(read_all(ByteStream::from_memory(testing::gzip_bytes("one ") + testing::gzip_bytes("two"), "x.gz")),
            "one two");
  EXPECT_EQ(read_all(ByteStream::from_memory(testing::zstd_bytes("one ") + testing::zstd_bytes("two"), "x.zst")),
            "one two");
}

TEST(ByteStream, CorruptAndTruncatedDataAreUserErrors) {
  const std::string text = big_text();
  std::string gz = testing::gzip_bytes(text);
  EXPECT_EQ(error_of([&] { read_all(ByteStream::from_memory(gz.substr(0, gz.size() / 2), "t.gz")); }),
            "t.gz: truncated gzip data");
  EXPECT_EQ(error_of([&] { read_all(ByteStream::from_memory(gz.substr(0, gz.size() - 3), "t.gz")); }),
            "t.gz: truncated gzip data");
  std::string bad = gz;
  for (size_t i = 100; i < 200; ++i) bad[i] = static_cast<char>(bad[i] ^ 0x5a);
  EXPECT_NE(error_of([&] { read_all(ByteStream::from_memory(bad, "c.gz")); }).find("c.gz: corrupt gzip data"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { read_all(ByteStream::from_memory(gz + "junk", "j.gz")); }),
            "j.gz: unexpected bytes after the end of the gzip data");
  const std::string zst = testing::zstd_bytes(text);
  EXPECT_EQ(error_of([&] { read_all(ByteStream::from_memory(zst.substr(0, zst.size() / 2), "t.zst")); }),
            "t.zst: truncated zstd data");
  EXPECT_NE(error_of([&] { read_all(ByteStream::from_memory(zst + "junk", "j.zst")); }).find("j.zst: corrupt zstd data"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { ByteStream::from_memory("plain text", "p.txt.gz"); }),
            "p.txt.gz: named like gzip data but is not (its first bytes say otherwise)");
  EXPECT_EQ(error_of([&] { ByteStream::from_memory("", "e.zst"); }),
            "e.zst: named like zstd data but is not (its first bytes say otherwise)");
}

TEST(ByteStream, MissingFileIsNamed) {
  TempDir dir;
  EXPECT_EQ(error_of([&] { ByteStream::open_file(dir / "nope.txt"); }),
            (dir / "nope.txt") + ": cannot open (No such file or directory)");
}

TEST(DocumentSplitter, FormatFromName) {
  EXPECT_EQ(format_for_name("a/b.jsonl", InputFormat::auto_detect), InputFormat::jsonl);
  EXPECT_EQ(format_for_name("b.jsonl.gz", InputFormat::auto_detect), InputFormat::jsonl);
  EXPECT_EQ(format_for_name("b.ndjson.zst", InputFormat::auto_detect), InputFormat::jsonl);
  EXPECT_EQ(format_for_name("b.json", InputFormat::auto_detect), InputFormat::text);
  EXPECT_EQ(format_for_name("b.rst.gz", InputFormat::auto_detect), InputFormat::text);
  EXPECT_EQ(format_for_name("b.txt", InputFormat::jsonl), InputFormat::jsonl);
  EXPECT_EQ(format_for_name("b.jsonl", InputFormat::text), InputFormat::text);
}

TEST(DocumentSplitter, TextFileIsOneDocument) {
  const std::string text = "first line\n\nsecond paragraph\n";
  auto docs = split_all(text, "a.txt", InputFormat::auto_detect, false);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, text);
  EXPECT_FALSE(docs[0].json);
  EXPECT_EQ(docs[0].index, 0u);
  docs = split_all("", "empty.txt", InputFormat::auto_detect, false);
  ASSERT_EQ(docs.size(), 1u);  // an empty document, which prepare skips and counts
  EXPECT_EQ(docs[0].text, "");
  const std::string big = big_text();
  docs = split_all(testing::gzip_bytes(big), "big.txt.gz", InputFormat::auto_detect, false);
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, big);
}

TEST(DocumentSplitter, BlankLineBlocks) {
  const std::string text = "\n\n a\nb \n\n \t\r\nc\r\n\n\n\nd";
  const auto docs = split_all(text, "a.txt", InputFormat::auto_detect, true);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text, " a\nb ");
  EXPECT_EQ(docs[0].line, 3u);
  EXPECT_EQ(docs[1].text, "c\r");
  EXPECT_EQ(docs[1].line, 7u);
  EXPECT_EQ(docs[2].text, "d");
  EXPECT_EQ(docs[2].index, 2u);
  EXPECT_EQ(docs[2].line, 11u);
  EXPECT_TRUE(split_all("\n \n", "a.txt", InputFormat::auto_detect, true).empty());
}

TEST(DocumentSplitter, JsonLinesRecordsAndLineNumbers) {
  const std::string text = "{\"text\":\"a\"}\n\n   \n{\"text\":\"b\"}\r\n{\"text\":\"c\"}";
  for (const std::string& bytes : {text, testing::gzip_bytes(text), testing::zstd_bytes(text)}) {
    const auto docs = split_all(bytes, "r.jsonl", InputFormat::auto_detect, false);
    ASSERT_EQ(docs.size(), 3u);
    EXPECT_TRUE(docs[0].json);
    EXPECT_EQ(docs[0].line, 1u);
    EXPECT_EQ(docs[1].line, 4u);
    EXPECT_EQ(docs[1].index, 1u);
    EXPECT_EQ(docs[2].text, "{\"text\":\"c\"}");
    EXPECT_EQ(docs[2].line, 5u);
  }
  // A record longer than the reader's buffer.
  const std::string long_text(3 << 20, 'x');
  const auto docs = split_all("{\"text\":\"" + long_text + "\"}\n", "r.jsonl", InputFormat::auto_detect, false);
  ASSERT_EQ(docs.size(), 1u);
  JsonRecord record;
  std::string error;
  ASSERT_TRUE(parse_json_record(docs[0].text, "text", record, &error)) << error;
  EXPECT_EQ(record.text, long_text);
}

TEST(JsonRecord, FieldsIdsAndErrors) {
  JsonRecord r;
  std::string error;
  ASSERT_TRUE(parse_json_record(R"({"id":"<urn:1>","text":"héllo\n","other":[1,2]})", "text", r, &error));
  EXPECT_EQ(r.text, "héllo\n");
  EXPECT_TRUE(r.has_id);
  EXPECT_EQ(r.id, "<urn:1>");
  ASSERT_TRUE(parse_json_record(R"({"id":42,"body":"x"})", "body", r, &error));
  EXPECT_EQ(r.id, "42");
  ASSERT_TRUE(parse_json_record(R"({"id":-7,"text":"x"})", "text", r, &error));
  EXPECT_EQ(r.id, "-7");
  ASSERT_TRUE(parse_json_record(R"({"id":null,"text":"x"})", "text", r, &error));
  EXPECT_FALSE(r.has_id);
  ASSERT_TRUE(parse_json_record(R"({"text":""})", "text", r, &error));
  EXPECT_FALSE(r.has_id);
  EXPECT_EQ(r.text, "");

  EXPECT_FALSE(parse_json_record(R"({"text": "unterminated)", "text", r, &error));
  EXPECT_EQ(error.rfind("malformed JSON: parse error at line 1, column", 0), 0u) << error;
  EXPECT_FALSE(parse_json_record("[1,2]", "text", r, &error));
  EXPECT_EQ(error, "expected a JSON object, got an array");
  EXPECT_FALSE(parse_json_record(R"({"content":"x"})", "text", r, &error));
  EXPECT_EQ(error, "no \"text\" field");
  EXPECT_FALSE(parse_json_record(R"({"text":null})", "text", r, &error));
  EXPECT_EQ(error, "field \"text\" is null, expected a string");
  EXPECT_FALSE(parse_json_record(R"({"text":3})", "text", r, &error));
  EXPECT_EQ(error, "field \"text\" is a number, expected a string");
  EXPECT_FALSE(parse_json_record(R"({"text":"x","id":{"a":1}})", "text", r, &error));
  EXPECT_EQ(error, "field \"id\" is an object, expected a string or an integer");
  EXPECT_FALSE(parse_json_record(R"({"text":"x"} trailing)", "text", r, &error));
  EXPECT_EQ(error.rfind("malformed JSON", 0), 0u);
}

TEST(JsonRecord, InvalidUtf8IsReplacedAndCounted) {
  JsonRecord r;
  std::string error;
  ASSERT_TRUE(parse_json_record("{\"text\":\"a\xff" "b\xe2\x82\"}", "text", r, &error)) << error;
  EXPECT_EQ(r.text, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_EQ(r.replacements, 2u);
}

TEST(SourceFiles, FoldersRecursiveSortedWithGlobs) {
  TempDir dir;
  std::filesystem::create_directories(dir / "docs/b/c");
  testing::write_whole_file(dir / "docs/z.rst", "z");
  testing::write_whole_file(dir / "docs/a.txt", "a");
  testing::write_whole_file(dir / "docs/b/c/deep.rst", "d");
  testing::write_whole_file(dir / "docs/b/skip.md", "s");
  testing::write_whole_file(dir / "single.jsonl", "{}");
  auto files = list_source_files({dir / "docs", dir / "single.jsonl"}, {});
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files[0].id_path, "a.txt");
  EXPECT_EQ(files[1].id_path, "b/c/deep.rst");
  EXPECT_EQ(files[2].id_path, "b/skip.md");
  EXPECT_EQ(files[3].id_path, "z.rst");
  EXPECT_EQ(files[3].path, dir / "docs/z.rst");
  EXPECT_EQ(files[4].id_path, dir / "single.jsonl");
  EXPECT_EQ(files[4].input, 1u);
  EXPECT_EQ(files[4].size, 2u);
  files = list_source_files({dir / "docs"}, {"*.rst"});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].id_path, "b/c/deep.rst");
  files = list_source_files({dir / "docs"}, {"b/*", "*.txt"});
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[2].id_path, "b/skip.md");
  // Files given directly are always taken.
  EXPECT_EQ(list_source_files({dir / "docs/b/skip.md"}, {"*.rst"}).size(), 1u);
  EXPECT_EQ(error_of([&] { list_source_files({dir / "docs", dir / "missing.txt"}, {}); }),
            (dir / "missing.txt") + ": no such file or folder");
}

}  // namespace
}  // namespace sps
