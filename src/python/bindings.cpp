// memtrain._memtrain: what the Python package (memtrain/__init__.py) is built
// on. Tensors cross with torch's own converter; the GIL is released while a
// step runs, and the stages take it back for their own calls.
#include <c10/util/Exception.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/chain_json.h"
#include "core/error.h"
#include "core/units.h"
#include "data/brown_corpus.h"
#include "data/tagging_dataset.h"
#include "plan/registry.h"
#include "plan/schedule_builders.h"
#include "predict/advisor.h"
#include "predict/measurement.h"
#include "python/python_stage.h"
#include "runtime/comm/peer_watch.h"
#include "runtime/execution/input_gradient_pieces.h"
#include "runtime/input/brown_batches.h"
#include "runtime/memory/counting_allocator.h"
#include "runtime/memory/device_memory.h"
#include "runtime/memory/link_calibration.h"
#include "runtime/training/block_steps.h"
#include "runtime/training/gradient_boundary.h"
#include "runtime/training/shared_device.h"

namespace py = pybind11;

namespace memtrain::python {

using runtime::BlockSteps;
using runtime::BlockStepsOptions;
using runtime::GradientBoundary;
using runtime::StepRecord;

namespace {

// The process's device: every tensor the process allocates on the CPU is
// counted in it (the import thread, and any thread while it runs a block).
runtime::CpuDeviceMemory& device() {
  static auto* memory = new runtime::CpuDeviceMemory();  // never destroyed: tensors outlive modules
  return *memory;
}

// The memory of the device a model's blocks run on: the process's CPU
// device, or a CUDA device counted by the caching allocator's statistics,
// one per device index, made when a model on it is first wrapped.
runtime::DeviceMemory& device_memory(const std::string& name) {
  if (name == "cpu") return device();
  // By the device ("cuda:0"), whatever name asked ("cuda"), and by the names.
  static auto* devices = new std::map<std::string, std::unique_ptr<runtime::DeviceMemory>>();  // outlive tensors
  static auto* names = new std::map<std::string, runtime::DeviceMemory*>();
  runtime::DeviceMemory*& named = (*names)[name];
  if (!named) {
    std::unique_ptr<runtime::DeviceMemory> made = runtime::make_device_memory(name);
    std::unique_ptr<runtime::DeviceMemory>& memory = (*devices)[made->device().str()];
    if (!memory) memory = std::move(made);
    named = memory.get();
  }
  return *named;
}

BudgetSpec budget_of(const py::object& budget) {
  if (py::isinstance<py::bool_>(budget)) throw UsageError("budget True/False is not a budget; expected bytes or text");
  if (py::isinstance<py::int_>(budget)) {
    const long long bytes = budget.cast<long long>();
    if (bytes <= 0) throw UsageError("budget " + std::to_string(bytes) + " bytes must be positive");
    return {false, 0, static_cast<Bytes>(bytes)};
  }
  if (py::isinstance<py::str>(budget)) return parse_budget(budget.cast<std::string>(), "budget");
  throw UsageError("budget of type " + std::string(py::str(budget.get_type().attr("__name__"))) +
                   " is not a budget; expected bytes (int) or text such as '512MiB' or '50%'");
}

// The host link's rate, bytes/s: a number or text such as "25GB/s".
double bandwidth_of(const py::object& bandwidth) {
  if (py::isinstance<py::str>(bandwidth)) return parse_bandwidth(bandwidth.cast<std::string>(), "bandwidth");
  if ((py::isinstance<py::int_>(bandwidth) || py::isinstance<py::float_>(bandwidth)) &&
      !py::isinstance<py::bool_>(bandwidth)) {
    const double rate = bandwidth.cast<double>();
    if (rate > 0 && std::isfinite(rate)) return rate;
  }
  throw UsageError("bandwidth " + std::string(py::repr(bandwidth)) +
                   " is not a rate; expected bytes/s (a positive number) or text such as '25GB/s'");
}

// The schedule's operations as the CLI prints them ("Fck0", "L", "B1", ...).
std::vector<std::string> operations_of(const Schedule& schedule) {
  std::vector<std::string> ops;
  std::istringstream words(schedule.to_string());
  for (std::string op; words >> op;) ops.push_back(op);
  return ops;
}

py::dict step_dict(const StepRecord& r) {
  py::dict d;
  d["step"] = r.step;
  d["plan"] = runtime::plan_kind_name(r.plan);
  d["input_shape"] = r.signature.shape;
  d["input_size"] = r.signature.size;
  d["peak_bytes"] = r.peak_bytes;
  d["predicted_peak_bytes"] = r.predicted_peak_bytes < 0 ? py::object(py::none()) : py::int_(r.predicted_peak_bytes);
  d["budget_bytes"] = r.budget_bytes;
  d["retries"] = r.retries;
  d["replans"] = r.replans;
  d["spilled_bytes"] = r.spilled_bytes;
  d["seconds"] = r.seconds;
  d["planning_seconds"] = r.planning_seconds;
  d["blocks_seconds"] = r.blocks_seconds;
  d["synchronizations"] = r.synchronizations;
  d["schedule"] = operations_of(r.schedule);
  if (r.lease_want_bytes > 0) {
    d["lease_want_bytes"] = r.lease_want_bytes;
    d["lease_least_bytes"] = r.lease_least_bytes;
    d["lease_wait_seconds"] = r.lease_wait_seconds;
  }
  return d;
}

// What a model's steps plan with, from the Module's arguments; the host link
// measured on `memory` when a planner needs it and none is given.
BlockStepsOptions options_of(runtime::DeviceMemory& memory, const py::object& budget, const std::string& planner,
                             int collect_steps, const py::object& bandwidth, double prediction_scale,
                             bool weights_on_host) {
  BlockStepsOptions options;
  options.steps.planner = planner;
  options.budget = budget_of(budget);
  options.steps.collect_steps = collect_steps;
  options.steps.prediction_scale = prediction_scale;
  options.weights_on_host = weights_on_host;
  const auto known = plan::planner_names();  // where the weights live, BlockSteps checks
  if (std::find(known.begin(), known.end(), planner) == known.end()) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw UsageError("planner '" + planner + "' is not known; expected one of " + list);
  }
  runtime::check_step_planner_options(options.steps);
  if (!bandwidth.is_none()) {
    options.steps.device_to_host_bandwidth = options.steps.host_to_device_bandwidth = bandwidth_of(bandwidth);
  } else if (runtime::needs_host_link(plan::planner_traits(planner), weights_on_host)) {
    // As `memtrain train` does: plans that copy to the host need the
    // link's speed. A smaller probe than the CLI's: the steps' own copies refine it.
    const runtime::LinkRates link = runtime::measure_link(memory, Bytes(16) << 20, runtime::kDefaultLinkRepeats);
    options.steps.device_to_host_bandwidth = link.device_to_host;
    options.steps.host_to_device_bandwidth = link.host_to_device;
  }
  return options;
}

// Any model's blocks under a budget, stepped on the caller's thread.
class PythonBlockSteps {
 public:
  // calls[i]: what block i's forward calls with its input (the block, with
  // the rest of the arguments of its call in this step).
  PythonBlockSteps(const std::vector<py::object>& blocks, const std::vector<std::string>& names,
                   const std::vector<py::object>& calls, const py::object& budget, const std::string& planner,
                   int collect_steps, const py::object& bandwidth, double prediction_scale, const std::string& device,
                   const std::vector<torch::Tensor>& outer_parameters, const std::string& weights) {
    if (blocks.empty()) throw UsageError("the model has no blocks; expected at least one torch.nn.Module");
    MEMTRAIN_ASSERT(calls.size() == blocks.size() && names.size() == blocks.size(), "a call and a name per block");
    std::vector<std::shared_ptr<runtime::StageModule>> modules;
    std::vector<std::string> stage_names = names;
    for (size_t i = 0; i < blocks.size(); ++i) {
      stages_.push_back(std::make_shared<PythonStage>(blocks[i], names[i], calls[i]));
      modules.push_back(stages_.back());
    }
    auto boundary = std::make_shared<GradientBoundary>();
    modules.push_back(boundary);
    stage_names.push_back("after the blocks");
    if (weights != "device" && weights != "host") {
      throw UsageError("weights '" + weights + "' is not a place; expected 'device' or 'host'");
    }
    if (weights == "host" && device != "cpu") {
      throw UsageError("weights='host' runs on the cpu only for now: on " + device +
                       " the blocks' gradients would go to host memory from inside the module's backward, whose "
                       "copies memtrain.Module does not make there yet (memtrain train --weights-on host does)");
    }
    if (device != "cpu" && plan::planner_traits(planner).uses_host_link) {
      // Its copies crash on CUDA worker threads inside the module's backward
      // (a segmentation fault on an H200); `memtrain train` runs it there.
      throw UsageError("planner '" + planner + "' copies to host memory, which memtrain.Module does not do on " +
                       device + " yet; use optimal or mimose there (memtrain train --device cuda runs " + planner +
                       ")");
    }
    runtime::DeviceMemory& memory = device_memory(device);
    memory_ = &memory;
    const BlockStepsOptions options =
        options_of(memory, budget, planner, collect_steps, bandwidth, prediction_scale, weights == "host");
    steps_ = std::make_unique<BlockSteps>(runtime::StagedModel("python", stage_names, modules), boundary.get(), memory,
                                          options, outer_parameters);
  }
  BlockSteps& steps() { return *steps_; }
  runtime::DeviceMemory& memory() { return *memory_; }
  void set_call(int block, std::vector<torch::Tensor> parameters, bool input_needs_gradient) {
    if (block < 0 || block >= static_cast<int>(stages_.size())) throw UsageError("no block " + std::to_string(block));
    stages_[block]->set_call(std::move(parameters), input_needs_gradient);
  }
  // Blocks sharded by FSDP2 (gathered[i] > 0): their stages read their
  // parameters at each forward, and the steps count the gathers.
  void set_gathered_bytes(const std::vector<Bytes>& gathered, bool forward_prefetch) {
    steps_->set_gathered_bytes(gathered, forward_prefetch);
    for (size_t i = 0; i < gathered.size() && i < stages_.size(); ++i) {
      if (gathered[i] > 0) stages_[i]->read_parameters_at_each_forward();
    }
  }
  // Each step's budget leased from `member`'s group, which outlives the steps.
  void lease_from(std::shared_ptr<runtime::SharedDevice> member, Bytes group_budget) {
    steps_->lease_from(*member, group_budget);
    member_ = std::move(member);
  }
  // Its last lease shrinks back to what is live: steps planned afresh lease from here on.
  void end_lease() { steps_->end_lease(); }
  // The job is done: its last lease shrinks back, and it leaves the group finished.
  void leave_group() {
    steps_->end_lease();
    if (member_) member_->finish();
  }
  void enter_host_memory() { host_scopes_.push_back(std::make_unique<runtime::PoolScope>(&memory_->host())); }
  void leave_host_memory() {
    MEMTRAIN_ASSERT(!host_scopes_.empty(), "host memory is left as often as it is entered");
    host_scopes_.pop_back();
  }

