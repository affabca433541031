// The restricted unpickler: what torch.save writes parses; any other callable, a bad
// opcode, a truncated stream or a tensor outside its storage is refused with one line.
#include <gtest/gtest.h>

#include "interop/pickle.h"
#include "interop/torch_archive.h"
#include "interop_fixtures.h"
#include "util/error.h"

namespace sps {
namespace {

using testing::PickleBytes;

PickleDocument parse(const std::string& bytes) {
  return unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.pkl",
                  pickle_memory_budget(bytes.size()));
}

std::string error_of(const std::string& bytes) {
  try {
    parse(bytes);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Unpickler, ReadsContainersAndScalars) {
  // {'a': [1, -2, 300000, True, None, 1.5], 'b': ('x',), 'n': 2**40}
  PickleBytes p;
  p.op('}').op('q').raw(std::string("\x00", 1)).op('(');
  p.str("a").op(']').op('(').int1(1).int4(-2).int4(300000).op('\x88').op('N');
  p.op('G').raw(std::string("\x3f\xf8\x00\x00\x00\x00\x00\x00", 8)).op('e');
  p.str("b").str("x").op('\x85');
  p.str("n").op('\x8a').raw(std::string("\x06\x00\x00\x00\x00\x00\x01", 7));
  p.op('u');
  const PickleDocument doc = parse(p.done());
  const PickleValue* a = doc.find(doc.root(), "a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->kind, PickleKind::list);
  ASSERT_EQ(a->items.size(), 6u);
  EXPECT_EQ(doc.at(a->items[0]).integer, 1);
  EXPECT_EQ(doc.at(a->items[1]).integer, -2);
  EXPECT_EQ(doc.at(a->items[2]).integer, 300000);
  EXPECT_EQ(doc.at(a->items[3]).kind, PickleKind::boolean);
  EXPECT_EQ(doc.at(a->items[4]).kind, PickleKind::none);
  EXPECT_EQ(doc.at(a->items[5]).real, 1.5);
  const PickleValue* b = doc.find(doc.root(), "b");
  ASSERT_EQ(b->kind, PickleKind::tuple);
  EXPECT_EQ(doc.at(b->items[0]).text, "x");
  EXPECT_EQ(doc.find(doc.root(), "n")->integer, int64_t{1} << 40);
  // The memo: the dict stored first is the root itself.
  EXPECT_EQ(doc.find(doc.root(), "missing"), nullptr);
}

TEST(Unpickler, RebuildsATensorView) {
  PickleBytes p;
  p.op('}').op('(').str("w").tensor("7", 10, 2, 8).op('u');
  const PickleDocument doc = parse(p.done());
  const PickleValue* w = doc.find(doc.root(), "w");
  ASSERT_EQ(w->kind, PickleKind::tensor);
  EXPECT_EQ(w->tensor.offset, 2);
  EXPECT_EQ(w->tensor.shape, std::vector<int64_t>{8});
  const PickleStorage& s = doc.at(w->tensor.storage).storage;
  EXPECT_EQ(s.key, "7");
  EXPECT_EQ(s.numel, 10);
  EXPECT_EQ(s.dtype, DType::F32);
}

TEST(Unpickler, RefusesCallablesThatAreNotWhitelisted) {
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"os", "system"}, {"builtins", "eval"}, {"subprocess", "Popen"}, {"posix", "system"},
           {"torch", "load"}, {"collections", "defaultdict"}}) {
    PickleBytes p;
    p.global(module, name).str("echo pwned").op('\x85').op('R');
    const std::string e = error_of(p.done());
    EXPECT_NE(e.find("refused to load the global '" + module + "." + name + "'"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos);
  }
}

TEST(Unpickler, RefusesCallingAStorageType) {
  PickleBytes p;
  p.global("torch", "FloatStorage").op(')').op('R');
  EXPECT_NE(error_of(p.done()).find("cannot be called"), std::string::npos);
}

TEST(Unpickler, RefusesATensorPastTheEndOfItsStorage) {
  PickleBytes p;
  p.op('}').op('(').str("w").tensor("0", 4, 1, 4).op('u');  // elements 1..4 of 4
  EXPECT_NE(error_of(p.done()).find("past the end of its storage of 4 elements"), std::string::npos);
  PickleBytes ok;
  ok.op('}').op('(').str("w").tensor("0", 4, 0, 4).op('u');
  EXPECT_EQ(error_of(ok.done()), "");
}

// What a pickle builds is counted against its budget as it is built: values, the stack,
// marks, memo entries and container items, whichever a hostile pickle piles up.
TEST(Unpickler, StaysWithinItsMemoryBudget) {
  const auto error_within = [](const std::string& bytes, size_t budget) {
    try {
      unpickle(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.pkl", budget);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string memo = "\x80\x02]";  // one list, stored under 20000 memo ids
  for (uint32_t i = 0; i < 20000; ++i)
    memo += std::string("r") + char(i & 0xFF) + char(i >> 8) + std::string(2, '\0');
  std::string gets = std::string("\x80\x02]q\x00(", 6);  // a list of 20000 references to itself
  for (int i = 0; i < 20000; ++i) gets += std::string("h\x00", 2);
  gets += "e.";
  const std::vector<std::string> hostile = {
      "\x80\x02(" + std::string(20000, 'N') + "t.",  // 20000 values
      "\x80\x02" + std::string(20000, '(') + "N.",   // 20000 marks
      memo + ".", gets};
  for (const std::string& bytes : {hostile[0], hostile[2], hostile[3]})
    EXPECT_EQ(error_within(bytes, size_t(1) << 30), "");  // well-formed, given the memory
  for (const std::string& bytes : hostile) {
    const std::string e = error_within(bytes, 100000);
    EXPECT_NE(e.find("reading this pickle would take more than 100000 bytes of memory"),
              std::string::npos)
        << e;
  }
  // The budget of an archive grows with it, from a floor; its data.pkl's limit too.
  EXPECT_EQ(pickle_memory_budget(0), size_t(16) << 20);
  EXPECT_EQ(pickle_memory_budget(1000), (size_t(16) << 20) + 64000);
  EXPECT_EQ(pickle_size_limit(1000), (size_t(4) << 20) + 4000);
  EXPECT_EQ(pickle_size_limit(size_t(1) << 40), kMaxPickleBytes);
}

TEST(Unpickler, RefusesOtherOpcodesAndBrokenStreams) {
  EXPECT_NE(error_of(std::string("\x80\x02") + "\x93."), "");                  // STACK_GLOBAL
  EXPECT_NE(error_of(std::string("\x80\x02") + "S'x'\n."), "");               // STRING
  EXPECT_NE(error_of(std::string("\x80\x04") + "}."), "");                    // protocol 4
  EXPECT_NE(error_of(std::string("\x80\x02") + "}"), "");                      // no STOP
  EXPECT_NE(error_of(std::string("\x80\x02") + "X\xff\xff\xff\x7f" "ab."), "");  // string past the end
  EXPECT_NE(error_of(std::string("\x80\x02") + "h\x05."), "");                 // memo never stored
  EXPECT_NE(error_of(std::string("\x80\x02") + "."), "");                      // empty stack
  EXPECT_NE(error_of(std::string("\x80\x02") + "}}."), "");                    // two values left
  EXPECT_NE(error_of(std::string("\x80\x02") + "]Ks."), "");                   // SETITEM on a list
  EXPECT_NE(error_of(std::string("\x80\x02") + "(K\x01K\x02(u."), "");         // SETITEMS without a dict
  const std::string e = error_of(std::string("\x80\x02") + "\x93.");
  EXPECT_NE(e.find("test.pkl: pickle byte 2: opcode 0x93"), std::string::npos) << e;
}

}  // namespace
}  // namespace sps
