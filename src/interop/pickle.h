#pragma once
// A restricted unpickler for the pickles `torch.save` writes (protocol 2): plain containers
// and scalars, `collections.OrderedDict`, `torch._utils._rebuild_tensor_v2` and the storage
// types in persistent ids. Nothing is ever called: the few whitelisted globals are
// recognised by name and interpreted here; any other global, opcode or shape of arguments
// is a UserError naming the source and the byte offset.
//
// Values live in one arena and refer to each other by index, so a hostile pickle cannot
// build reference cycles or deep recursive destructors.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/safetensors.h"

namespace sps {

enum class PickleKind {
  none, boolean, integer, real, string, list, tuple, dict,
  global,   // one of the whitelisted callables, before it is applied
  storage,  // a persistent id: ('storage', <type>, key, location, numel)
  tensor,   // the result of _rebuild_tensor_v2
};

struct PickleStorage {
  DType dtype = DType::F32;
  std::string key;  // the record name under data/ in the archive
  int64_t numel = 0;
};

struct PickleTensor {
  uint32_t storage = 0;  // index of a storage value
  int64_t offset = 0;    // in elements
  std::vector<int64_t> shape, stride;
};

struct PickleValue {
  PickleKind kind = PickleKind::none;
  int64_t integer = 0;           // integer, boolean
  double real = 0.0;
  std::string text;              // string; the qualified name of a global
  std::vector<uint32_t> items;   // list/tuple elements; dict: key, value, key, value, …
  PickleStorage storage;
  PickleTensor tensor;
};

class PickleDocument {
 public:
  const PickleValue& root() const { return values_[root_]; }
  const PickleValue& at(uint32_t index) const { return values_[index]; }
  // The value under string key `key` of a dict, or null.
  const PickleValue* find(const PickleValue& dict, const std::string& key) const;

 private:
  friend class Unpickler;
  std::vector<PickleValue> values_;
  uint32_t root_ = 0;
};

// Parses `bytes[0, size)`; `source` names the file in errors. `memory_budget` bounds what
// the document may take while it is built (values, their text and items, the stack, marks
// and memo), so a small pickle that asks for much more (a million references to one list,
// a deep stack of marks) is a UserError instead of an allocation the machine cannot make.
PickleDocument unpickle(const uint8_t* bytes, size_t size, const std::string& source,
                        size_t memory_budget);

const char* pickle_kind_name(PickleKind kind);

}  // namespace sps
