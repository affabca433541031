#pragma once
// Damage done to safetensors files on purpose, as a disk or an editor would: one bit of one
// tensor flipped, or the tensors' checksums taken out (a file as sps wrote them before it
// recorded checksums).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "util/safetensors.h"
#include "util/temp_dir.h"

namespace sps::testing {

// Flips bit `bit` of byte `byte` of tensor `tensor` in the file at `path`.
inline void flip_tensor_bit(const std::string& path, const std::string& tensor, uint64_t byte,
                            int bit) {
  std::string bytes = read_whole_file(path);
  const SafetensorsHeader h =
      parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
  for (const TensorInfo& t : h.tensors)
    if (t.name == tensor) {
      const uint64_t at = h.data_offset + t.begin + byte;
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
      write_whole_file(path, bytes);
      return;
    }
  throw std::runtime_error("no tensor " + tensor + " in " + path);
}

// Rewrites the file at `path` without its checksums' metadata entry, keeping everything else.
inline void strip_checksums(const std::string& path) {
  const std::string bytes = read_whole_file(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  nlohmann::ordered_json header = nlohmann::ordered_json::parse(bytes.substr(8, n));
  header["__metadata__"].erase(kChecksumsKey);
  if (header["__metadata__"].empty()) header.erase("__metadata__");
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i) length[i] = static_cast<char>(text.size() >> (8 * i));
  write_whole_file(path, length + text + bytes.substr(8 + n));
}

}  // namespace sps::testing
