// StopScope: Ctrl-C during a call that runs without the GIL.
#include <pythread.h>

#include <csignal>

#include "python/support.h"

namespace sps::python {

namespace {
unsigned long main_thread = 0;
}

void record_main_thread() {
  main_thread =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
}

bool on_main_thread() { return PyThread_get_thread_ident() == main_thread; }

StopScope::StopScope() {
  if (on_main_thread()) signals_.emplace();
}

void StopScope::deliver() {
  const int signal = signals_ ? signals_->signal() : 0;
  signals_.reset();  // Python's handlers are back
  deliver(signal);
}

void StopScope::deliver(int signal) {
  if (signal == 0) return;
  std::raise(signal);  // to Python's handler (SIGINT: KeyboardInterrupt at the next check)
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

PyCallable::PyCallable(py::object function) {
  if (function.is_none()) return;
  function_ = std::shared_ptr<py::object>(new py::object(std::move(function)), [](py::object* f) {
    py::gil_scoped_acquire gil;
    delete f;
  });
}

}  // namespace sps::python
