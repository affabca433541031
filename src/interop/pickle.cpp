#include "interop/pickle.h"

#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "util/error.h"

namespace sps {

namespace {

// The opcodes of pickle protocol 2 that torch.save uses for a checkpoint dict.
enum Op : uint8_t {
  PROTO = 0x80, STOP = '.', MARK = '(', NONE = 'N', NEWTRUE = 0x88, NEWFALSE = 0x89,
  BININT = 'J', BININT1 = 'K', BININT2 = 'M', LONG1 = 0x8a, BINFLOAT = 'G',
  BINUNICODE = 'X', EMPTY_TUPLE = ')', TUPLE = 't', TUPLE1 = 0x85, TUPLE2 = 0x86,
  TUPLE3 = 0x87, EMPTY_LIST = ']', APPEND = 'a', APPENDS = 'e', EMPTY_DICT = '}',
  SETITEM = 's', SETITEMS = 'u', BINPUT = 'q', LONG_BINPUT = 'r', BINGET = 'h',
  LONG_BINGET = 'j', GLOBAL = 'c', REDUCE = 'R', BUILD = 'b', BINPERSID = 'Q',
};

struct StorageType {
  const char* name;
  DType dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"torch FloatStorage", DType::F32},  {"torch BFloat16Storage", DType::BF16},
    {"torch HalfStorage", DType::F16},   {"torch DoubleStorage", DType::F64},
    {"torch LongStorage", DType::I64},   {"torch IntStorage", DType::I32},
    {"torch ByteStorage", DType::U8},
};
constexpr const char* kOrderedDict = "collections OrderedDict";
constexpr const char* kRebuildTensor = "torch._utils _rebuild_tensor_v2";

// Names come from the file: keep the error one printable line.
std::string printable(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < 80; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += (c < 0x20 || c >= 0x7F) ? '?' : static_cast<char>(c);
  }
  if (text.size() > 80) out += "...";
  return out;
}

}  // namespace

class Unpickler {
 public:
  Unpickler(const uint8_t* bytes, size_t size, const std::string& source, size_t budget)
      : p_(bytes), size_(size), source_(source), budget_(budget) {}