 private:
  std::vector<std::unique_ptr<runtime::PoolScope>> host_scopes_;  // enter_host_memory()'s, innermost last
  std::vector<std::shared_ptr<PythonStage>> stages_;
  runtime::DeviceMemory* memory_;
  std::shared_ptr<runtime::SharedDevice> member_;  // destroyed after steps_, which settle their lease
  std::unique_ptr<BlockSteps> steps_;
};

py::dict group_state_dict(const jobs::GroupState& g) {
  py::dict d;
  d["budget_bytes"] = g.budget < 0 ? py::object(py::none()) : py::int_(g.budget);
  d["live_bytes"] = g.live;
  d["max_live_bytes"] = g.max_live;
  d["refusals"] = g.refusals;
  d["refused"] = g.refused.empty() ? py::object(py::none()) : py::str(g.refused);
  py::list members;
  for (const jobs::MemberState& j : g.members) {
    py::dict e;
    static const char* const kStatus[] = {"joined", "finished", "gone"};
    e["pid"] = j.pid;
    e["label"] = j.label;
    e["status"] = kStatus[j.status];
    e["live_bytes"] = j.live;
    e["peak_bytes"] = j.peak;
    e["lease_bytes"] = j.lease;
    e["reference_bytes"] = j.reference;
    e["least_bytes"] = j.least_largest;
    e["steps"] = j.steps;
    e["wait_seconds"] = j.wait_seconds;
    e["reclaimed_bytes"] = j.reclaimed;
    members.append(e);
  }
  d["members"] = members;
  return d;
}

// A job group hosted by this process (memtrain.JobGroup); close() removes it.
class HostedGroup {
 public:
  HostedGroup(const std::string& name, const py::object& budget, const std::string& policy, int jobs,
              const std::string& device) {
    if (jobs < 1 || jobs > memtrain::jobs::kMaxJobs) {
      throw UsageError("jobs " + std::to_string(jobs) +
                       " is out of range; expected the processes that start with "
                       "the group, 1.." +
                       std::to_string(memtrain::jobs::kMaxJobs));
    }
    memtrain::jobs::GroupSettings settings;
    settings.name = name;
    settings.policy = memtrain::jobs::parse_policy(policy);
    settings.device = device;
    settings.budget = budget_of(budget);
    settings.expected_jobs = jobs;
    group_ = memtrain::jobs::JobGroup::create(settings);
  }
  memtrain::jobs::JobGroup& group() {
    if (!group_) throw UsageError("the job group is closed");
    return *group_;
  }
  void close() { group_.reset(); }

