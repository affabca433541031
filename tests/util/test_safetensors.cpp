#include "util/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "util/error.h"
#include "util/temp_dir.h"
#include "golden_set.h"

namespace sps {
namespace {

using sps::testing::kGoldenDir;
using sps::testing::read_whole_file;
using sps::testing::TempDir;
using sps::testing::write_whole_file;

// A file image: 8-byte little-endian length, the header text, then `data`.
std::string image(const std::string& header, const std::string& data = "",
                  uint64_t length_override = 0) {
  uint64_t n = length_override ? length_override : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

// Parses from an exactly sized heap buffer, so AddressSanitizer sees any overread.
SafetensorsHeader parse(const std::string& bytes) {
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[bytes.size() + 1]);
  std::memcpy(buffer.get(), bytes.data(), bytes.size());
  return parse_safetensors_header(bytes.empty() ? nullptr : buffer.get(), bytes.size(),
                                  "bad.safetensors");
}

// The UserError message of parsing `bytes`; a failure when it parses.
std::string error_of(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed without error";
  return "";
}

#define EXPECT_REJECTED(bytes, fragment)                                     \
  do {                                                                       \
    std::string message = error_of(bytes);                                   \
    EXPECT_EQ(message.rfind("bad.safetensors: ", 0), 0u) << message;         \
    EXPECT_NE(message.find(fragment), std::string::npos) << message;         \
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;            \
  } while (0)

const std::string kTensorA = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

TEST(Safetensors, DTypeSizesAndNames) {
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::F64), 8u);
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  EXPECT_EQ(dtype_size(DType::I64), 8u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_EQ(dtype_size(DType::U16), 2u);
  EXPECT_EQ(dtype_size(DType::U8), 1u);
  EXPECT_STREQ(dtype_name(DType::BF16), "BF16");
  EXPECT_STREQ(dtype_name(DType::U8), "U8");
}

TEST(Safetensors, RoundTripAllDTypes) {
  TempDir dir;
  const std::string path = dir.file("t.safetensors");
  const std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 1e-30f, -0.0f, 7.0f};
  const std::vector<double> f64 = {3.141592653589793, -1e300};
  const std::vector<uint16_t> bf16 = {0x3F80, 0x4049, 0xC000};        // 1, 3.140625, -2
  const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x0001, 0x7BFF,  // 1, -2, 2^-24, 65504
                                     0x3555, 0x7C00};                  // ~1/3, inf
  const std::vector<int64_t> i64 = {-(int64_t{1} << 40), 7};
  const int32_t i32 = -123456;  // a scalar: shape []
  const std::vector<uint16_t> u16 = {0, 65535, 50256};
  const std::vector<uint8_t> u8 = {0, 1, 255};
  const std::vector<TensorToWrite> tensors = {
      {"weights.f32", DType::F32, {2, 3}, f32.data()},
      {"f64", DType::F64, {2}, f64.data()},
      {"bf16", DType::BF16, {3}, bf16.data()},
      {"f16", DType::F16, {1, 6}, f16.data()},
      {"i64", DType::I64, {2, 1}, i64.data()},
      {"scalar", DType::I32, {}, &i32},
      {"empty", DType::F32, {0, 4}, nullptr},
      {"u16", DType::U16, {3}, u16.data()},
      {"u8", DType::U8, {3}, u8.data()},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"},
                                                       {"quote\"d", "line\nbreak"}};
  write_safetensors(path, tensors, metadata);
  EXPECT_EQ(dir.entries(), 1u);  // no temporary file left

  SafetensorsFile file(path);
  const SafetensorsHeader& h = file.header();
  EXPECT_EQ(h.metadata, metadata);
  EXPECT_EQ(h.data_offset % 8, 0u);
  ASSERT_EQ(h.tensors.size(), tensors.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = h.tensors[i];
    EXPECT_EQ(t.name, tensors[i].name);  // file order = given order
    EXPECT_EQ(t.dtype, tensors[i].dtype);
    EXPECT_EQ(t.shape, tensors[i].shape);
    EXPECT_EQ(t.begin, offset);  // contiguous
    offset = t.end;
    EXPECT_EQ(file.find(t.name), &t);
  }
  EXPECT_EQ(std::filesystem::file_size(path), h.data_offset + offset);
  EXPECT_EQ(file.find("missing"), nullptr);

  EXPECT_EQ(std::memcmp(file.data(*file.find("weights.f32")), f32.data(), 24), 0);
  auto as_double = [](const auto& v) { return std::vector<double>(v.begin(), v.end()); };
  EXPECT_EQ(file.read_as_double("weights.f32"), as_double(f32));
  EXPECT_EQ(file.read_as_double("f64"), f64);
  EXPECT_EQ(file.read_as_double("bf16"), (std::vector<double>{1.0, 3.140625, -2.0}));
  std::vector<double> half = file.read_as_double("f16");
  ASSERT_EQ(half.size(), 6u);
  EXPECT_EQ(half[0], 1.0);
  EXPECT_EQ(half[1], -2.0);
  EXPECT_EQ(half[2], std::ldexp(1.0, -24));
  EXPECT_EQ(half[3], 65504.0);
  EXPECT_NEAR(half[4], 1.0 / 3.0, 1e-3);
  EXPECT_TRUE(std::isinf(half[5]) && half[5] > 0);
  EXPECT_EQ(file.read_as_double("i64"), as_double(i64));
  EXPECT_EQ(file.read_as_double("scalar"), (std::vector<double>{-123456.0}));
  EXPECT_EQ(file.find("scalar")->numel(), 1);
  EXPECT_TRUE(file.read_as_double("empty").empty());
  EXPECT_EQ(file.read_as_double("u16"), as_double(u16));
  EXPECT_EQ(file.read_as_double("u8"), as_double(u8));
  EXPECT_THROW(file.read_as_double("missing"), UserError);
}

