#include "runtime/builtin_models/model_registry.h"

#include "core/error.h"
#include "runtime/builtin_models/gpt_decoder.h"
#include "runtime/builtin_models/resnet.h"
#include "runtime/builtin_models/resnet50.h"
#include "runtime/builtin_models/transformer_tagger.h"

namespace memtrain::runtime {

StagedModel make_model(const std::string& name, const ModelSpec& spec, const DataShape& shape) {
  if (name == "transformer") {
    TransformerTaggerConfig c;
    c.vocabulary = shape.vocabulary;
    c.tags = shape.classes;
    c.max_length = shape.max_length;
    if (spec.layers >= 0) c.layers = spec.layers;
    if (spec.width >= 0) c.width = spec.width;
    if (spec.heads >= 0) c.heads = spec.heads;
    if (spec.dropout >= 0) c.dropout = spec.dropout;
    return make_transformer_tagger(c);
  }
  if (name == "gpt") {
    GptDecoderConfig c;
    c.vocabulary = shape.vocabulary;
    c.max_length = shape.max_length;
    if (spec.layers >= 0) c.layers = spec.layers;
    if (spec.width >= 0) c.width = spec.width;
    if (spec.heads >= 0) c.heads = spec.heads;
    if (spec.dropout >= 0) c.dropout = spec.dropout;
    return make_gpt_decoder(c);
  }
  if (name == "resnet") {
    if (spec.heads >= 0) throw UsageError("heads apply to the transformer, not resnet");
    ResNetConfig c;
    c.in_channels = shape.in_channels;
    c.classes = shape.classes;
    if (spec.layers >= 0) c.blocks_per_group = spec.layers;
    if (spec.width >= 0) c.width = spec.width;
    return make_resnet(c);
  }
  if (name == "resnet50") {
    if (spec.heads >= 0) throw UsageError("heads apply to the transformer, not resnet50");
    if (spec.layers >= 0) throw UsageError("resnet50 has 3, 4, 6 and 3 blocks per group; layers do not apply");
    ResNet50Config c;
    c.in_channels = shape.in_channels;
    c.classes = shape.classes;
    if (spec.width >= 0) c.width = spec.width;
    return make_resnet50(c);
  }
  std::string known;
  for (const std::string& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown model '" + name + "'; known: " + known);
}

std::vector<std::string> model_names() { return {"gpt", "resnet", "resnet50", "transformer"}; }

}  // namespace memtrain::runtime
