// Mimose's online predictor: per stage, one quadratic model per cost field,
// learned from what the Executor measures, queried for input sizes not seen
// yet. Sizes outside the observed range get a safety margin on memory, on
// top of memory never predicted below the nearest observed size in proportion.
//
// Where the inputs are square images of one batch and channel count
// (image_sides.h), an image stage's memory fields are modelled against the
// side instead, at the strides its input and output lie at
// (strided_bytes.h): the bytes of strided tensors are a staircase in the
// side that a quadratic misses. Where the sides seen cannot tell two
// strides apart, each is fitted and the larger prediction taken.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/chain.h"
#include "predict/image_sides.h"
#include "predict/quadratic_model.h"
#include "predict/strided_bytes.h"

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

// Two measurements of one input, as one: each memory field the larger of
// the two (a step under bfloat16 autocast holds weights' bf16 copies that
// an fp32 one does not, and keeps less of its activations), each time
// `first`'s where it has one. A stage's fields that differ by variant are
// taken from `second` only where it measured the same variant.
ChainSample larger_of(const ChainSample& first, const ChainSample& second);

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

  // `shape`: the input's, whose product is `size`; an empty one (not
  // known) ends the modelling by image side for good.
  void observe(std::int64_t size, const ChainSample& sample, const std::vector<std::int64_t>& shape = {});
  // True once every memory field of every stage has been observed.
  bool ready() const;
  // Variants appear on a stage once each of their fields has been observed.
  Chain predict(std::int64_t size) const;
  bool in_range(std::int64_t size) const;
  std::int64_t largest_observed() const { return max_size_; }  // 0 before any observation
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
  static constexpr int kVariantMemoryFields = kVForwardTime;

  // The prediction of `field` at `side` for a stage whose input and output
  // lie at the strides given (largest over each pair; with `same`, only
  // pairs of one stride); none where no pair's fit is determined.
  static std::optional<double> by_side(const StridedBytes& field, const std::vector<Stride>& in,
                                       const std::vector<Stride>& out, std::int64_t side, bool same = false);

  std::vector<StageConstants> constants_;
  std::vector<std::array<QuadraticModel, kFields>> models_;
  // [stage][variant - 1]
  std::vector<std::vector<std::array<QuadraticModel, kVariantFields>>> variant_models_;
  QuadraticModel output_bytes_, update_temp_bytes_;
  // The same memory fields by image side, while the inputs are square images.
  ImageSides sides_;
  std::vector<std::array<StridedBytes, kMemoryFields>> strided_;
  std::vector<std::vector<std::array<StridedBytes, kVariantMemoryFields>>> variant_strided_;
  StridedBytes output_strided_;
  double margin_;
  long observations_ = 0;
  std::int64_t min_size_ = 0, max_size_ = 0;
};

}  // namespace memtrain::predict
