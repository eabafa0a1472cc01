// A stage that is a Python torch.nn.Module: the executor calls it like any
// other stage, taking the GIL for the call. Its parameters and buffers are
// registered on the C++ side too (the same tensors), so the planners see
// their bytes; names are the Python ones with '.' written as '_'.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "runtime/model/stage_module.h"

namespace memtrain::python {

class PythonStage : public runtime::StageModule {
 public:
  // `module` must be a torch.nn.Module; `name` says which stage it is in errors.
  PythonStage(pybind11::object module, std::string name);
  ~PythonStage() override;

  torch::Tensor forward(const torch::Tensor& input, runtime::StepContext& ctx) override;

 private:
  pybind11::object module_;  // touched only with the GIL held
  std::string name_;
  bool has_buffers_ = false;
};

}  // namespace memtrain::python
