// GPT-2's tokenizer files: encoder.json (token strings -> ids) and vocab.bpe (the merges in
// priority order), both in GPT-2's byte alphabet.
#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_impl.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer/loader_text.h"
#include "tokenizer/utf8.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps {

namespace {

// encoder.json's entries in file order, read through nlohmann's SAX interface: building the
// document (a std::map of 50,257 keys) was most of GPT-2's loading time.
class EncoderEntries : public nlohmann::json_sax<nlohmann::json> {
 public:
  struct Entry {
    std::string token;
    int64_t id;
  };
  std::vector<Entry> entries;
  std::string error;  // why the file is not an object of string -> integer

  bool start_object(std::size_t) override {
    if (depth_ != 0) return value(-1);  // an object as a token's value
    depth_ = 1;
    return true;
  }
  bool end_object() override { return true; }
  bool key(string_t& k) override {
    entries.push_back({std::move(k), -1});
    return true;
  }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return value(v > (1u << 24) ? int64_t{1} << 24 : static_cast<int64_t>(v));
  }
  bool null() override { return value(-1); }
  bool boolean(bool) override { return value(-1); }
  bool number_float(number_float_t, const string_t&) override { return value(-1); }
  bool string(string_t&) override { return value(-1); }
  bool binary(binary_t&) override { return value(-1); }
  bool start_array(std::size_t) override { return value(-1); }
  bool end_array() override { return false; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = fmt::format("malformed JSON ({})", e.what());
    return false;
  }

 private:
  bool expect(bool ok, const char* what) {
    if (!ok) error = fmt::format("expected {} mapping token strings to ids", what);
    return ok;
  }
  // The id of the last key; -1 marks a value that is not an integer.
  bool value(int64_t id) {
    if (depth_ != 1 || entries.empty()) return expect(false, "a JSON object");
    entries.back().id = id;
    if (id >= 0 && id < (1 << 24)) return true;
    error = fmt::format("token '{}' has a value that is not an integer in [0, 2^24)",
                        printable(entries.back().token));
    return false;
  }
  int depth_ = 0;  // 1 inside the top-level object; nested values are refused
};

// vocab.bpe's merge lines with both symbols decoded to bytes, made on a thread of its own
// while encoder.json is parsed. Decoding stops at the first malformed line (`error`); the
// lines before it are kept, so errors still come in line order.
struct MergeLines {
  std::string text;               // the file, for error messages
  std::string bytes;              // each line's left then right symbol, back to back
  std::vector<uint32_t> ends;     // per line: where its left and its right symbol end in `bytes`
  std::vector<uint32_t> numbers;  // per line: its line number in the file
  std::string error;

  // Line `number` of the file, printable, for a message.
  std::string line(size_t number) const {
    std::string found;
    for_each_line(text, [&](size_t n, std::string_view l) {
      if (n == number) found = printable(l);
    });
    return found;
  }
};

