#pragma once
// Helpers of the interop tests: the checked-in torch.save fixtures (made by
// fixtures/make_fixtures.py), a recipe that resumes one in sps, a writer of small pickles
// for hostile inputs, and zip archives written and read with libzip.
#include <zip.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "interop/export_vocabulary.h"
#include "train/train_fixtures.h"

namespace sps::testing {

inline std::string interop_fixture(const std::string& name) {
  return std::string(SPS_SOURCE_DIR) + "/tests/interop/fixtures/" + name;
}

inline std::vector<float> read_f32_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

// A recipe that resumes the fixtures' sps model (make_fixtures.py: V 64, d 8, 2 layers,
// T 8, w 2) at their 4 sequences per step (last_save_tokens = 64 after 2 steps), `steps`
// steps long, on the micro data of the trainer tests (write_micro_data) in `data_dir`. The
// warm-up makes the learning rate depend on the step; no clipping keeps a step simple to
// recompute.
inline std::string fixture_sps_recipe(const std::string& data_dir, int64_t steps) {
  std::ostringstream s;
  s << "model: {family: sps, n_layer: 2, n_head: 2, hidden_size: 8, intermediate_size: 16, "
       "vocab_size: 64, block_size: 8, window_size: 2, eos_token_id: 61, predict_token_id: 62, "
       "pad_token_id: 63, norm_eps: 1.0e-6}\n"
    << "training: {micro_batch_size: 2, global_batch_size: 4, max_tokens: " << steps * 32
    << ", eval_total_tokens: 16, sampler_type: fixed_random_chunk, chunk_size_units: 7}\n"
    << "optimizer: {learning_rate: 0.01, grad_clip: 0}\n"
    << "scheduler: {warmup_tokens: 128, lr_decay_tokens: 0}\n"
    << "data: {dataset: " << data_dir << "}\n"
    << "system: {threads: 1}\n";
  return s.str();
}

// A vocabulary for the fixtures' V = 64 (EOS = 61), too small for a real byte-level BPE
// (export_vocabulary() is tested in test_vocabulary.cpp): ids 0..60 are one character each.
inline ExportVocabulary fixture_vocabulary() {
  ExportVocabulary v;
  for (int id = 0; id < 64; ++id) {
    v.tokens.push_back(id < 61 ? std::string(1, char('A' + id)) : id == 61 ? "<|endoftext|>" : "[PAD" + std::to_string(id) + "]");
    v.types.push_back(id < 61 ? kTokenNormal : id == 61 ? kTokenControl : kTokenUnused);
  }
  v.merges = {"A B", "AB C"};
  v.eos_id = 61;
  return v;
}

// Protocol-2 opcodes, appended by hand: hostile pickles are easier to state this way.
struct PickleBytes {
  std::string b = "\x80\x02";
  PickleBytes& op(char c) { b += c; return *this; }
  PickleBytes& raw(const std::string& s) { b += s; return *this; }
  PickleBytes& global(const std::string& module, const std::string& name) {
    b += 'c' + module + '\n' + name + '\n';
    return *this;
  }
  PickleBytes& str(const std::string& s) {
    b += 'X';
    for (int i = 0; i < 4; ++i) b += char((s.size() >> (8 * i)) & 0xFF);
    b += s;
    return *this;
  }
  PickleBytes& int1(uint8_t v) { b += 'K'; b += char(v); return *this; }
  PickleBytes& int4(int32_t v) {
    b += 'J';
    for (int i = 0; i < 4; ++i) b += char((uint32_t(v) >> (8 * i)) & 0xFF);
    return *this;
  }
  PickleBytes& int8(int64_t v) {  // LONG1 with 8 bytes
    b += '\x8a';
    b += char(8);
    for (int i = 0; i < 8; ++i) b += char((uint64_t(v) >> (8 * i)) & 0xFF);
    return *this;
  }
  // _rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', numel), offset, (n,), (1,), False, OrderedDict())
  PickleBytes& tensor(const std::string& key, int64_t storage_numel, int32_t offset, int32_t n) {
    global("torch._utils", "_rebuild_tensor_v2").op('(');
    op('(').str("storage").global("torch", "FloatStorage").str(key).str("cpu").int8(storage_numel).op('t');
    op('Q').int4(offset).int4(n).op('\x85').int1(1).op('\x85').op('\x89');
    global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
    return *this;
  }
  std::string done() { return b + '.'; }
};

// Writes a zip of (name, bytes) records; compressed with deflate when `deflate`.
inline void write_zip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& records,
                      bool deflate = false) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!z) throw std::runtime_error("zip_open failed");
  for (const auto& [name, bytes] : records) {
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    const zip_int64_t i = zip_file_add(z, name.c_str(), src, ZIP_FL_OVERWRITE);
    if (i < 0) throw std::runtime_error("zip_file_add failed");
    zip_set_file_compression(z, zip_uint64_t(i), deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 9);
  }
  if (zip_close(z) != 0) throw std::runtime_error("zip_close failed");
}

// Every record of a zip archive, in order, as (name, bytes).
inline std::vector<std::pair<std::string, std::string>> read_zip(const std::string& path) {
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (!z) throw std::runtime_error("zip_open failed: " + path);
  std::vector<std::pair<std::string, std::string>> records;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    zip_stat_t st;
    if (zip_stat_index(z, zip_uint64_t(i), 0, &st) != 0) throw std::runtime_error("zip_stat failed");
    zip_file_t* f = zip_fopen_index(z, zip_uint64_t(i), 0);
    if (!f) throw std::runtime_error("cannot read a record of " + path);
    std::string bytes(size_t(st.size), '\0');
    const bool complete = zip_fread(f, bytes.data(), st.size) == zip_int64_t(st.size);
    zip_fclose(f);
    if (!complete) throw std::runtime_error("short record in " + path);
    records.emplace_back(st.name, std::move(bytes));
  }
  zip_close(z);
  return records;
}

}  // namespace sps::testing
