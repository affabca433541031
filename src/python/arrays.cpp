// Token ids from Python: any integer array or sequence, checked once and viewed in place
// where it already is C-ordered int32.
#include "python/support.h"

namespace sps::python {

namespace {

// `object` as a numpy array of an integer dtype (sps.InputError naming `argument` otherwise).
py::array integer_array(const py::handle& object, const std::string& argument) {
  py::array array;
  try {
    array = py::array::ensure(object);
  } catch (const py::error_already_set&) {
  }
  if (!array)
    fail("{}: expected an array of token ids, got {}", argument,
         py::str(py::type::handle_of(object).attr("__name__")).cast<std::string>());
  const char kind = array.dtype().kind();
  if (kind != 'i' && kind != 'u' && array.size() > 0)  // [] is an empty float array
    fail("{}: expected integer token ids, got dtype {}", argument,
         py::str(array.dtype()).cast<std::string>());
  return array;
}

// Checks every id of a C-ordered int64 copy against [0, limit) and narrows it.
void check_range(const py::array& array, const std::string& argument, int64_t limit,
                 int64_t columns) {
  const auto ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  const int64_t* p = ids.data();
  for (py::ssize_t i = 0; i < ids.size(); ++i)
    if (p[i] < 0 || p[i] >= limit) {
      if (array.ndim() == 2)
        fail("{}: id {} at [{}, {}] is outside the vocabulary [0, {})", argument, p[i], i / columns,
             i % columns, limit);
      fail("{}: id {} at [{}] is outside the vocabulary [0, {})", argument, p[i], i, limit);
    }
}

}  // namespace

TokenArray::TokenArray(const py::handle& object, const std::string& argument, int64_t limit) {
  py::array array = integer_array(object, argument);
  if (array.ndim() != 1 && array.ndim() != 2)
    fail("{}: expected a 2-D array [batch, tokens] (or 1-D for one sequence), got {} dimensions",
         argument, array.ndim());
  was_1d_ = array.ndim() == 1;
  rows_ = was_1d_ ? 1 : int64_t(array.shape(0));
  columns_ = int64_t(array.shape(array.ndim() - 1));
  if (rows_ == 0) fail("{}: an empty batch (no rows)", argument);
  if (columns_ == 0) fail("{}: rows of no tokens", argument);
  const bool int32_in_place =
      array.dtype().is(py::dtype::of<int32_t>()) && (array.flags() & py::array::c_style) != 0;
  if (int32_in_place) {
    held_ = array;
  } else {
    check_range(array, argument, limit, columns_);
    held_ = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(array);
    data_ = static_cast<const int32_t*>(held_.data());
    return;
  }
  data_ = static_cast<const int32_t*>(held_.data());
  for (int64_t i = 0; i < rows_ * columns_; ++i)
    if (data_[i] < 0 || data_[i] >= limit) {
      if (was_1d_)
        fail("{}: id {} at [{}] is outside the vocabulary [0, {})", argument, data_[i], i, limit);
      fail("{}: id {} at [{}, {}] is outside the vocabulary [0, {})", argument, data_[i],
           i / columns_, i % columns_, limit);
    }
}

std::vector<int32_t> token_list(const py::handle& sequence, const std::string& argument,
                                int64_t limit) {
  const py::array array = integer_array(sequence, argument);
  if (array.ndim() != 1)
    fail("{}: expected a 1-D array of token ids, got {} dimensions", argument, array.ndim());
  if (array.size() == 0) return {};
  return TokenArray(array, argument, limit).row(0);
}

std::vector<std::vector<int32_t>> token_lists(const py::handle& sequences,
                                              const std::string& argument, int64_t limit) {
  if (!py::isinstance<py::sequence>(sequences) || py::isinstance<py::str>(sequences))
    fail("{}: expected a list of token id arrays", argument);
  std::vector<std::vector<int32_t>> out;
  const py::sequence list = py::reinterpret_borrow<py::sequence>(sequences);
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(token_list(list[i], fmt::format("{}[{}]", argument, i), limit));
  return out;
}

}  // namespace sps::python
