// The compiled part of the Python package `sps` (python/sps/, docs/python.md): the
// engine's workflows on numpy arrays, each long call without the GIL.
#include "python/support.h"

PYBIND11_MODULE(_sps, m) {
  m.doc() = "sps engine bindings; use the package sps (python/sps/__init__.py)";
  sps::python::record_main_thread();
  sps::python::register_errors(m);
  sps::python::register_tokenizer(m);
  sps::python::register_model(m);
  sps::python::register_generation(m);
  sps::python::register_training(m);
  sps::python::register_data(m);
}
