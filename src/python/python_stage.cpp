#include "python/python_stage.h"

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "runtime/memory/counting_allocator.h"

namespace py = pybind11;

namespace memtrain::python {

namespace {

std::string cpp_name(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

}  // namespace

PythonStage::PythonStage(py::object module, std::string name, py::object call)
    : module_(std::move(module)), call_(std::move(call)), name_(std::move(name)) {
  read_parameters();
  for (const auto& item : module_.attr("named_buffers")()) {
    const auto pair = item.cast<py::tuple>();
    if (pair[1].is_none()) continue;
    register_buffer(cpp_name(pair[0].cast<std::string>()), pair[1].cast<torch::Tensor>());
    has_buffers_ = true;
  }
  const py::object offering = !call_.is_none() && py::hasattr(call_, "memtrain_variants") ? call_ : py::object(module_);
  if (py::hasattr(offering, "memtrain_variants")) {
    const py::object variants = offering.attr("memtrain_variants");
    if (!py::isinstance<py::dict>(variants)) {
      throw UsageError("stage " + name_ + ": memtrain_variants is a " +
                       std::string(py::str(variants.get_type().attr("__name__"))) +
                       "; expected a dict from a variant's name to a callable");
    }
    for (const auto& item : variants.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first) || !PyCallable_Check(item.second.ptr())) {
        throw UsageError("stage " + name_ + ": memtrain_variants entry " + std::string(py::repr(item.first)) +
                         " is not a name and a callable");
      }
      variant_names_.push_back(item.first.cast<std::string>());
      variants_.push_back(py::reinterpret_borrow<py::object>(item.second));
    }
  }
}

void PythonStage::read_parameters() {
  for (const auto& item : module_.attr("named_parameters")()) {
    const auto pair = item.cast<py::tuple>();
    // A shard (FSDP2's between calls) counts its own bytes, not the whole weight's.
    const py::object value =
        py::hasattr(pair[1], "_local_tensor") ? py::object(pair[1].attr("_local_tensor")) : py::object(pair[1]);
    const torch::Tensor p = value.cast<torch::Tensor>();
    const std::string name = cpp_name(pair[0].cast<std::string>());
    if (parameters_.contains(name)) {
      parameters_[name] = p;
    } else {
      register_parameter(name, p, p.requires_grad());
    }
  }
}

PythonStage::~PythonStage() {
  // The last reference may go on a thread without the GIL.
  py::gil_scoped_acquire gil;
  module_ = py::object();
  call_ = py::object();
  variants_.clear();
}

torch::Tensor PythonStage::forward(const torch::Tensor& input, runtime::StepContext& ctx) {
  // A stage that runs again within a step must leave its buffers (batch-norm
  // statistics) as the first run left them: Python modules do not know
  // StepContext::update_buffers, so the values are put back afterwards.
  std::vector<torch::Tensor> kept;
  if (!ctx.update_buffers && has_buffers_) {
    torch::NoGradGuard no_grad;
    for (const torch::Tensor& b : buffers()) kept.push_back(b.clone());
  }
  torch::Tensor out;
  {
    py::gil_scoped_acquire gil;
    const long refusals = runtime::refusals_on_this_thread();
    py::object result;
    if (fully_sharded_) read_parameters();
    try {
      if (ctx.variant != 0) {
        result = variants_.at(ctx.variant - 1)(input);
      } else {
        result = call_.is_none() ? module_(input) : call_(input);
      }
    } catch (py::error_already_set&) {
      // Out of budget inside the stage reaches here as a Python RuntimeError;
      // the executor and its retries must see it as what it is.
      if (runtime::refusals_on_this_thread() != refusals) throw *runtime::last_refusal_on_this_thread();
      throw;
    }
    if (!THPVariable_Check(result.ptr())) {
      throw Error("stage " + name_ + " returned a " + std::string(py::str(result.get_type().attr("__name__"))) +
                  "; a stage must return one tensor");
    }
    out = result.cast<torch::Tensor>();
    extra_outputs_.clear();
    if (!call_.is_none() && py::hasattr(call_, "extras")) {
      extra_outputs_ = call_.attr("extras").cast<std::vector<torch::Tensor>>();
      call_.attr("extras") = py::list();  // the executor keeps them as long as the run's graph
    }
  }
  if (!kept.empty()) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> live = buffers();
    // Through variable_data(), which has a version counter of its own: the
    // run's autograd saved the buffers (batch norm does), and putting their
    // values back must not look like a change to what it saved.
    for (size_t i = 0; i < live.size(); ++i) live[i].variable_data().copy_(kept[i]);
  }
  return out;
}

}  // namespace memtrain::python