 private:
  std::unique_ptr<memtrain::jobs::JobGroup> group_;
};

// While a member waits for its group's starting jobs: Ctrl-C stops it, and
// after a few seconds the caller is told what it waits for, once.
jobs::StartWait waiting_for_the_group(const std::string& name) {
  return [name, told = false](int calibrated, int expected, Seconds waited) mutable {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!told && waited >= 5) {
      told = true;
      const std::string message = "memtrain: job group " + name + " starts when its " + std::to_string(expected) +
                                  " starting jobs have measured their samples; " + std::to_string(calibrated) +
                                  " have after " + format_number("%.0f", waited) +
                                  " s. Start the others, or host the group for fewer (memtrain.JobGroup's "
                                  "jobs=, memtrain jobs --expect)";
      if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) != 0) throw py::error_already_set();
    }
    return true;
  };
}

// Several processes on one device, one budget: a group hosted here, and this process's membership of one.
void define_job_groups(py::module_& m) {
  m.attr("MAX_JOBS") = memtrain::jobs::kMaxJobs;  // in one group
  py::class_<HostedGroup>(m, "HostedJobGroup")
      .def(py::init<const std::string&, const py::object&, const std::string&, int, const std::string&>(),
           py::arg("name"), py::arg("budget"), py::arg("policy"), py::arg("jobs"), py::arg("device"))
      .def("state",
           [](HostedGroup& h) {
             h.group().reap();  // members whose process ended give their bytes back
             return group_state_dict(h.group().state());
           })
      .def("close", &HostedGroup::close);
  py::class_<runtime::SharedDevice, std::shared_ptr<runtime::SharedDevice>>(m, "JobMember")
      .def(py::init([](const std::string& name, const std::string& device, const std::string& label, double timeout) {
             runtime::DeviceMemory& memory = device_memory(device);
             std::shared_ptr<runtime::SharedDevice> member;
             {
               py::gil_scoped_release no_gil;  // waiting for the group to appear
               member = std::make_shared<runtime::SharedDevice>(name, memory, label, timeout);
             }
             member->set_start_wait(waiting_for_the_group(name));
             return member;
           }),
           py::arg("name"), py::arg("device"), py::arg("label"), py::arg("timeout"))
      .def("begin_calibration",
           [](runtime::SharedDevice& d) {
             py::gil_scoped_release no_gil;  // waiting for this job's turn
             d.begin_calibration();
           })
      .def("check_planner", &runtime::SharedDevice::check_planner)
      .def("finish", &runtime::SharedDevice::finish)
      .def_property_readonly("name", &runtime::SharedDevice::group_name)
      .def("state", [](runtime::SharedDevice& d) { return group_state_dict(d.state()); });
}

