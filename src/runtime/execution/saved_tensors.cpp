#include "runtime/execution/saved_tensors.h"

#include <mutex>
#include <unordered_map>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/saved_variable_hooks.h>
#include <torch/torch.h>

#include "core/error.h"

namespace memtrain::runtime {

struct SavedTensors::Slot {
  torch::Tensor device;  // the saved tensor, while it is on the device
  // Its layout while in host memory, to rebuild it on the storage brought back.
  std::vector<std::int64_t> sizes, strides;
  std::int64_t offset = 0;
  caffe2::TypeMeta dtype;
};

struct SavedTensors::Group {
  torch::Tensor source;  // the whole device storage as bytes, until released
  torch::Tensor host;    // its copy in host memory, until the copy back has arrived
  std::vector<Slot*> slots;
};

namespace {

thread_local SavedTensors* capturing = nullptr;

// One saved tensor's hooks: pack keeps it (detached: a saved output must not
// hold its own grad_fn), unpack hands back whatever the slot holds by then.
// Autograd drops the hooks once the node that saved it has run its
// backward; the tensor goes with them, as it would without hooks, so a
// stage's backward frees what it saved as it goes.
class SlotHooks : public torch::autograd::SavedVariableHooks {
 public:
  explicit SlotHooks(std::shared_ptr<SavedTensors::Slot> slot) : slot_(std::move(slot)) {}
  ~SlotHooks() override { slot_->device = at::Tensor(); }
  void call_pack_hook(const at::Tensor& tensor) override { slot_->device = tensor.detach(); }
  at::Tensor call_unpack_hook() override {
    TORCH_CHECK(slot_->device.defined(),
                "memtrain: a tensor saved for this backward is in host memory; the schedule must prefetch it "
                "(prefetch_saved) before the stage's backward");
    return slot_->device;
  }

 private:
  std::shared_ptr<SavedTensors::Slot> slot_;
};

// LibTorch's engine, except that it hands out SlotHooks while a Capture is
// alive on the saving thread. Hooks the engine it replaces would hand out
// come first: in a Python process, those are torch's own
// saved_tensors_hooks (save_on_cpu, non-reentrant checkpointing), which
// must keep working inside and outside memtrain's stages, and the
// innermost hooks win, as in PyTorch.
// Answers as the engine it replaces (Python's, when torch's Python module
// is loaded) wherever an answer is the engine's own, and runs backwards on
// it: a node's anomaly
// metadata is read back as Python's kind (AOT autograd's tracing reads it,
// and read as the wrong kind it crashes the process), and a failed node's
// Python error must persist.
class HookingEngine : public torch::autograd::Engine {
 public:
  explicit HookingEngine(torch::autograd::Engine& replaced) : replaced_(replaced) {}
  std::unique_ptr<torch::autograd::SavedVariableHooks> get_default_saved_variable_hooks() override {
    if (auto hooks = replaced_.get_default_saved_variable_hooks()) return hooks;
    if (!capturing) return nullptr;
    return std::make_unique<SlotHooks>(capturing->add_slot());
  }
  // Runs on the replaced engine, whose worker threads and device queues
  // exist: a backward started inside another (memtrain's planned backward,
  // called from autograd's CUDA worker) reenters the engine that runs it.
  torch::autograd::variable_list execute(const torch::autograd::edge_list& roots,
                                         const torch::autograd::variable_list& inputs, bool keep_graph,
                                         bool create_graph, bool accumulate_grad,
                                         const torch::autograd::edge_list& outputs) override {
    return replaced_.execute(roots, inputs, keep_graph, create_graph, accumulate_grad, outputs);
  }
  std::unique_ptr<torch::autograd::AnomalyMetadata> make_anomaly_metadata() override {
    return replaced_.make_anomaly_metadata();
  }
  void thread_on_exception(const std::shared_ptr<torch::autograd::GraphTask>& graph_task,
                           const std::shared_ptr<torch::autograd::Node>& fn, std::exception& e) override {
    replaced_.thread_on_exception(graph_task, fn, e);
  }