TEST(Safetensors, HeaderIsPaddedWithSpacesAndHoldsTheChecksums) {
  TempDir dir;
  const std::string path = dir.file("p.safetensors");
  const float x = 2.0f;
  write_safetensors(path, {{"x", DType::F32, {1}, &x}});
  const std::string bytes = read_whole_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  ASSERT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + n + 4);
  const std::string header = bytes.substr(8, n);
  // XXH3-128 of the 4 bytes of 2.0f, as `xxh128sum` prints it for a file holding them.
  const std::string sum = xxh3_128_hex(&x, sizeof x);
  EXPECT_EQ(sum.size(), 32u);
  EXPECT_EQ(header.substr(0, header.find_last_not_of(' ') + 1),
            R"({"__metadata__":{"xxh3_128":"{\"x\":\")" + sum +
                R"(\"}"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})");
  SafetensorsFile file(path);
  EXPECT_TRUE(file.has_checksums());
  EXPECT_TRUE(file.header().metadata.empty());  // the checksums are not user metadata
  EXPECT_EQ(file.find("x")->checksum, sum);
  EXPECT_EQ(file.read_as_double("x"), (std::vector<double>{2.0}));
}

// The one known value pins the format: XXH3-128 of no bytes, canonical (big-endian) hex.
TEST(Safetensors, ChecksumIsXxh3Of128Bits) {
  EXPECT_EQ(xxh3_128_hex(nullptr, 0), "99aa06d3014798d86001c324468d497f");
  EXPECT_NE(xxh3_128_hex("a", 1), xxh3_128_hex("b", 1));
}

// One flipped bit anywhere in a tensor's bytes is caught when it is read, naming the file and
// the tensor; the other tensors still read.
TEST(Safetensors, ADamagedTensorFailsItsChecksum) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6};
  write_safetensors(path, {{"a", DType::F32, {4}, a.data()}, {"b", DType::F32, {2}, b.data()}});
  const std::string good = read_whole_file(path);
  const SafetensorsHeader h = parse(good);
  for (const uint64_t at :
       {h.data_offset + 7, h.data_offset + 15}) {  // an exponent bit of a[1], a[3]
    std::string bad = good;
    bad[at] = char(bad[at] ^ 0x40);
    write_whole_file(path, bad);
    SafetensorsFile file(path);
    std::vector<double> out(4);
    try {
      file.read_into("a", out.data());
      ADD_FAILURE() << "a damaged tensor was read";
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()),
                path + ": tensor 'a' does not match its checksum: the file is damaged");
    }
    EXPECT_EQ(file.read_as_double("b"), (std::vector<double>{5, 6}));
  }
}

