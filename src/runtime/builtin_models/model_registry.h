// Built-in models by name: `transformer` (token tagger), `gpt` (next-word
// decoder), `resnet` (image classifier) and `resnet50` (ResNet-50). Unset knobs take each model's defaults.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

struct ModelSpec {
  std::int64_t layers = -1;  // transformer: encoder layers (6); gpt: decoder blocks (6); resnet: blocks per group (2)
  std::int64_t width =
      -1;  // transformer: model width (128); gpt: 256; resnet: first group's channels (16); resnet50: 64
  std::int64_t heads = -1;  // transformer and gpt (4)
  double dropout = -1;      // transformer and gpt (0.1)
};

// What the data fixes about a model.
struct DataShape {
  std::int64_t vocabulary = 0;   // token models: input ids
  std::int64_t classes = 0;      // output classes (tags, labels)
  std::int64_t max_length = 0;   // token models: longest sequence
  std::int64_t in_channels = 1;  // image models
};

// Throws UsageError "unknown model 'x'; known: resnet, transformer".
StagedModel make_model(const std::string& name, const ModelSpec& spec, const DataShape& shape);
std::vector<std::string> model_names();

}  // namespace memtrain::runtime