py::dict plan_dict(const Plan& p, const Chain& chain) {
  py::dict d;
  d["feasible"] = p.feasible;
  d["planner"] = p.planner;
  d["peak_bytes"] = p.peak_bytes;
  d["time_seconds"] = p.time;
  d["schedule"] = operations_of(p.schedule);
  d["recomputed_forwards"] = p.schedule.recomputed_forwards(chain.size());
  d["note"] = p.note;
  return d;
}

// Plans `chain` for `budget`; N% is of the chain's peak with everything kept.
py::dict plan_chain(const Chain& chain, const py::object& budget, const std::string& planner) {
  const BudgetSpec spec = budget_of(budget);
  const Bytes reference = plan::keep_everything_peak(chain);
  const Bytes bytes = spec.resolve(reference);
  const auto p = plan::make_planner(planner)->plan({chain, bytes, &chain});
  if (!p.feasible) {
    throw below_least(bytes, p.min_budget_bytes, planner, "this chain");
  }
  py::dict d = plan_dict(p, chain);
  d["budget_bytes"] = bytes;
  d["unconstrained_peak_bytes"] = reference;
  return d;
}

// The Brown corpus as the CLI trains on it: word ids [B, T] and tags [B, T]
// (-100 at padding, cross_entropy's default ignore_index), batches of
// sentences of similar length in a seeded order.
class BrownData {
 public:
  BrownData(std::int64_t batch_size, std::uint64_t seed, std::int64_t vocabulary, const std::string& directory) {
    if (batch_size < 1) throw UsageError("batch size " + std::to_string(batch_size) + " must be >= 1");
    const data::BrownCorpus corpus = data::read_brown_corpus(data::find_brown_directory(directory));
    auto dataset = std::make_shared<data::TaggingDataset>(data::make_tagging_dataset(corpus, vocabulary));
    batches_ = std::make_unique<runtime::BrownBatches>(std::move(dataset), batch_size, seed);
  }
  py::tuple next() { return pair(batches_->next(torch::kCPU)); }
  py::tuple largest() { return pair(batches_->largest(torch::kCPU)); }
  std::int64_t words() const { return static_cast<std::int64_t>(batches_->dataset().words.size()); }
  std::int64_t tags() const { return static_cast<std::int64_t>(batches_->dataset().tags.size()); }
  std::int64_t epoch() const { return batches_->epoch(); }

 private:
  static py::tuple pair(const runtime::Batch& b) { return py::make_tuple(b.input, b.targets); }
  std::unique_ptr<runtime::BrownBatches> batches_;
};