// Files written before the checksums (or by other tools) read unverified, and say so.
TEST(Safetensors, FilesWithoutChecksumsReadUnverified) {
  const std::string header = "{" + kTensorA + "}";
  const std::string data = std::string("\0\0\x80\x3f\0\0\0\x40", 8);  // 1.0f, 2.0f
  TempDir dir;
  const std::string path = dir.file("old.safetensors");
  write_whole_file(path, image(header, data));
  SafetensorsFile file(path);
  EXPECT_FALSE(file.has_checksums());
  EXPECT_EQ(file.read_as_double("a"), (std::vector<double>{1, 2}));
  EXPECT_EQ(unverified_note("old.safetensors"),
            "note: old.safetensors has no tensor checksums (written before sps recorded them), "
            "so its data are not verified");
}

TEST(Safetensors, RejectsMalformedChecksums) {
  const std::string sum(32, 'a');
  auto with = [&](const std::string& checksums) {
    return image(R"({"__metadata__":{"xxh3_128":")" + checksums + R"("},)" + kTensorA + "}",
                 std::string(8, '\0'));
  };
  EXPECT_NO_THROW(parse(with(R"({\"a\":\")" + sum + R"(\"})")));
  EXPECT_REJECTED(with("not json"), "'xxh3_128' is not a JSON object of checksums");
  EXPECT_REJECTED(with(R"([1])"), "not a JSON object of checksums");
  EXPECT_REJECTED(with(R"({})"), "holds 0 checksums for 1 tensors");
  EXPECT_REJECTED(with(R"({\"b\":\")" + sum + R"(\"})"),
                  "no checksum (32 hex digits) for tensor 'a'");
  EXPECT_REJECTED(with(R"({\"a\":\"abc\"})"), "no checksum (32 hex digits) for tensor 'a'");
  EXPECT_REJECTED(with(R"({\"a\":\")" + std::string(32, 'A') + R"(\"})"), "for tensor 'a'");
  EXPECT_REJECTED(with(R"({\"a\":1})"), "for tensor 'a'");
  // Far longer than checksums for the tensors could be: refused before it is parsed.
  EXPECT_REJECTED(with(std::string(10000, ' ')), "not a JSON object of checksums");
}

