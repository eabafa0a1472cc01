// Mimose's online predictor: per stage, one quadratic model per cost field,
// learned from what the Executor measures, queried for input sizes not seen
// yet. Sizes outside the observed range get a safety margin on memory, on
// top of memory never predicted below the nearest observed size in proportion.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/chain.h"
#include "predict/quadratic_model.h"

namespace memtrain::predict {

// What one step measured of one stage. A field is empty when the step's
// schedule did not exercise it (a kept stage runs no forward without grad).
struct StageSample {
  int variant = 0;  // the variant whose forward with grad and backward were measured
  std::optional<Bytes> input_bytes;
  std::optional<Bytes> saved_bytes;
  std::optional<Bytes> forward_temp_bytes;
  std::optional<Bytes> nograd_forward_temp_bytes;
  std::optional<Bytes> backward_temp_bytes;
  std::optional<Seconds> forward_time;
  std::optional<Seconds> backward_time;
};

struct ChainSample {
  std::vector<StageSample> stages;
  std::optional<Bytes> output_bytes;
  std::optional<Bytes> update_temp_bytes;
};

// Fixed per stage, known from the model rather than learned.
struct StageConstants {
  std::string name;
  Bytes param_bytes = 0;              // weights
  Bytes state_bytes = 0;              // gradients and optimizer state
  std::vector<std::string> variants;  // names of the stage's variants 1.. (operator variants)
  // The variants do the plain stage's work and more (they recompute), so a
  // prediction never makes one faster than the plain stage: a measurement
  // that says so is noise, and would make `joint` choose it for nothing.
  bool variants_recompute = false;
  Bytes grad_bytes = 0;     // of state_bytes, the gradients
  Seconds update_time = 0;  // the optimizer step for the stage on the host (weights in host memory)
};

class ChainPredictor {
 public:
  // margin: fraction added to memory fields for sizes outside the observed
  // range, e.g. 0.10.
  ChainPredictor(std::vector<StageConstants> stages, double margin);

  void observe(std::int64_t size, const ChainSample& sample);
  // True once every memory field of every stage has been observed.
  bool ready() const;
  // Variants appear on a stage once each of their fields has been observed.
  Chain predict(std::int64_t size) const;
  bool in_range(std::int64_t size) const;
  // Largest rms residual of any memory field's fit, relative to that field's
  // prediction at the largest observed size (0 when nothing is observed).
  double memory_fit_error() const;

  int stages() const { return static_cast<int>(constants_.size()); }
  long observations() const { return observations_; }

 private:
  enum Field { kInput, kSaved, kForwardTemp, kNogradTemp, kBackwardTemp, kForwardTime, kBackwardTime, kFields };
  static constexpr int kMemoryFields = kForwardTime;
  // What differs between variants: saved, forward temp, backward temp, forward and backward time.
  enum VariantField { kVSaved, kVForwardTemp, kVBackwardTemp, kVForwardTime, kVBackwardTime, kVariantFields };

  std::vector<StageConstants> constants_;
  std::vector<std::array<QuadraticModel, kFields>> models_;
  // [stage][variant - 1]
  std::vector<std::vector<std::array<QuadraticModel, kVariantFields>>> variant_models_;
  QuadraticModel output_bytes_, update_temp_bytes_;
  double margin_;
  long observations_ = 0;
  std::int64_t min_size_ = 0, max_size_ = 0;
};

}  // namespace memtrain::predict
