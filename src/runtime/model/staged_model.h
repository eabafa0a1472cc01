// A model cut into a chain of stages, the unit the planners decide about.
// Built-in models come from the registry (models/model_registry.h); users
// build their own from any torch::nn::Module stages with from_modules().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/container/any.h>

#include "core/units.h"
#include "runtime/model/stage_module.h"

namespace memtrain::runtime {

class StagedModel {
 public:
  StagedModel(std::string name, std::vector<std::string> stage_names, std::vector<std::shared_ptr<StageModule>> stages);

  // A chain from plain modules: each of `body` maps a tensor to a tensor,
  // `head` maps the last one to logits [N, classes] (or [..., classes] with
  // targets [...]); the loss stage adds cross-entropy against the targets.
  static StagedModel from_modules(std::string name, std::vector<torch::nn::AnyModule> body, torch::nn::AnyModule head);

  const std::string& name() const { return name_; }
  int size() const { return static_cast<int>(stages_.size()); }
  StageModule& stage(int i) { return *stages_.at(i); }
  const std::string& stage_name(int i) const { return stage_names_.at(i); }
  // Names of stage i's operator variants 1.. (variant 0 is the stage itself).
  std::vector<std::string> stage_variant_names(int i) const { return stages_.at(i)->variant_names(); }
  // The most variants any stage has, the plain one included.
  int max_variant_count() const;

  std::vector<torch::Tensor> parameters() const;
  // Every stage's buffers (batch-norm statistics), in stage order.
  std::vector<torch::Tensor> buffers() const;
  // Weights and buffers (batch-norm statistics) of stage i: resident bytes.
  Bytes stage_param_bytes(int i) const;
  // Trainable weights of stage i alone: what gradients and optimizer state scale with.
  Bytes stage_weight_bytes(int i) const;
  Bytes param_bytes() const;
  std::int64_t parameter_count() const;
  void train(bool on);
  void to(const torch::Device& device);

 private:
  std::string name_;
  std::vector<std::string> stage_names_;
  std::vector<std::shared_ptr<StageModule>> stages_;
};

}  // namespace memtrain::runtime
