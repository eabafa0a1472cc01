#include "runtime/execution/host_weights.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"

namespace memtrain::runtime {

HostWeights::HostWeights(StagedModel& model, Adam& optimizer, DeviceMemory& memory)
    : optimizer_(&optimizer), memory_(memory), stages_(model.size()), update_seconds_(model.size(), 0),
      own_thread_(!updates_inline_on(memory)) {
  const std::vector<torch::Tensor>& all = optimizer.params();
  for (int i = 0; i < model.size(); ++i) {
    for (const torch::Tensor& b : model.stage(i).buffers(/*recurse=*/true))
      stages_[i].buffers.push_back({b, b.detach(), {}});
    for (const torch::Tensor& p : model.stage(i).parameters(/*recurse=*/true)) {
      size_t k = 0;
      while (k < all.size() && !all[k].is_same(p)) ++k;
      if (k == all.size())
        throw Error("weights in host memory: a parameter of stage " + std::to_string(i) + " is not the optimizer's");
      Weight w;
      w.param = p;
      w.master = p.detach();
      w.index = k;
      w.param.mutable_grad() = torch::Tensor();  // gradients live on the device until they go to the host
      stages_[i].weights.push_back(std::move(w));
    }
  }
}

HostWeights::HostWeights(StagedModel& model, DeviceMemory& memory)
    : optimizer_(nullptr), memory_(memory), stages_(model.size()), update_seconds_(model.size(), 0),
      own_thread_(false) {
  const PoolScope host(&memory_.host());
  torch::NoGradGuard no_grad;
  for (int i = 0; i < model.size(); ++i) {
    for (const torch::Tensor& p : model.stage(i).parameters(/*recurse=*/true)) {
      Weight w;
      w.param = p;
      w.master = p.detach().clone();
      w.param.set_data(w.master);
      stages_[i].weights.push_back(std::move(w));
    }
  }
}

bool HostWeights::holds(int stage, const torch::Tensor& tensor) const {
  const std::vector<Weight>& weights = stages_.at(stage).weights;
  return std::any_of(weights.begin(), weights.end(), [&](const Weight& w) { return w.param.is_same(tensor); });
}

torch::Tensor HostWeights::gradient_to_host(const torch::Tensor& gradient, HostTransfers& transfers) const {
  MEMTRAIN_ASSERT(caller_updates(), "gradients go to the host by themselves only for the caller's updates");
  if (!gradient.defined()) return gradient;
  const std::unique_ptr<HostCopy> copy = transfers.to_host(gradient);
  copy->wait();
  return copy->destination();
}

void HostWeights::drop_all() {
  for (size_t i = 0; i < stages_.size(); ++i) {
    if (stages_[i].on_device) drop(static_cast<int>(i));
  }
}

std::vector<std::unique_ptr<HostCopy>> HostWeights::fetch(int stage, HostTransfers& transfers) {
  StageWeights& s = stages_.at(stage);
  std::vector<std::unique_ptr<HostCopy>> copies;
  for (Weight& w : s.weights) {
    // The caller's weights are whatever its parameter holds between uses
    // (its optimizer updates them in place; a load may replace them).
    if (caller_updates() && !s.on_device) w.master = w.param.detach();
    copies.push_back(transfers.to_device(w.master));
    w.param.set_data(copies.back()->destination());
  }
  for (Buffer& b : s.buffers) {
    copies.push_back(transfers.to_device(b.next.defined() ? b.next : b.master));
    b.tensor.set_data(copies.back()->destination());
  }
  s.on_device = true;
  return copies;
}

void HostWeights::drop(int stage) {
  StageWeights& s = stages_.at(stage);
  for (Weight& w : s.weights) {
    // The caller's gradients, accumulated in host memory, are the caller's.
    if (!caller_updates()) w.param.mutable_grad() = torch::Tensor();
    w.param.set_data(w.master);
  }
  // The statistics this step's forwards left on the device come back at
  // once: a few numbers per channel, copied on the training thread.
  for (Buffer& b : s.buffers) {
    {
      const PoolScope host(&memory_.host());
      b.next = torch::empty_like(b.master);
    }
    b.next.copy_(b.tensor.detach());
    b.tensor.set_data(b.master);
  }
  s.on_device = false;
}

std::vector<std::unique_ptr<HostCopy>> HostWeights::offload_grads(int stage, HostTransfers& transfers) {
  std::vector<std::unique_ptr<HostCopy>> copies;
  for (Weight& w : stages_.at(stage).weights) {
    // A weight no backward reached (an unused embedding row has a zero
    // gradient, but a whole unused weight has none) sends zeros.
    if (!w.param.grad().defined()) w.param.mutable_grad() = torch::zeros_like(w.param);
    copies.push_back(transfers.to_host(w.param.grad()));
  }
  return copies;
}

void HostWeights::grads_arrived(int stage, const std::vector<std::unique_ptr<HostCopy>>& copies) {
  std::vector<Weight>& weights = stages_.at(stage).weights;
  for (size_t k = 0; k < weights.size() && k < copies.size(); ++k) {
    Weight& w = weights[k];
    w.host_grad = w.kept_grad.defined() ? w.kept_grad : copies[k]->destination();
  }
}

std::vector<std::unique_ptr<HostCopy>> HostWeights::fetch_grads(int stage, HostTransfers& transfers) {
  std::vector<std::unique_ptr<HostCopy>> copies;
  for (Weight& w : stages_.at(stage).weights) {
    copies.push_back(transfers.to_device(w.host_grad));
    w.param.mutable_grad() = copies.back()->destination();
    w.host_grad = torch::Tensor();
  }
  return copies;
}

void HostWeights::update(int stage) {
  StageWeights& s = stages_.at(stage);
  for (Weight& w : s.weights) {
    if (!w.host_grad.defined())
      throw Error("host weights: stage " + std::to_string(stage) + " has no gradients on the host");
  }
  s.updated = true;
  // The master weights and moments change only in commit(), after every
  // update has been waited for, so the thread reads them undisturbed.
  auto job = std::make_shared<std::packaged_task<void()>>([this, stage] {
    const auto t0 = std::chrono::steady_clock::now();
    const PoolScope host(&memory_.host());
    for (Weight& w : stages_[stage].weights) {
      const torch::Tensor& m = optimizer_->first_moment(w.index);
      const torch::Tensor& v = optimizer_->second_moment(w.index);
      w.next_w = torch::empty_like(w.master);
      w.next_m = torch::empty_like(m);
      w.next_v = torch::empty_like(v);
      optimizer_->apply_into(w.next_w, w.next_m, w.next_v, w.master, m, v, w.host_grad, optimizer_->steps() + 1);
    }
    update_seconds_[stage] = seconds_since(t0);
  });
  updating_.push_back(job->get_future());
  if (own_thread_) {
    updater_.submit([job] { (*job)(); });
  } else {
    (*job)();
  }
}

void HostWeights::wait_for_updates() {
  std::exception_ptr first;
  for (std::future<void>& f : updating_) {
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  updating_.clear();
  if (first) std::rethrow_exception(first);
}

void HostWeights::commit() {
  wait_for_updates();
  for (StageWeights& s : stages_) {
    for (Weight& w : s.weights) {
      if (s.updated) {
        w.master = w.next_w;
        optimizer_->first_moment(w.index) = w.next_m;
        optimizer_->second_moment(w.index) = w.next_v;
      }
      w.next_w = w.next_m = w.next_v = w.host_grad = w.kept_grad = torch::Tensor();
      w.param.mutable_grad() = torch::Tensor();
      w.param.set_data(w.master);
    }
    for (Buffer& b : s.buffers) {
      if (b.next.defined()) b.master = b.next;
      b.next = torch::Tensor();
      b.tensor.set_data(b.master);
    }
    s.updated = false;
    s.on_device = false;
  }
  optimizer_->count_step();
}

void HostWeights::abandon(const std::vector<torch::Tensor>& keep) {
  try {
    wait_for_updates();
  } catch (const std::exception&) {
    // What failed is being forgotten with the rest of the step.
  }
  for (StageWeights& s : stages_) {
    for (Weight& w : s.weights) {
      const bool kept =
          std::any_of(keep.begin(), keep.end(), [&](const torch::Tensor& k) { return k.is_same(w.param); });
      if (!kept) {
        w.kept_grad = torch::Tensor();
      } else if (!w.kept_grad.defined()) {
        // Where the attempt left it: arrived in host memory, or still on the device.
        if (w.host_grad.defined()) {
          w.kept_grad = w.host_grad;
        } else {
          MEMTRAIN_ASSERT(w.param.grad().defined(), "a weight whose sum was made has a gradient");
          const PoolScope host(&memory_.host());
          w.kept_grad = torch::empty_like(w.master);
          w.kept_grad.copy_(w.param.grad());
        }
      }
      w.next_w = w.next_m = w.next_v = w.host_grad = torch::Tensor();
      w.param.mutable_grad() = torch::Tensor();
      w.param.set_data(w.master);
    }
    for (Buffer& b : s.buffers) {
      b.next = torch::Tensor();
      b.tensor.set_data(b.master);
    }
    s.updated = false;
    s.on_device = false;
  }
}

}  // namespace memtrain::runtime
