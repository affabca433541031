// The independent naive reference of tests/model, linked into test_eval too (its rolling
// windows are compared with the evaluator's).
#include "model/naive_model.cpp"