MergeLines decode_merge_lines(const std::string& path, const ByteAlphabet& alphabet) {
  MergeLines m;
  m.text = read_file(path, "GPT-2's vocab.bpe");
  if (find_invalid_utf8(m.text) != std::string_view::npos) {
    m.error = fmt::format("{}: not valid UTF-8", path);
    return m;
  }
  std::string symbol_bytes;
  for_each_line(m.text, [&](size_t number, std::string_view line) {
    if (!m.error.empty() || line.empty() || (number == 1 && line.starts_with("#version"))) return;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      m.error = fmt::format("{}:{}: expected two symbols separated by one space, got '{}'", path,
                            number, printable(line));
      return;
    }
    const size_t line_start = m.bytes.size();
    for (const std::string_view symbol : {line.substr(0, space), line.substr(space + 1)}) {
      if (!alphabet.decode(symbol, symbol_bytes)) {
        m.bytes.resize(line_start);
        m.ends.resize(2 * m.numbers.size());
        m.error = fmt::format("{}:{}: '{}' has characters outside GPT-2's byte alphabet", path,
                              number, printable(line));
        return;
      }
      m.bytes += symbol_bytes;
      m.ends.push_back(static_cast<uint32_t>(m.bytes.size()));
    }
    m.numbers.push_back(static_cast<uint32_t>(number));
  });
  return m;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_gpt2_files(const std::string& encoder_json,
                                           const std::string& vocab_bpe) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::future<MergeLines> merge_lines =
      std::async(std::launch::async, decode_merge_lines, vocab_bpe, std::cref(alphabet));
  EncoderEntries encoder;
  {
    const std::string text = read_file(encoder_json, "GPT-2's encoder.json");
    if (!nlohmann::json::sax_parse(text, &encoder) && encoder.error.empty())
      encoder.error = "malformed JSON";
  }
  if (!encoder.error.empty()) fail("{}: {}", encoder_json, encoder.error);
  if (encoder.entries.empty())
    fail("{}: expected a JSON object mapping token strings to ids", encoder_json);

  // Every token string in the byte alphabet goes into the table, by its bytes; those that
  // are neither a byte nor made by a merge (e.g. <|endoftext|>) leave it again as specials.
  auto impl = std::make_unique<Impl>();
  impl->name = encoder_json;
  TokenTable& table = impl->table;
  int64_t max_id = 0;
  for (const auto& e : encoder.entries) max_id = std::max(max_id, e.id);
  std::vector<uint8_t> id_seen(static_cast<size_t>(max_id) + 1, 0);
  std::string bytes;
  for (const auto& e : encoder.entries) {
    if (id_seen[e.id]++) fail("{}: id {} is given to two tokens", encoder_json, e.id);
    if (alphabet.decode(e.token, bytes) && !bytes.empty())
      table.add(static_cast<uint32_t>(e.id), bytes);
  }
  table.finish();
  for (const auto& e : encoder.entries)
    if (table.contains(e.id) && table.find(table.bytes(e.id)) != e.id)
      fail("{}: token '{}' is given twice", encoder_json, printable(e.token));

  // Merge priority by id: bytes first (never compared: merges make >= 2 bytes), then merges
  // in file order.
  std::vector<uint32_t> priority(id_seen.size(), kNone);
  for (int b = 0; b < 256; ++b) {
    const char single = static_cast<char>(b);
    const uint32_t id = table.find(std::string_view(&single, 1));
    if (id == kNone)
      fail("{}: byte 0x{:02x} has no token (a byte-level BPE needs all 256)", encoder_json, b);
    priority[id] = static_cast<uint32_t>(b);
  }
  const MergeLines merges = merge_lines.get();
  const std::string_view merged(merges.bytes);
  uint32_t start = 0;
  for (size_t i = 0; i < merges.numbers.size(); ++i) {
    const uint32_t middle = merges.ends[2 * i], end = merges.ends[2 * i + 1];
    for (const std::string_view part :
         {merged.substr(start, middle - start), merged.substr(middle, end - middle)}) {
      const uint32_t id = table.find(part);
      if (id == kNone || priority[id] == kNone)
        fail("{}:{}: '{}' is neither a byte nor made by an earlier merge", vocab_bpe,
             merges.numbers[i], merges.line(merges.numbers[i]));
    }
    const uint32_t made = table.find(merged.substr(start, end - start));
    if (made == kNone)
      fail("{}:{}: the merge '{}' makes a token that {} does not have", vocab_bpe,
           merges.numbers[i], merges.line(merges.numbers[i]), encoder_json);
    if (priority[made] != kNone)
      fail("{}:{}: the merge '{}' makes a token that an earlier line already makes", vocab_bpe,
           merges.numbers[i], merges.line(merges.numbers[i]));
    priority[made] = static_cast<uint32_t>(256 + i);
    start = end;
  }
  if (!merges.error.empty()) throw UserError(merges.error);

  std::set<std::string> special_texts;
  for (auto& e : encoder.entries) {
    if (priority[e.id] != kNone) continue;
    if (table.contains(e.id)) table.remove(e.id);
    if (!special_texts.insert(e.token).second)
      fail("{}: token '{}' is given twice", encoder_json, printable(e.token));
    impl->specials[static_cast<uint32_t>(e.id)] = std::move(e.token);
  }
  impl->finish(encoder_json);
  for (uint32_t id : table.ids()) impl->priority[id] = priority[id];
  return BpeTokenizer(std::move(impl));
}

}  // namespace sps