// memtrain.advise's answer: the advisor's pick among measured methods.
py::dict advise(const std::vector<std::tuple<std::string, std::int64_t, Bytes, double>>& rows, const py::object& memory,
                double headroom) {
  std::vector<predict::Measurement> measurements;
  for (const auto& [method, batch, peak, seconds] : rows) measurements.push_back({method, batch, peak, seconds});
  predict::AdvisorOptions options;
  const BudgetSpec spec = budget_of(memory);
  if (spec.is_percent) throw UsageError("device memory must be bytes or text such as '16GiB', not a percentage");
  options.device_memory = spec.bytes;
  options.headroom = headroom;
  const predict::Advice a = predict::advise_from_measurements(measurements, options);
  py::dict d;
  d["device_memory"] = a.device_memory;
  d["usable_bytes"] = a.usable_bytes;
  d["recommended"] = a.recommended;
  d["reason"] = a.reason;
  py::list methods;
  for (const auto& mth : a.methods) {
    py::dict md;
    md["method"] = mth.method;
    md["max_batch"] = mth.max_batch;
    md["best_batch"] = mth.best_batch;
    md["predicted_peak_bytes"] = mth.predicted_peak_bytes;
    md["predicted_throughput"] = mth.predicted_throughput;
    md["note"] = mth.note;
    methods.append(md);
  }
  d["methods"] = methods;
  return d;
}

// memtrain.Error and its kinds, and the translation of memtrain's exceptions to them.
void define_errors(py::module_& m) {
  // Errors: memtrain.Error is a RuntimeError; a usage error is a ValueError
  // too; Infeasible carries the least budget.
  static py::handle error = PyErr_NewException("memtrain.Error", PyExc_RuntimeError, nullptr);
  static py::handle usage = PyErr_NewException(
      "memtrain.UsageError", py::make_tuple(error, py::handle(PyExc_ValueError)).release().ptr(), nullptr);
  static py::handle out_of_budget = PyErr_NewException("memtrain.OutOfBudget", error.ptr(), nullptr);
  static py::handle infeasible = PyErr_NewException("memtrain.Infeasible", error.ptr(), nullptr);
  m.attr("RankFailure") = py::handle(PyErr_NewException("memtrain.RankFailure", error.ptr(), nullptr));
  m.attr("Error") = error;
  m.attr("UsageError") = usage;
  m.attr("OutOfBudget") = out_of_budget;
  m.attr("Infeasible") = infeasible;
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      // memtrain's error as the Python class of its most derived type.
      if (const auto* least = dynamic_cast<const Infeasible*>(&e)) {
        py::object instance = py::reinterpret_borrow<py::object>(infeasible)(e.what());
        instance.attr("min_bytes") = least->min_bytes();
        PyErr_SetObject(infeasible.ptr(), instance.ptr());
      } else {
        const bool ran_out = dynamic_cast<const OutOfBudget*>(&e) != nullptr;
        const bool misused = dynamic_cast<const UsageError*>(&e) != nullptr;
        PyErr_SetString((ran_out ? out_of_budget : misused ? usage : error).ptr(), e.what());
      }
    } catch (python_error& e) {
      // A Python exception raised where LibTorch ran Python (a hook in a
      // block's backward): the caller gets it as raised, Ctrl-C included.
      e.restore();
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });
}

// What the process's devices hold, and the planners' names.
void define_memory(py::module_& m) {
  // From now on this thread's tensors count against `device`, as the
  // importing thread's do: a Module made or stepped on a worker thread
  // keeps its budget there.
  m.def("count_this_thread", [](const std::string& device) {
    runtime::DeviceMemory& memory = device_memory(device);
    if (memory.counts_this_thread()) return;
    thread_local std::vector<std::unique_ptr<runtime::DeviceScope>> scopes;
    scopes.push_back(memory.activate());
  });
  // The executor measures each operation's peak by resetting the device's;
  // the device keeps the peaks it reset (DeviceMemory::process_peak).
  m.def(
      "memory_stats",
      [](const std::string& name) {
        const runtime::DeviceMemory& memory = device_memory(name);
        py::dict d;
        d["live_bytes"] = memory.live();
        d["peak_bytes"] = memory.process_peak();
        d["reserved_peak_bytes"] = memory.process_reserved_peak();
        return d;
      },
      py::arg("device") = "cpu",
      "Bytes of the device's tensors alive now, and at most since the last reset_peak(device) (on CUDA, "
      "allocated and reserved by the caching allocator, whose own peak statistics memtrain resets as it "
      "measures).");
  m.def(
      "reset_peak", [](const std::string& name) { device_memory(name).reset_process_peak(); },
      py::arg("device") = "cpu", "Starts the peaks of memory_stats(device) again from what is live now.");
  m.def("format_bytes", &format_bytes, py::arg("bytes"), "Bytes as memtrain's messages write them (\"32.1 MiB\").");
  m.def("loops_own_bytes", &runtime::loops_own_bytes, py::arg("bytes"),
        "The room for a loop's own small tensors above `bytes` resident, or free of a budget of `bytes`.");
  m.def("planner_names", &plan::planner_names);  // swap-naive with weights="host" only
  m.def(
      "parse_bytes", [](const std::string& text) { return parse_bytes(text, "budget"); },
      "Bytes in text such as '512MiB'.");
}