  PickleDocument run() {
    while (true) {
      op_at_ = pos_;
      const uint8_t op = byte();
      switch (op) {
        case PROTO: {
          const uint8_t version = byte();
          if (version != 2) error("pickle protocol {} (torch.save writes protocol 2)", version);
          break;
        }
        case STOP: {
          if (stack_.size() != 1 || !marks_.empty()) error("STOP with {} values on the stack", stack_.size());
          doc_.root_ = stack_.back();
          return std::move(doc_);
        }
        case MARK:
          charge(sizeof(size_t));
          marks_.push_back(stack_.size());
          break;
        case NONE: push(PickleValue{}); break;
        case NEWTRUE: push(integer(1, PickleKind::boolean)); break;
        case NEWFALSE: push(integer(0, PickleKind::boolean)); break;
        case BININT: push(integer(static_cast<int32_t>(little(4)), PickleKind::integer)); break;
        case BININT1: push(integer(byte(), PickleKind::integer)); break;
        case BININT2: push(integer(static_cast<int64_t>(little(2)), PickleKind::integer)); break;
        case LONG1: push(integer(long1(), PickleKind::integer)); break;
        case BINFLOAT: {
          const uint64_t bits = big(8);
          PickleValue v;
          v.kind = PickleKind::real;
          v.real = std::bit_cast<double>(bits);
          push(std::move(v));
          break;
        }
        case BINUNICODE: {
          const uint64_t n = little(4);
          need(n);
          PickleValue v;
          v.kind = PickleKind::string;
          v.text.assign(reinterpret_cast<const char*>(p_ + pos_), n);
          pos_ += n;
          push(std::move(v));
          break;
        }
        case EMPTY_TUPLE: push(container(PickleKind::tuple, {})); break;
        case TUPLE: push(container(PickleKind::tuple, pop_to_mark())); break;
        case TUPLE1: case TUPLE2: case TUPLE3: {
          const size_t n = op - TUPLE1 + 1;
          std::vector<uint32_t> items(n);
          for (size_t i = n; i-- > 0;) items[i] = pop();
          push(container(PickleKind::tuple, std::move(items)));
          break;
        }
        case EMPTY_LIST: push(container(PickleKind::list, {})); break;
        case EMPTY_DICT: push(container(PickleKind::dict, {})); break;
        case APPEND: {
          const uint32_t v = pop();
          charge(sizeof(uint32_t));
          target(PickleKind::list).items.push_back(v);
          break;
        }
        case APPENDS: {
          std::vector<uint32_t> items = pop_to_mark();
          charge(items.size() * sizeof(uint32_t));
          auto& list = target(PickleKind::list).items;
          list.insert(list.end(), items.begin(), items.end());
          break;
        }
        case SETITEM: {
          const uint32_t value = pop(), key = pop();
          charge(2 * sizeof(uint32_t));
          auto& dict = target(PickleKind::dict).items;
          dict.push_back(key);
          dict.push_back(value);
          break;
        }
        case SETITEMS: {
          std::vector<uint32_t> items = pop_to_mark();
          if (items.size() % 2 != 0) error("SETITEMS with an odd number of values");
          charge(items.size() * sizeof(uint32_t));
          auto& dict = target(PickleKind::dict).items;
          dict.insert(dict.end(), items.begin(), items.end());
          break;
        }
        case BINPUT: memo(byte()); break;
        case LONG_BINPUT: memo(static_cast<uint32_t>(little(4))); break;
        case BINGET: get(byte()); break;
        case LONG_BINGET: get(static_cast<uint32_t>(little(4))); break;
        case GLOBAL: global(); break;
        case REDUCE: reduce(); break;
        case BUILD: {
          // An OrderedDict's instance attributes (a state dict's `_metadata`): not needed.
          const uint32_t state = pop();
          if (value(state).kind != PickleKind::dict) error("BUILD with a state that is not a dict");
          target(PickleKind::dict);
          break;
        }
        case BINPERSID: persistent_id(); break;
        default:
          error("opcode 0x{:02x} is not one torch.save writes for a checkpoint; refused", op);
      }
    }
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("{}: pickle byte {}: {}", source_, op_at_,
         fmt::format(format, std::forward<Args>(args)...));
  }

