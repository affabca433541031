// sps.Tokenizer: the engine's byte-level BPE (tokenizer/bpe.h) on numpy arrays.
#include <pybind11/stl.h>

#include "python/support.h"
#include "python/tokenizer.h"
#include "tokenizer/bpe.h"

namespace sps::python {

namespace {

// Text as the tokenizer reads it: a str as UTF-8, bytes as they are.
std::string text_bytes(const py::handle& text, const std::string& argument) {
  if (py::isinstance<py::str>(text) || py::isinstance<py::bytes>(text))
    return text.cast<std::string>();
  fail("{}: expected str or bytes, got {}", argument,
       py::str(py::type::handle_of(text).attr("__name__")).cast<std::string>());
}

py::array_t<uint32_t> ids_array(std::vector<uint32_t> ids) {
  uint32_t* data = ids.data();
  const py::ssize_t n = py::ssize_t(ids.size());
  return array_owning(data, {n}, std::move(ids));
}

}  // namespace

std::shared_ptr<BpeTokenizer> load_tokenizer_spec(const std::string& spec) {
  if (spec != "gpt2") require_path(spec, "spec");
  return without_gil(
      [&](const StopScope&) { return std::make_shared<BpeTokenizer>(BpeTokenizer::load(spec)); });
}

void register_tokenizer(py::module_& m) {
  py::class_<BpeTokenizer, std::shared_ptr<BpeTokenizer>>(m, "Tokenizer")
      .def(py::init(&load_tokenizer_spec), py::arg("spec"))
      .def_property_readonly("name", &BpeTokenizer::name)
      .def_property_readonly("vocab_size", &BpeTokenizer::vocab_size)
      .def_property_readonly("eos_id", &BpeTokenizer::eos_id)
      .def_property_readonly("predict_id", &BpeTokenizer::predict_id)
      .def_property_readonly("pad_id", &BpeTokenizer::pad_id)
      .def_property_readonly("padded_vocab_size", &BpeTokenizer::padded_vocab_size)
      .def_property_readonly("fingerprint", &BpeTokenizer::fingerprint)
      .def(
          "encode_one",
          [](const BpeTokenizer& t, const py::handle& text) {
            const std::string bytes = text_bytes(text, "text");
            std::vector<uint32_t> ids;
            {
              py::gil_scoped_release release;
              ids = t.encode(bytes);
            }
            return ids_array(std::move(ids));
          },
          py::arg("text"))
      .def(
          "encode_many",
          [](const BpeTokenizer& t, const py::sequence& texts) {
            std::vector<std::string> bytes;
            for (size_t i = 0; i < texts.size(); ++i)
              bytes.push_back(text_bytes(texts[i], fmt::format("text[{}]", i)));
            std::vector<std::vector<uint32_t>> ids(bytes.size());
            {
              py::gil_scoped_release release;
#pragma omp parallel for schedule(dynamic, 1)
              for (size_t i = 0; i < bytes.size(); ++i) ids[i] = t.encode(bytes[i]);
            }
            py::list out;
            for (auto& row : ids) out.append(ids_array(std::move(row)));
            return out;
          },
          py::arg("texts"))
      .def(
          "decode_bytes",
          [](const BpeTokenizer& t, const py::handle& ids_object) {
            const std::vector<int32_t> checked =
                token_list(ids_object, "ids", int64_t(t.padded_vocab_size()));
            std::vector<uint32_t> ids(checked.begin(), checked.end());
            for (size_t i = 0; i < ids.size(); ++i)
              if (!t.is_token(ids[i]))
                fail("ids: {} at [{}] is not a token id of {} (ids are 0..{})", ids[i], i, t.name(),
                     t.padded_vocab_size() - 1);
            std::string bytes;
            {
              py::gil_scoped_release release;
              bytes = t.decode(ids);
            }
            return py::bytes(bytes);
          },
          py::arg("ids"));
}

}  // namespace sps::python