// The peers' board on a Python object with torch.distributed's Store
// methods (check, get, set, add); called from any thread.
class PythonPeerBoard : public runtime::PeerBoard {
 public:
  explicit PythonPeerBoard(py::object store) : store_(std::move(store)) {}
  ~PythonPeerBoard() override {
    py::gil_scoped_acquire gil;
    store_ = py::object();
  }
  bool has(const std::string& key) override {
    py::gil_scoped_acquire gil;
    return store_.attr("check")(py::make_tuple(key)).cast<bool>();
  }
  std::string read(const std::string& key) override {
    py::gil_scoped_acquire gil;
    return store_.attr("get")(key).cast<std::string>();
  }
  void write(const std::string& key, const std::string& value) override {
    py::gil_scoped_acquire gil;
    store_.attr("set")(key, py::bytes(value));
  }
  void add(const std::string& key, std::int64_t amount) override {
    py::gil_scoped_acquire gil;
    store_.attr("add")(key, amount);
  }

 private:
  py::object store_;
};

// A rank's watch over its peers (runtime::PeerWatch) on a Python store.
struct PythonPeerWatch {
  PythonPeerBoard board;
  runtime::PeerWatch watch;
  PythonPeerWatch(py::object store, int rank, int world) : board(std::move(store)), watch(rank, world, "block call") {
    if (world < 1 || rank < 0 || rank >= world) {
      throw UsageError("rank " + std::to_string(rank) + " of a world of " + std::to_string(world) +
                       " is out of range; expected 0.." + std::to_string(world - 1));
    }
  }
};

// How memtrain.Module names the rank that failed under torch.distributed.
void define_peers(py::module_& m) {
  py::class_<PythonPeerWatch>(m, "PeerWatch")
      .def(py::init<py::object, int, int>(), py::arg("store"), py::arg("rank"), py::arg("world"))
      .def_property_readonly_static("beat_seconds",
                                    [](py::object) { return runtime::PeerWatch::kBeatPeriod.count() / 1000.0; })
      .def("arrive", [](PythonPeerWatch& w) { w.watch.arrive(w.board); })
      .def(
          "beat", [](PythonPeerWatch& w, std::int64_t progress) { w.watch.beat(w.board, progress); },
          py::call_guard<py::gil_scoped_release>())
      .def("give_up", [](PythonPeerWatch& w, const std::string& why) { w.watch.give_up(w.board, why); })
      .def(
          "blame",
          [](PythonPeerWatch& w, const std::string& failed, const std::string& transport, std::int64_t progress,
             double timeout) {
            const runtime::RankFailure f = w.watch.blame(w.board, failed, transport, progress, timeout);
            return std::make_pair(f.blamed_rank(), std::string(f.what()));
          },
          py::call_guard<py::gil_scoped_release>(),
          "(blamed rank or -1, the message): who failed this rank's collective, read from the peers' board.");
}

// Where a block's input takes its gradient from, held without keeping the
// caller's graph alive.
struct InputEdge {
  std::weak_ptr<torch::autograd::Node> function;
  std::uint32_t input_nr = 0;
};

using BlockStepsClass = py::class_<PythonBlockSteps, std::shared_ptr<PythonBlockSteps>>;

// A tensor's gradient edge, held weakly, asked inside a backward.
void define_input_edge(py::module_& m) {
  py::class_<InputEdge>(m, "InputEdge")
      .def(py::init([](const torch::Tensor& x) {
             const torch::autograd::Edge edge = torch::autograd::impl::gradient_edge(x);
             return InputEdge{edge.function, edge.input_nr};
           }),
           py::arg("input"))
      .def(
          "added_to_by_others",
          [](const InputEdge& e) {
            const std::shared_ptr<torch::autograd::Node> function = e.function.lock();
            return function && runtime::others_add_to(torch::autograd::Edge(function, e.input_nr));
          },
          "Inside a backward: whether a node besides the one running adds to the input's gradient.");
}

