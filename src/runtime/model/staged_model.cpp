#include "runtime/model/staged_model.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/model/classification_loss.h"

namespace memtrain::runtime {

namespace {

class ModuleStage : public StageModule {
 public:
  explicit ModuleStage(torch::nn::AnyModule module) : module_(std::move(module)) {
    register_module("module", module_.ptr());
  }
  torch::Tensor forward(const torch::Tensor& x, StepContext&) override { return module_.forward(x); }

 private:
  torch::nn::AnyModule module_;
};

class ModuleLossStage : public StageModule {
 public:
  explicit ModuleLossStage(torch::nn::AnyModule head) : head_(std::move(head)) { register_module("head", head_.ptr()); }
  torch::Tensor forward(const torch::Tensor& x, StepContext& ctx) override {
    return classification_loss(head_.forward(x), ctx);
  }

 private:
  torch::nn::AnyModule head_;
};

}  // namespace

StagedModel::StagedModel(std::string name, std::vector<std::string> stage_names,
                         std::vector<std::shared_ptr<StageModule>> stages)
    : name_(std::move(name)), stage_names_(std::move(stage_names)), stages_(std::move(stages)) {
  if (stages_.empty()) throw Error("model '" + name_ + "': needs at least one stage (the loss)");
  if (stage_names_.size() != stages_.size()) {
    throw Error("model '" + name_ + "': " + std::to_string(stage_names_.size()) + " stage names for " +
                std::to_string(stages_.size()) + " stages");
  }
}

StagedModel StagedModel::from_modules(std::string name, std::vector<torch::nn::AnyModule> body,
                                      torch::nn::AnyModule head) {
  std::vector<std::string> names;
  std::vector<std::shared_ptr<StageModule>> stages;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i].is_empty()) throw Error("model '" + name + "': body module " + std::to_string(i) + " is empty");
    names.push_back("stage" + std::to_string(i));
    stages.push_back(std::make_shared<ModuleStage>(std::move(body[i])));
  }
  if (head.is_empty()) throw Error("model '" + name + "': the head module is empty");
  names.push_back("loss");
  stages.push_back(std::make_shared<ModuleLossStage>(std::move(head)));
  return StagedModel(std::move(name), std::move(names), std::move(stages));
}

std::vector<torch::Tensor> StagedModel::parameters() const {
  std::vector<torch::Tensor> params;
  for (const auto& s : stages_) {
    for (const auto& p : s->parameters()) params.push_back(p);
  }
  return params;
}

std::vector<torch::Tensor> StagedModel::buffers() const {
  std::vector<torch::Tensor> out;
  for (const auto& s : stages_) {
    for (const auto& b : s->buffers(/*recurse=*/true)) out.push_back(b);
  }
  return out;
}

Bytes StagedModel::stage_param_bytes(int i) const {
  Bytes total = stage_weight_bytes(i);
  for (const auto& b : stages_.at(i)->buffers()) total += static_cast<Bytes>(b.nbytes());
  return total;
}

int StagedModel::max_variant_count() const {
  int most = 1;
  for (const auto& stage : stages_) most = std::max(most, 1 + static_cast<int>(stage->variant_names().size()));
  return most;
}

Bytes StagedModel::stage_weight_bytes(int i) const {
  Bytes total = 0;
  for (const auto& p : stages_.at(i)->parameters()) total += static_cast<Bytes>(p.nbytes());
  return total;
}

Bytes StagedModel::param_bytes() const {
  Bytes total = 0;
  for (int i = 0; i < size(); ++i) total += stage_param_bytes(i);
  return total;
}

std::int64_t StagedModel::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void StagedModel::to(const torch::Device& device) {
  for (auto& s : stages_) s->to(device);
}

void StagedModel::train(bool on) {
  for (auto& s : stages_) s->train(on);
}

}  // namespace memtrain::runtime
