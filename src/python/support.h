#pragma once
// What every binding of the Python module shares: its exceptions, calls made without the
// GIL that Ctrl-C can stop, Python callables held by code running without the GIL, and
// numpy arrays that own engine buffers or check what callers pass.
#include <fmt/format.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/large_buffer.h"
#include "util/stop_signals.h"

namespace sps::python {

namespace py = pybind11;

// ---- errors (errors.cpp) --------------------------------------------------------------
// sps.Error and its subclasses: InputError (a ValueError: bad input, the engine's UserError
// lines, wrong arguments), NotFoundError (a FileNotFoundError: a path passed that does not
// exist), InternalError (a RuntimeError: a broken invariant, i.e. a bug).
void register_errors(py::module_& m);

// A path the caller passed that does not exist: sps.NotFoundError.
class PathNotFound : public UserError {
 public:
  using UserError::UserError;
};
// Raises sps.NotFoundError naming the argument unless `path` exists.
void require_path(const std::string& path, const std::string& argument);

// ---- work without the GIL (stop.cpp) ----------------------------------------------------
// A long call: the GIL is released while it runs and, on Python's main thread, SIGINT and
// SIGTERM become a stop request (util/stop_signals.h) that the work polls at its safe points
// (stop_requested(), or throw_if_stopped() to end it with Interrupted). When the work
// returns or fails, the signal goes on to Python's own handlers: Ctrl-C raises
// KeyboardInterrupt; SIGTERM does what Python does with it (by default, end the process).
// Other threads keep Python's handlers (Python delivers signals to its main thread only).
class StopScope {
 public:
  StopScope();
  bool stop_requested() const { return signals_ && signals_->requested(); }
  void throw_if_stopped() const {
    if (stop_requested()) throw Interrupted();
  }
  // After the work: hands a received signal on to Python (with the GIL held); raises
  // error_already_set when Python's handler raises.
  void deliver();
  // The same for a signal the engine caught itself (the trainer's, TrainSummary::signal).
  static void deliver(int signal);

 private:
  std::optional<StopSignals> signals_;
};

// Runs work(scope) with the GIL released under a StopScope; an Interrupted from it becomes
// KeyboardInterrupt.
template <typename Work>
auto without_gil(Work&& work) -> decltype(work(std::declval<const StopScope&>())) {
  StopScope scope;
  bool interrupted = false;
  using Result = decltype(work(std::declval<const StopScope&>()));
  if constexpr (std::is_void_v<Result>) {
    {
      py::gil_scoped_release release;
      try {
        work(std::as_const(scope));
      } catch (const Interrupted&) {
        interrupted = true;
      }
    }
    scope.deliver();
    if (interrupted) throw Interrupted();
  } else {
    std::optional<Result> result;
    {
      py::gil_scoped_release release;
      try {
        result.emplace(work(std::as_const(scope)));
      } catch (const Interrupted&) {
        interrupted = true;
      }
    }
    scope.deliver();
    if (interrupted) throw Interrupted();
    return std::move(*result);
  }
}

// Python's main thread (signals reach only it), recorded when the module is imported.
void record_main_thread();
bool on_main_thread();

// ---- Python callables called from code without the GIL ---------------------------------
// Holds a Python callable (or None) so that it is called, copied and released under the GIL
// from whichever thread the engine runs it on.
class PyCallable {
 public:
  PyCallable() = default;
  explicit PyCallable(py::object function);
  explicit operator bool() const { return function_ != nullptr; }
  // Calls it (taking the GIL) and drops what it returns.
  template <typename... Args>
  void operator()(Args&&... args) const {
    with([&](const py::object& f) { f(std::forward<Args>(args)...); });
  }
  // use(function) under the GIL; what use returns must not hold Python objects.
  template <typename Use>
  auto with(Use&& use) const {
    py::gil_scoped_acquire gil;
    return use(*function_);
  }

 private:
  std::shared_ptr<py::object> function_;
};

// ---- arrays (arrays.cpp) -----------------------------------------------------------------
// A numpy array over `data` (C order) that keeps `owner` alive for as long as the array or any
// view of it lives: no copy of the engine's buffer.
template <typename T, typename Owner>
py::array_t<T> array_owning(T* data, std::vector<py::ssize_t> shape, Owner owner,
                            bool writeable = true) {
  auto* held = new Owner(std::move(owner));
  py::capsule base(held, [](void* p) { delete static_cast<Owner*>(p); });
  py::array_t<T> array(std::move(shape), data, base);
  if (!writeable) array.attr("flags").attr("writeable") = false;
  return array;
}
// A new array of `shape` whose buffer the engine fills (uninitialized: pages it never writes
// are never touched).
template <typename T>
std::pair<py::array_t<T>, T*> new_array(std::vector<py::ssize_t> shape) {
  size_t n = 1;
  for (py::ssize_t s : shape) n *= size_t(s);
  std::unique_ptr<void, decltype(&std::free)> buffer(allocate_large_buffer(n * sizeof(T)),
                                                      &std::free);
  T* data = static_cast<T*>(buffer.get());
  return {array_owning(data, std::move(shape), std::move(buffer)), data};
}

// Token ids a caller passed as any integer array (or nested sequence), checked: an integer
// dtype, `dims` dimensions (1-D input counts as one row where dims is 2), every id in
// [0, limit). Viewed in place when the caller's array is C-ordered int32, else copied once.
// Errors are sps.InputError naming `argument`.
class TokenArray {
 public:
  TokenArray(const py::handle& object, const std::string& argument, int64_t limit);
  const int32_t* data() const { return data_; }
  int64_t rows() const { return rows_; }
  int64_t columns() const { return columns_; }
  bool was_1d() const { return was_1d_; }
  // Row r as a vector.
  std::vector<int32_t> row(int64_t r) const {
    return std::vector<int32_t>(data_ + r * columns_, data_ + (r + 1) * columns_);
  }

 private:
  py::array held_;  // the caller's int32 array, or the copy
  const int32_t* data_ = nullptr;
  int64_t rows_ = 0, columns_ = 0;
  bool was_1d_ = false;
};

// One 1-D id sequence (empty allowed), checked as TokenArray does.
std::vector<int32_t> token_list(const py::handle& sequence, const std::string& argument,
                                int64_t limit);
// A list of them (prompts, documents); errors name `argument`[i].
std::vector<std::vector<int32_t>> token_lists(const py::handle& sequences,
                                              const std::string& argument, int64_t limit);

// ---- the bindings ---------------------------------------------------------------------
void register_tokenizer(py::module_& m);
void register_model(py::module_& m);
void register_generation(py::module_& m);
void register_training(py::module_& m);
void register_data(py::module_& m);

}  // namespace sps::python