// A header length that does not end where the JSON does is named as such, not shown as the
// bytes the JSON parser met.
TEST(Safetensors, WrongHeaderLengthIsNamed) {
  const std::string header = "{" + kTensorA + "}";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  const std::string data("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  ASSERT_NO_THROW(parse(image(padded, data)));
  // One byte long: the first data byte is read as header.
  EXPECT_REJECTED(image(padded, data, padded.size() + 1),
                  "the JSON header ends at byte " + std::to_string(header.size()) +
                      " but the header length is " + std::to_string(padded.size() + 1) +
                      ", and header byte " + std::to_string(padded.size()) +
                      " is 0x01, not space padding (a damaged header length?)");
  // Cut inside the JSON.
  EXPECT_REJECTED(
      image(padded, data, header.size() - 3),
      "the header length " + std::to_string(header.size() - 3) + " ends inside the JSON header");
  for (uint64_t n = 1; n < header.size(); ++n) {
    const std::string message = error_of(image(padded, data, n));
    EXPECT_NE(message.find("header length"), std::string::npos) << n << ": " << message;
  }
}

// nlohmann's parser ends the JSON at a NUL: without a check, anything after it would pass.
TEST(Safetensors, RejectsANulInThePadding) {
  EXPECT_REJECTED(image(std::string("{}\0     ", 8)), "header byte 2 is 0x00, not space padding");
  EXPECT_REJECTED(image(std::string("{}   \0garbage", 14)), "header byte 5 is 0x00");
  EXPECT_NO_THROW(parse(image("{}  \t\r\n  ")));  // JSON's own whitespace is padding
}

TEST(Safetensors, WriteRejectsBadInput) {
  TempDir dir;
  const float x = 1.0f;
  EXPECT_THROW(write_safetensors(dir.file("a"), {{"x", DType::F32, {1}, &x}, {"x", DType::F32, {1}, &x}}),
               UserError);
  EXPECT_THROW(write_safetensors(dir.file("b"), {{"x", DType::F32, {-1}, &x}}), UserError);
  EXPECT_THROW(write_safetensors(dir.file("c"), {{"__metadata__", DType::F32, {1}, &x}}),
               UserError);
  EXPECT_THROW(write_safetensors(dir.file("e"), {{"x", DType::F32, {1}, &x}}, {{"xxh3_128", "{}"}}),
               UserError);
  EXPECT_THROW(write_safetensors(dir.file("no/folder/d"), {{"x", DType::F32, {1}, &x}}),
               UserError);
  EXPECT_EQ(dir.entries(), 0u);
}

TEST(Safetensors, EmptyHeaderObjectIsValid) {
  SafetensorsHeader h = parse(image("{}  "));
  EXPECT_TRUE(h.tensors.empty());
  EXPECT_EQ(h.data_offset, 12u);
}

TEST(Safetensors, ParsesHandWrittenHeader) {
  SafetensorsHeader h = parse(image(
      R"({"__metadata__":{"k":"v"},"b":{"shape":[1],"dtype":"U8","data_offsets":[8,9]},)" +
          kTensorA + "}",
      std::string(9, '\0')));
  ASSERT_EQ(h.tensors.size(), 2u);
  EXPECT_EQ(h.tensors[0].name, "b");  // file order, not sorted
  EXPECT_EQ(h.tensors[1].name, "a");
  EXPECT_EQ(h.tensors[1].end, 8u);
  EXPECT_EQ(h.metadata.at("k"), "v");
}

TEST(Safetensors, RejectsShortFiles) {
  for (size_t n = 0; n < 8; ++n) EXPECT_REJECTED(std::string(n, '\0'), "shorter than");
}

TEST(Safetensors, RejectsHeaderLengthBeyondFile) {
  EXPECT_REJECTED(image("{}", "", 3), "exceeds");
  EXPECT_REJECTED(image("{}", "", uint64_t{1} << 63), "100 MB");
  EXPECT_REJECTED(image("{}", "", 200'000'000), "100 MB");
  EXPECT_REJECTED(image("{}", "", ~uint64_t{0}), "100 MB");
}

TEST(Safetensors, RejectsBadJson) {
  EXPECT_REJECTED(image(""), "the header length 0 ends inside the JSON header");
  EXPECT_REJECTED(image("not json"), "invalid JSON");
  EXPECT_REJECTED(image("{\"a\":"), "the header length 5 ends inside the JSON header");
  EXPECT_REJECTED(image("{} trailing"), "header byte 3 is 0x74, not space padding");
  EXPECT_REJECTED(image("{\"\xff\":{}}"), "invalid JSON");  // not UTF-8
  EXPECT_REJECTED(image(std::string("{\0}", 3)), "invalid JSON");
}

TEST(Safetensors, RejectsNonObjectEntries) {
  EXPECT_REJECTED(image("[1, 2]"), "not a JSON object");
  EXPECT_REJECTED(image("7"), "not a JSON object");
  EXPECT_REJECTED(image(R"({"a": 3})"), "entry 'a' is");
  EXPECT_REJECTED(image(R"({"a": [1]})"), "entry 'a' is");
  EXPECT_REJECTED(image(R"({"__metadata__": []})"), "__metadata__ is");
  EXPECT_REJECTED(image(R"({"__metadata__": {"k": 1}})"), "not a string");
  EXPECT_REJECTED(image(R"({"__metadata__": {"k": {"x": "y"}}})"), "not a string");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})",
                        std::string(8, '\0')),
                  "unknown field");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2]}})", std::string(8, '\0')),
                  "missing field 'data_offsets'");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                        std::string(8, '\0')),
                  "twice");
  EXPECT_REJECTED(image(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})"), "dtype is");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":{},"data_offsets":[0,8]}})"), "shape is");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}})"),
                  "an array");
}