  void need(uint64_t n) const {
    if (n > size_ - pos_) error("truncated (the pickle ends inside an opcode)");
  }
  uint8_t byte() {
    need(1);
    return p_[pos_++];
  }
  uint64_t little(int n) {
    need(n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{p_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  uint64_t big(int n) {
    need(n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | p_[pos_ + i];
    pos_ += n;
    return v;
  }
  int64_t long1() {  // n bytes of little-endian two's complement
    const uint8_t n = byte();
    if (n > 8) error("an integer of {} bytes is out of range", n);
    if (n == 0) return 0;
    uint64_t v = little(n);
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }
  std::string line() {  // GLOBAL's arguments: text up to a newline
    const size_t start = pos_;
    while (pos_ < size_ && p_[pos_] != '\n') ++pos_;
    if (pos_ == size_) error("truncated (GLOBAL without a newline)");
    return std::string(reinterpret_cast<const char*>(p_ + start), pos_++ - start);
  }

  static PickleValue integer(int64_t v, PickleKind kind) {
    PickleValue out;
    out.kind = kind;
    out.integer = v;
    return out;
  }
  static PickleValue container(PickleKind kind, std::vector<uint32_t> items) {
    PickleValue out;
    out.kind = kind;
    out.items = std::move(items);
    return out;
  }

  // Counts `bytes` more of the document's memory against the budget. Nothing is given back
  // when a value leaves the stack, so the count bounds the peak.
  void charge(size_t bytes) {
    used_ += bytes;
    if (used_ > budget_)
      error("reading this pickle would take more than {} bytes of memory (the limit for an "
            "archive of this size); refused",
            budget_);
  }

  PickleValue& value(uint32_t index) { return doc_.values_[index]; }
  void push(PickleValue v) {
    charge(sizeof(PickleValue) + v.text.size() + sizeof(uint32_t) * (v.items.size() + 1) +
           sizeof(int64_t) * (v.tensor.shape.size() + v.tensor.stride.size()) +
           v.storage.key.size());
    doc_.values_.push_back(std::move(v));
    stack_.push_back(static_cast<uint32_t>(doc_.values_.size() - 1));
  }
  void memo(uint32_t id) {
    charge(kMemoEntryBytes);
    memo_[id] = top();
  }
  uint32_t top() const {
    if (stack_.size() <= floor()) error("the stack is empty");
    return stack_.back();
  }
  uint32_t pop() {
    const uint32_t v = top();
    stack_.pop_back();
    return v;
  }
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  std::vector<uint32_t> pop_to_mark() {
    if (marks_.empty()) error("no MARK before this opcode");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  PickleValue& target(PickleKind kind) {  // the container an opcode adds to
    PickleValue& v = value(top());
    if (v.kind != kind)
      error("expected a {} on the stack, found a {}", pickle_kind_name(kind), pickle_kind_name(v.kind));
    return v;
  }
  void get(uint32_t id) {
    const auto it = memo_.find(id);
    if (it == memo_.end()) error("memo entry {} was never stored", id);
    charge(sizeof(uint32_t));
    stack_.push_back(it->second);
  }

  void global() {
    const std::string module = line(), name = line();
    const std::string qualified = module + " " + name;
    bool known = qualified == kOrderedDict || qualified == kRebuildTensor;
    for (const StorageType& s : kStorageTypes) known = known || qualified == s.name;
    if (!known)
      error("refused to load the global '{}.{}': only containers, tensors and storages are "
            "allowed (this file may try to run code)",
            printable(module), printable(name));
    PickleValue v;
    v.kind = PickleKind::global;
    v.text = qualified;
    push(std::move(v));
  }

  const PickleValue& expect(uint32_t index, PickleKind kind, const char* what) {
    const PickleValue& v = value(index);
    if (v.kind != kind)
      error("{}: expected a {}, found a {}", what, pickle_kind_name(kind), pickle_kind_name(v.kind));
    return v;
  }

  std::vector<int64_t> int_tuple(uint32_t index, const char* what) {
    std::vector<int64_t> out;
    for (uint32_t item : expect(index, PickleKind::tuple, what).items) {
      const PickleValue& v = expect(item, PickleKind::integer, what);
      if (v.integer < 0) error("{}: negative entry {}", what, v.integer);
      out.push_back(v.integer);
    }
    return out;
  }

  void reduce() {
    const uint32_t args_index = pop();
    const std::string callable = expect(pop(), PickleKind::global, "REDUCE's callable").text;
    const std::vector<uint32_t>& args =
        expect(args_index, PickleKind::tuple, "REDUCE's arguments").items;
    if (callable == kOrderedDict) {
      if (!args.empty()) error("OrderedDict with arguments");
      push(container(PickleKind::dict, {}));
      return;
    }
    if (callable != kRebuildTensor) error("'{}' cannot be called", printable(callable));
    // (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (args.size() != 6 && args.size() != 7)
      error("_rebuild_tensor_v2 with {} arguments, expected 6 or 7", args.size());
    PickleValue out;
    out.kind = PickleKind::tensor;
    PickleTensor& t = out.tensor;
    t.storage = args[0];
    const PickleStorage& storage = expect(args[0], PickleKind::storage, "tensor storage").storage;
    t.offset = expect(args[1], PickleKind::integer, "tensor storage offset").integer;
    t.shape = int_tuple(args[2], "tensor size");
    t.stride = int_tuple(args[3], "tensor stride");
    expect(args[4], PickleKind::boolean, "tensor requires_grad");
    expect(args[5], PickleKind::dict, "tensor backward hooks");
    if (t.offset < 0) error("negative storage offset {}", t.offset);
    if (t.shape.size() != t.stride.size())
      error("tensor size has {} dimensions but stride {}", t.shape.size(), t.stride.size());
    // The last element the view touches must lie inside the storage. Terms are ≥ 0, so
    // stopping at the first partial sum past the end keeps the arithmetic in range.
    bool empty = false;
    __int128 numel = 1;
    for (int64_t n : t.shape) {
      empty = empty || n == 0;
      numel = empty ? 0 : numel * n;
      if (numel > std::numeric_limits<int64_t>::max()) error("tensor size overflows");
    }
    __int128 last = t.offset;
    for (size_t i = 0; i < t.shape.size() && !empty && last < storage.numel; ++i)
      last += __int128(t.shape[i] - 1) * t.stride[i];
    if (!empty && last >= storage.numel)
      error("tensor view (offset {}, size {}) reaches past the end of its storage of {} elements",
            t.offset, fmt::join(t.shape, "x"), storage.numel);
    push(std::move(out));
  }

  void persistent_id() {
    const std::vector<uint32_t>& pid = expect(pop(), PickleKind::tuple, "persistent id").items;
    if (pid.size() != 5) error("persistent id with {} fields, expected 5", pid.size());
    if (expect(pid[0], PickleKind::string, "persistent id").text != "storage")
      error("persistent id of a kind other than 'storage'");
    const std::string type = expect(pid[1], PickleKind::global, "storage type").text;
    PickleValue v;
    v.kind = PickleKind::storage;
    bool found = false;
    for (const StorageType& s : kStorageTypes)
      if (type == s.name) v.storage.dtype = s.dtype, found = true;
    if (!found) error("'{}' is not a storage type", printable(type));
    v.storage.key = expect(pid[2], PickleKind::string, "storage key").text;
    expect(pid[3], PickleKind::string, "storage location");
    v.storage.numel = expect(pid[4], PickleKind::integer, "storage size").integer;
    if (v.storage.numel < 0) error("negative storage size {}", v.storage.numel);
    for (char c : v.storage.key)
      if (!std::isalnum(static_cast<unsigned char>(c))) error("storage key '{}' is not a plain name", printable(v.storage.key));
    if (v.storage.key.empty()) error("empty storage key");
    push(std::move(v));
  }

  // An unordered_map node of (id, index) with its share of the bucket array.
  static constexpr size_t kMemoEntryBytes = 48;

  const uint8_t* p_;
  size_t size_, pos_ = 0, op_at_ = 0;
  const std::string& source_;
  size_t budget_, used_ = 0;
  PickleDocument doc_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
};

const PickleValue* PickleDocument::find(const PickleValue& dict, const std::string& key) const {
  if (dict.kind != PickleKind::dict) return nullptr;
  const PickleValue* found = nullptr;
  for (size_t i = 0; i + 1 < dict.items.size(); i += 2) {
    const PickleValue& k = values_[dict.items[i]];
    if (k.kind == PickleKind::string && k.text == key) found = &values_[dict.items[i + 1]];
  }
  return found;  // the last assignment wins, as in Python
}

PickleDocument unpickle(const uint8_t* bytes, size_t size, const std::string& source,
                        size_t memory_budget) {
  return Unpickler(bytes, size, source, memory_budget).run();
}

const char* pickle_kind_name(PickleKind kind) {
  switch (kind) {
    case PickleKind::none: return "None";
    case PickleKind::boolean: return "bool";
    case PickleKind::integer: return "int";
    case PickleKind::real: return "float";
    case PickleKind::string: return "str";
    case PickleKind::list: return "list";
    case PickleKind::tuple: return "tuple";
    case PickleKind::dict: return "dict";
    case PickleKind::global: return "global";
    case PickleKind::storage: return "storage";
    case PickleKind::tensor: return "tensor";
  }
  return "?";
}

}  // namespace sps
