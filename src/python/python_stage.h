// A stage that is a Python torch.nn.Module: the executor calls it like any
// other stage, taking the GIL for the call. Its parameters and buffers are
// registered on the C++ side too (the same tensors), so the planners see
// their bytes; names are the Python ones with '.' written as '_'.
//
// A module offers operator variants through an attribute
// `memtrain_variants`: a dict from a variant's name to a callable that
// computes what the module's forward computes, from the same parameters,
// keeping less for the backward (for instance by checkpointing inside).
// A `call` with that attribute offers its own instead (the variants
// memtrain derives for a block that offers none).
//
// A module sharded by FSDP2 (fully_shard) has its parameters swapped by its
// own hooks: its shards between calls, the gathered weights while it runs.
// Its stage reads them again at each forward (read_parameters_at_each_forward),
// so that the backward takes the gradients of the weights the forward used.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "runtime/model/stage_module.h"

namespace memtrain::python {

class PythonStage : public runtime::StageModule {
 public:
  // `module` must be a torch.nn.Module; `name` says which stage it is in
  // errors. `call`, when not None, is what a forward calls with the input
  // instead of `module` (a block's call with the rest of its arguments).
  PythonStage(pybind11::object module, std::string name, pybind11::object call = pybind11::none());
  ~PythonStage() override;

  torch::Tensor forward(const torch::Tensor& input, runtime::StepContext& ctx) override;
  std::vector<std::string> variant_names() const override { return variant_names_; }
  // The module's hooks swap its parameters (FSDP2): read them at each forward.
  void read_parameters_at_each_forward() { fully_sharded_ = true; }
  // The parameters of the module's call in this step (those of a
  // functional_call, an adapter added after wrapping): its backward hands
  // their gradients back.
  // Whether the call's input needs a gradient: not where nothing before
  // the block trains.
  void set_call(std::vector<torch::Tensor> parameters, bool input_needs_gradient) {
    call_parameters_ = std::move(parameters);
    input_needs_gradient_ = input_needs_gradient;
  }
  std::vector<torch::Tensor> gradient_leaves() override { return call_parameters_; }
  bool input_needs_gradient() const override { return input_needs_gradient_; }
  // The call's `extras` after its last run: the block's other results.
  std::vector<torch::Tensor> extra_outputs() override { return std::move(extra_outputs_); }

 private:
  // Registers the module's parameters (again), under their C++ names.
  void read_parameters();

  pybind11::object module_;                 // touched only with the GIL held
  pybind11::object call_;                   // None: module_ itself
  std::vector<pybind11::object> variants_;  // variant i + 1's callable
  std::vector<std::string> variant_names_;
  std::string name_;
  bool has_buffers_ = false;
  bool fully_sharded_ = false;  // read_parameters_at_each_forward()
  std::vector<torch::Tensor> call_parameters_;
  bool input_needs_gradient_ = true;
  std::vector<torch::Tensor> extra_outputs_;
};

}  // namespace memtrain::python