// Calibration, the budget and its device, the share reference and the lease.
void define_measuring_and_budget(BlockStepsClass& steps) {
  steps.def("begin_calibration", [](PythonBlockSteps& r) { return r.steps().begin_calibration(); })
      .def("calibration_round", [](PythonBlockSteps& r, int round) { r.steps().calibration_round(round); })
      .def("observe_output_bytes", [](PythonBlockSteps& r, Bytes bytes) { r.steps().observe_output_bytes(bytes); })
      .def("note_previous_output", [](PythonBlockSteps& r, Bytes bytes) { r.steps().note_previous_output(bytes); })
      .def_property(
          "output_held", [](PythonBlockSteps& r) { return r.steps().output_held(); },
          [](PythonBlockSteps& r, bool held) { r.steps().set_output_held(held); })
      .def("end_of_backward", [](PythonBlockSteps& r) { r.steps().end_of_backward(); })
      .def(
          "observe_optimizer",
          [](PythonBlockSteps& r, Bytes state_bytes, Bytes update_temp_bytes, Bytes host_state_bytes) {
            r.steps().observe_optimizer(state_bytes, update_temp_bytes, host_state_bytes);
          },
          py::arg("state_bytes"), py::arg("update_temp_bytes"), py::arg("host_state_bytes") = 0)
      .def("end_calibration", [](PythonBlockSteps& r) { r.steps().end_calibration(); })
      .def(
          "count_optimizer",
          [](PythonBlockSteps& r, Bytes state_bytes, Bytes update_temp_bytes, Bytes host_state_bytes) {
            r.steps().count_optimizer(state_bytes, update_temp_bytes, host_state_bytes);
          },
          py::arg("state_bytes"), py::arg("update_temp_bytes"), py::arg("host_state_bytes") = 0)
      .def("share_reference", [](PythonBlockSteps& r) { return r.steps().share_reference(); })
      .def("carry_share_reference",
           [](PythonBlockSteps& r, const BlockSteps::ShareReference& carried) {
             r.steps().carry_share_reference(carried);
           })
      .def("last_step",
           [](PythonBlockSteps& r) -> py::object {
             if (r.steps().last_step().step == 0) return py::none();
             return step_dict(r.steps().last_step());
           })
      .def_property_readonly("budget_bytes", [](PythonBlockSteps& r) { return r.steps().budget_bytes(); })
      .def("set_budget", [](PythonBlockSteps& r, const py::object& budget) { r.steps().set_budget(budget_of(budget)); })
      // The blocks' device, as the budget counts it.
      .def("live_bytes", [](PythonBlockSteps& r) { return r.memory().live(); })
      .def("peak_bytes", [](PythonBlockSteps& r) { return r.memory().peak(); })
      .def("reset_peak", [](PythonBlockSteps& r) { r.memory().reset_peak(); })
      .def("refusals", [](PythonBlockSteps& r) { return r.memory().refusals(); })

      // A copy of `t` in host memory, outside the budget (the CPU build's
      // separately counted host pool): what a micro-step may have to restore.
      .def("host_copy",
           [](PythonBlockSteps& r, const torch::Tensor& t) {
             if (t.device().is_cpu()) {
               runtime::PoolScope host(&r.memory().host());
               return t.clone();
             }
             return t.to(torch::kCPU);
           })
      // Between these, this thread's new tensors are made in host memory,
      // outside the budget: the caller's updates of weights kept there.
      .def("enter_host_memory", [](PythonBlockSteps& r) { r.enter_host_memory(); })
      .def("leave_host_memory", [](PythonBlockSteps& r) { r.leave_host_memory(); })
      .def_property_readonly("planner", [](PythonBlockSteps& r) { return r.steps().planner().name(); })
      .def("largest_chain", [](PythonBlockSteps& r) { return r.steps().largest_chain(); })
      .def("calibrated_for_lease",
           [](PythonBlockSteps& r, const std::shared_ptr<runtime::SharedDevice>& member) {
             py::gil_scoped_release no_gil;  // waiting for the group to start
             return r.steps().calibrated_for_lease(*member);
           })
      .def("lease_from", &PythonBlockSteps::lease_from, py::arg("member"), py::arg("group_budget"))
      .def("end_lease", &PythonBlockSteps::end_lease)
      .def("leave_group", &PythonBlockSteps::leave_group);
}