TEST(Safetensors, RejectsUnknownDType) {
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})",
                        std::string(2, '\0')),
                  "unsupported dtype 'F8_E4M3'");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"f32","shape":[2],"data_offsets":[0,8]}})",
                        std::string(8, '\0')),
                  "unsupported dtype");
}

TEST(Safetensors, RejectsBadShapes) {
  const std::string data(64, '\0');
  EXPECT_REJECTED(image(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", data),
                  "negative");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", data),
                  "shape holds");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", data),
                  "shape holds");
  EXPECT_REJECTED(
      image(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", data),
      "too large");
  EXPECT_REJECTED(
      image(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}})", data),
      "too large");  // numel fits, bytes do not
  EXPECT_REJECTED(
      image(R"({"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})", data),
      "too large");
  // A zero dimension makes the tensor empty whatever the others say.
  SafetensorsHeader h =
      parse(image(R"({"a":{"dtype":"U8","shape":[4294967296,0,4294967296],"data_offsets":[0,0]}})"));
  EXPECT_EQ(h.tensors.at(0).numel(), 0);
}

TEST(Safetensors, RejectsBadOffsets) {
  const std::string data(16, '\0');
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", data),
                  "exactly two");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})", data),
                  "exactly two");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", data),
                  "decreasing");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", data),
                  "negative");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", data),
                  "data_offsets hold");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,1e400]}})", data),
                  "1e400");
}

TEST(Safetensors, RejectsSizeMismatch) {
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",
                        std::string(8, '\0')),
                  "needs 8");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"I64","shape":[],"data_offsets":[0,4]}})",
                        std::string(8, '\0')),
                  "needs 8");
}

TEST(Safetensors, RejectsOffsetsOutsideData) {
  EXPECT_REJECTED(image("{" + kTensorA + "}", std::string(7, '\0')), "outside the data section");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[18446744073709551610,18446744073709551618]}})"),
                  "data_offsets hold");  // beyond uint64: a float to the JSON parser
  EXPECT_REJECTED(image(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[18446744073709551613,18446744073709551615]}})"),
                  "outside the data section");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        std::string(12, '\0')),
                  "overlap");
  EXPECT_REJECTED(image(R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
                        R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                        std::string(16, '\0')),
                  "overlap");
  // An empty tensor inside another one overlaps it; touching tensors are fine.
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
                        std::string(8, '\0')),
                  "overlap");
  EXPECT_NO_THROW(parse(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                              std::string(16, '\0'))));
}

// The tensors must tile the data section exactly: the data starts right after the header,
// no gaps, no trailing bytes.
TEST(Safetensors, RejectsGapsAndTrailingBytes) {
  const std::string header = "{" + kTensorA + "}";
  const std::string padded = header + std::string((8 - header.size() % 8) % 8 + 8, ' ');
  EXPECT_NO_THROW(parse(image(padded, std::string(8, '\0'))));
  // A header length one byte short reads the last header byte as data: 9 bytes, one trailing.
  EXPECT_REJECTED(image(padded, std::string(8, '\0'), padded.size() - 1), "1 trailing bytes");
  EXPECT_REJECTED(image(header, std::string(9, '\0')), "the tensors cover 8 of the 9 bytes");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                        std::string(12, '\0')),
                  "4 unused bytes of the data section before tensor 'a'");
  EXPECT_REJECTED(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                        std::string(12, '\0')),
                  "4 unused bytes of the data section before tensor 'b'");
  EXPECT_REJECTED(image("{}", std::string(1, '\0')), "1 trailing bytes");
}