 private:
  torch::autograd::Engine& replaced_;
};

torch::autograd::Engine& hooking_engine() {
  // Never destroyed: autograd may run until exit.
  static auto* engine = new HookingEngine(torch::autograd::Engine::get_default_engine());
  return *engine;
}

}  // namespace

void SavedTensors::install() {
  static std::once_flag once;
  std::call_once(once, [] {
    hooking_engine();
    torch::autograd::set_default_engine_stub(&hooking_engine);
  });
}

SavedTensors::Capture::Capture(SavedTensors& saved) : previous_(capturing) {
  install();
  capturing = &saved;
}

SavedTensors::Capture::~Capture() { capturing = previous_; }

SavedTensors::SavedTensors() = default;
SavedTensors::~SavedTensors() = default;

std::shared_ptr<SavedTensors::Slot> SavedTensors::add_slot() {
  slots_.push_back(std::make_shared<Slot>());
  return slots_.back();
}

SavedTensors::Copies SavedTensors::offload(HostTransfers& transfers) {
  if (state_ != State::Device) throw Error("saved tensors: already offloaded");
  std::vector<Group> groups;
  std::unordered_map<const c10::StorageImpl*, size_t> index;
  for (const auto& slot : slots_) {
    if (!slot->device.defined() || slot->device.nbytes() == 0) continue;
    const c10::StorageImpl* storage = slot->device.storage().unsafeGetStorageImpl();
    auto [it, added] = index.emplace(storage, groups.size());
    if (added) groups.emplace_back();
    groups[it->second].slots.push_back(slot.get());
  }
  Copies copies;
  groups_.clear();
  for (Group& g : groups) {
    const torch::Tensor& any = g.slots.front()->device;
    const c10::Storage& storage = any.storage();
    // Every slot holds a tensor of its own; one more holder means someone
    // else keeps the storage alive, and moving it would free nothing.
    if (storage.use_count() != g.slots.size()) continue;
    const auto bytes = static_cast<std::int64_t>(storage.nbytes());
    g.source = torch::empty({0}, any.options().dtype(torch::kUInt8)).set_(storage, 0, {bytes}, {1});
    copies.push_back(transfers.to_host(g.source));
    groups_.push_back(std::move(g));
  }
  state_ = State::Offloading;
  return copies;
}

void SavedTensors::release(const Copies& copies) {
  if (state_ != State::Offloading || copies.size() != groups_.size()) {
    throw Error("saved tensors: release without the copies of an offload");
  }
  for (size_t k = 0; k < groups_.size(); ++k) {
    Group& g = groups_[k];
    g.host = copies[k]->destination();
    g.source = torch::Tensor();
    for (Slot* slot : g.slots) {
      slot->sizes = slot->device.sizes().vec();
      slot->strides = slot->device.strides().vec();
      slot->offset = slot->device.storage_offset();
      slot->dtype = slot->device.dtype();
      slot->device = torch::Tensor();
    }
  }
  state_ = State::OnHost;
}

SavedTensors::Copies SavedTensors::prefetch(HostTransfers& transfers) {
  if (state_ != State::OnHost) throw Error("saved tensors: not in host memory");
  Copies copies;
  for (Group& g : groups_) {
    copies.push_back(transfers.to_device(g.host));
    const torch::Tensor& bytes = copies.back()->destination();
    for (Slot* slot : g.slots) {
      slot->device = torch::empty({0}, bytes.options().dtype(slot->dtype))
                         .set_(bytes.storage(), slot->offset, slot->sizes, slot->strides);
    }
  }
  state_ = State::Device;
  return copies;
}

void SavedTensors::arrived() {
  for (Group& g : groups_) g.host = torch::Tensor();
}

}  // namespace memtrain::runtime