// The blocks' steps that memtrain.Module drives.
void define_block_steps(py::module_& m) {
  define_input_edge(m);
  // What an N% budget is of, carried from blocks planned before to those planned afresh; opaque to Python.
  py::class_<BlockSteps::ShareReference>(m, "ShareReference");
  m.attr("MAX_COLLECT_STEPS") = runtime::kMaxCollectSteps;  // StepPlannerOptions::collect_steps' most
  BlockStepsClass steps(m, "BlockSteps");
  steps
      .def(py::init<const std::vector<py::object>&, const std::vector<std::string>&, const std::vector<py::object>&,
                    const py::object&, const std::string&, int, const py::object&, double, const std::string&,
                    const std::vector<torch::Tensor>&, const std::string&>(),
           py::arg("blocks"), py::arg("names"), py::arg("calls"), py::arg("budget"), py::arg("planner"),
           py::arg("collect_steps"), py::arg("bandwidth") = py::none(), py::arg("prediction_scale") = 1.0,
           py::arg("device") = "cpu", py::arg("outer_parameters") = std::vector<torch::Tensor>{},
           py::arg("weights") = "device")
      // Without the GIL: the planned backward runs on torch's autograd engine,
      // which refuses a caller holding it; a block takes it for its own call.
      // `parameters`: the block's at this call, whose gradients its backward hands back.
      .def("forward",
           [](PythonBlockSteps& r, int block, const torch::Tensor& x, std::vector<torch::Tensor> parameters,
              bool input_needs_gradient) {
             r.set_call(block, std::move(parameters), input_needs_gradient);
             py::gil_scoped_release no_gil;
             return r.steps().forward(block, x);
           })
      .def(
          "backward",
          // Returns the block's input's gradient, the leaves its graph
          // reached and their gradients (None where none arrived), the
          // input's gradient in pieces where `in_pieces` asked for them
          // (the first is then None), and how many uses the input has.
          [](PythonBlockSteps& r, long step, int block, const torch::Tensor& dy, const py::list& extra,
             bool in_pieces) {
            std::vector<torch::Tensor> extra_grads;  // of the block's other results; None: none arrived
            for (const py::handle g : extra)
              extra_grads.push_back(g.is_none() ? torch::Tensor() : g.cast<torch::Tensor>());
            torch::Tensor dx;
            runtime::StepContext::TakenGradients taken;
            {
              py::gil_scoped_release no_gil;
              dx = r.steps().backward(step, block, dy, std::move(extra_grads), in_pieces);
              taken = r.steps().block_gradients();
            }
            return py::make_tuple(dx, taken.leaves, taken.gradients, taken.input_pieces, taken.input_uses);
          },
          py::arg("step"), py::arg("block"), py::arg("dy"), py::arg("extra"), py::arg("in_pieces") = false)
      .def("set_gathered_bytes", [](PythonBlockSteps& r, const std::vector<Bytes>& gathered,
                                    bool forward_prefetch) { r.set_gathered_bytes(gathered, forward_prefetch); })
      .def("cancel", [](PythonBlockSteps& r) { r.steps().cancel(); })
      .def("abandon", [](PythonBlockSteps& r, long step) { r.steps().abandon(step); })
      .def("admit_optimizer",
           [](PythonBlockSteps& r, Bytes state_bytes, Bytes update_temp_bytes) {
             r.steps().admit_optimizer(state_bytes, update_temp_bytes);
           })
      .def("runs_again", [](PythonBlockSteps& r, long step, int block) { return r.steps().runs_again(step, block); })
      .def("resume_input",
           [](PythonBlockSteps& r, long step, const torch::Tensor& x) { r.steps().resume_input(step, x); })
      .def_property_readonly("step", [](PythonBlockSteps& r) { return r.steps().step(); })
      .def_property_readonly("steps_begun", [](PythonBlockSteps& r) { return r.steps().steps_begun(); })
      .def("begin_elastic", [](PythonBlockSteps& r, Bytes least) { r.steps().begin_elastic(least); })
      .def("count_steps_run_again", [](PythonBlockSteps& r, long steps) { r.steps().count_steps_run_again(steps); });
  define_measuring_and_budget(steps);
}

// Chains to plan, the Brown corpus's batches, planning and advice.
void define_chains_and_data(py::module_& m) {
  py::class_<Chain>(m, "Chain")
      .def_static(
          "from_json",
          [](const std::string& text) {
            nlohmann::json j;
            try {
              j = nlohmann::json::parse(text);
            } catch (const nlohmann::json::parse_error& e) {
              throw UsageError(std::string("chain: not JSON: ") + e.what());
            }
            return chain_from_json(j, "chain");
          },
          py::arg("text"), "A chain from the CLI's chain format (docs/chain-format.md).")
      .def_static("from_file", &read_chain_file, py::arg("path"))
      .def(
          "to_json", [](const Chain& c) { return chain_to_json(c).dump(2); }, "The CLI's chain format.")
      .def("__len__", &Chain::size)
      .def_property_readonly("stage_names",
                             [](const Chain& c) {
                               std::vector<std::string> names;
                               for (const auto& s : c.stages) names.push_back(s.name);
                               return names;
                             })
      .def_property_readonly("persistent_bytes", &Chain::persistent_bytes)
      .def("__repr__", [](const Chain& c) { return "<memtrain.Chain of " + std::to_string(c.size()) + " stages>"; });

  py::class_<BrownData>(m, "BrownBatches")
      .def(py::init<std::int64_t, std::uint64_t, std::int64_t, const std::string&>(), py::arg("batch_size"),
           py::arg("seed") = 1, py::arg("vocabulary") = 10000, py::arg("directory") = "")
      .def("next", &BrownData::next, "The next batch: (word ids [B, T], tags [B, T]).")
      .def("largest", &BrownData::largest, "The batch of the longest sentences.")
      .def_property_readonly("words", &BrownData::words)
      .def_property_readonly("tags", &BrownData::tags)
      .def_property_readonly("epoch", &BrownData::epoch);

  m.def("plan_chain", &plan_chain, py::arg("chain"), py::arg("budget"), py::arg("planner") = "optimal");
  m.def("advise", &advise, py::arg("measurements"), py::arg("device_memory"), py::arg("headroom") = 0.10);
}

}  // namespace

}  // namespace memtrain::python

PYBIND11_MODULE(_memtrain, m) {
  using namespace memtrain::python;
  m.doc() = "memtrain's native core; import memtrain instead";
  define_errors(m);
  // Tensors the process allocates from here on, on this thread, are counted.
  static auto scope = device().activate();

  define_memory(m);
  define_job_groups(m);
  define_block_steps(m);
  define_peers(m);
  define_chains_and_data(m);
}