TEST(Safetensors, RejectsDuplicateNames) {
  EXPECT_REJECTED(image("{" + kTensorA + "," + kTensorA + "}", std::string(8, '\0')),
                  "duplicate tensor name 'a'");
  EXPECT_REJECTED(image(R"({"__metadata__":{"k":"1","k":"2"}})"), "duplicate __metadata__ key");
  EXPECT_REJECTED(image(R"({"__metadata__":{},"__metadata__":{}})"), "duplicate");
}

TEST(Safetensors, MessagesStayOnOneLine) {
  std::string message = error_of(image("{\"a\\nb\\u0000\":{\"dtype\":\"X\"}}"));
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("a\\x0ab\\x00"), std::string::npos) << message;
  message = error_of(image("{\"" + std::string(10000, 'n') + "\":1}"));
  EXPECT_LT(message.size(), 400u) << message;
}

// Every truncation and every single-bit flip of a valid file either parses or is rejected
// with UserError; nothing crashes or reads outside the buffer.
TEST(Safetensors, DamagedFilesNeverCrash) {
  TempDir dir;
  const std::string path = dir.file("ok.safetensors");
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const int64_t step = 3;
  write_safetensors(path, {{"w", DType::F32, {2, 3}, w.data()}, {"s", DType::I64, {}, &step}},
                    {{"k", "v"}});
  const std::string good = read_whole_file(path);
  ASSERT_NO_THROW(parse(good));
  size_t parsed = 0, rejected = 0;
  auto attempt = [&](const std::string& bytes) {
    try {
      SafetensorsHeader h = parse(bytes);
      for (const TensorInfo& t : h.tensors) ASSERT_LE(h.data_offset + t.end, bytes.size());
      ++parsed;
    } catch (const UserError&) {
      ++rejected;
    }
  };
  for (size_t n = 0; n < good.size(); ++n) attempt(good.substr(0, n));
  for (size_t i = 0; i < good.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ (1 << bit));
      attempt(bad);
    }
  EXPECT_GT(rejected, good.size());  // every truncation at least
  EXPECT_GT(parsed, 0u);             // flips in the data section are harmless
}

TEST(Safetensors, FileErrorsNameThePath) {
  TempDir dir;
  const std::string missing = dir.file("missing.safetensors");
  try {
    SafetensorsFile file(missing);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const std::string truncated = dir.file("truncated.safetensors");
  const float w[4] = {1, 2, 3, 4};
  write_safetensors(truncated, {{"w", DType::F32, {4}, w}});
  std::string bytes = read_whole_file(truncated);
  write_whole_file(truncated, bytes.substr(0, bytes.size() - 1));
  try {
    SafetensorsFile file(truncated);
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(truncated), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside the data section"), std::string::npos);
  }
  write_whole_file(truncated, "");
  EXPECT_THROW(SafetensorsFile{truncated}, UserError);
  EXPECT_THROW(SafetensorsFile{dir.path().string()}, UserError);  // a folder
}

TEST(Safetensors, GoldenFilesParse) {
  SPS_REQUIRE_GOLDEN();
  const std::filesystem::path golden = kGoldenDir;
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(golden)) {
    if (entry.path().extension() != ".safetensors") continue;
    SafetensorsFile file(entry.path().string());
    ASSERT_FALSE(file.header().tensors.empty()) << entry.path();
    for (const TensorInfo& t : file.header().tensors)
      EXPECT_EQ(file.read_as_double(t.name).size(), static_cast<size_t>(t.numel()));
    ++files;
  }
  EXPECT_GT(files, 0u);
  const std::string weights = (golden / "sps_w2.weights.safetensors").string();
  if (std::filesystem::exists(weights)) {
    SafetensorsFile file(weights);
    const TensorInfo* wte = file.find("transformer.wte.weight");
    ASSERT_NE(wte, nullptr);
    EXPECT_EQ(wte->dtype, DType::F32);
    EXPECT_EQ(wte->shape, (std::vector<int64_t>{64, 16}));
    for (double v : file.read_as_double("transformer.wte.weight")) EXPECT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace sps
