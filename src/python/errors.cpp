// sps.Error and its subclasses, and the translation of the engine's exceptions into them.
#include <algorithm>
#include <filesystem>

#include "python/support.h"

namespace sps::python {

namespace {

PyObject* new_error(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("sps.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (!type) throw py::error_already_set();
  m.add_object(name, py::handle(type));
  return type;
}

// The engine's messages name the commands' flags ("--top-p must be in (0, 1]"); from Python
// they name the argument instead ("top_p must be ...").
std::string with_argument_names(const std::string& message) {
  if (message.rfind("--", 0) != 0) return message;
  const size_t end = std::min(message.find_first_of(" =:"), message.size());
  std::string name = message.substr(2, end - 2);
  std::replace(name.begin(), name.end(), '-', '_');
  if (name == "weight_type") name = "weights";
  if (name == "kv_type") name = "kv_cache";
  if (name == "task_file") name = "task_files";
  return name + message.substr(end);
}

}  // namespace

void register_errors(py::module_& m) {
  static PyObject* error = new_error(m, "Error", PyExc_Exception,
                                     "Base class of the errors sps raises (a one-line message).");
  const auto bases = [](PyObject* other) {
    return py::make_tuple(py::handle(error), py::handle(other)).release().ptr();
  };
  static PyObject* input_error = new_error(
      m, "InputError", bases(PyExc_ValueError),
      "Bad input: an argument, a file's contents, a config (the commands' exit status 2).");
  static PyObject* not_found = new_error(m, "NotFoundError", bases(PyExc_FileNotFoundError),
                                         "A file or folder passed that does not exist.");
  static PyObject* internal_error =
      new_error(m, "InternalError", bases(PyExc_RuntimeError),
                "A broken invariant inside the engine: a bug to report.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const PathNotFound& e) {
      PyErr_SetString(not_found, e.what());
    } catch (const UserError& e) {
      PyErr_SetString(input_error, with_argument_names(e.what()).c_str());
    } catch (const Interrupted&) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own (TypeError, ValueError, ...): its translator
    } catch (const std::bad_alloc&) {
      throw;
    } catch (const std::exception& e) {
      PyErr_SetString(internal_error, (std::string("internal error: ") + e.what()).c_str());
    }
  });
}

void require_path(const std::string& path, const std::string& argument) {
  std::error_code ec;
  if (path.empty()) throw UserError(argument + ": empty path");
  if (!std::filesystem::exists(path, ec))
    throw PathNotFound(fmt::format("{} {}: no such file or folder", argument, path));
}

}  // namespace sps::python
