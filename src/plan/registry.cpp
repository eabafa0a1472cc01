#include "plan/registry.h"

#include <functional>
#include <utility>

#include "core/error.h"
#include "plan/all_planner.h"
#include "plan/mimose_planner.h"
#include "plan/none_planner.h"
#include "plan/optimal_planner.h"
#include "plan/sqrt_planner.h"
#include "plan/static_planner.h"
#include "plan/swap_planner.h"
#include "plan/tensile_planner.h"
#include "plan/weight_swap_planners.h"

namespace memtrain::plan {

namespace {

using Factory = std::function<std::unique_ptr<Planner>(const PlannerOptions&)>;

struct Row {
  std::string name;
  const PlannerTraits* traits;  // the planner class's own constant
  Factory make;
};

// An explicit table rather than self-registration: no static initialisation
// order to get wrong, and the list of names is in one place.
const std::vector<Row>& table() {
  static const std::vector<Row> planners = {
      {"all", &AllPlanner::kTraits, [](const PlannerOptions&) { return std::make_unique<AllPlanner>(); }},
      {"joint", &OptimalPlanner::kJointTraits,
       [](const PlannerOptions& o) { return std::make_unique<OptimalPlanner>(o, true); }},
      {"mimose", &MimosePlanner::kTraits, [](const PlannerOptions&) { return std::make_unique<MimosePlanner>(); }},
      {"none", &NonePlanner::kTraits, [](const PlannerOptions&) { return std::make_unique<NonePlanner>(); }},
      {"optimal", &OptimalPlanner::kOptimalTraits,
       [](const PlannerOptions& o) { return std::make_unique<OptimalPlanner>(o); }},
      {"sqrt", &SqrtPlanner::kTraits, [](const PlannerOptions&) { return std::make_unique<SqrtPlanner>(); }},
      {"static", &StaticPlanner::kTraits, [](const PlannerOptions&) { return std::make_unique<StaticPlanner>(); }},
      {"swap", &SwapPlanner::kTraits, [](const PlannerOptions& o) { return std::make_unique<SwapPlanner>(o); }},
      {"swap-naive", &PerLayerSwapPlanner::kTraits,
       [](const PlannerOptions& o) { return std::make_unique<PerLayerSwapPlanner>(o); }},
      {"tensile", &TensilePlanner::kTraits, [](const PlannerOptions&) { return std::make_unique<TensilePlanner>(); }},
  };
  return planners;
}

const Row& row(const std::string& name) {
  for (const Row& r : table()) {
    if (r.name == name) return r;
  }
  std::string known;
  for (const std::string& n : planner_names()) known += (known.empty() ? "" : ", ") + n;
  throw UsageError("unknown planner '" + name + "'; known: " + known);
}

}  // namespace

void check_planner_options(const PlannerOptions& options) {
  if (options.slot_bytes < 0)
    throw UsageError("slot size must be at least 1 byte, not " + std::to_string(options.slot_bytes));
  if (options.micro_batches < 1) {
    throw UsageError("micro-batches " + std::to_string(options.micro_batches) + " is out of range; expected >= 1");
  }
  if (options.slots < 1) throw UsageError("slots must be at least 1, not " + std::to_string(options.slots));
}

std::unique_ptr<Planner> make_planner(const std::string& name, const PlannerOptions& options) {
  check_planner_options(options);
  return row(name).make(options);
}

const PlannerTraits& planner_traits(const std::string& name) { return *row(name).traits; }

std::vector<std::string> planner_names() {
  std::vector<std::string> names;
  for (const Row& r : table()) names.push_back(r.name);
  return names;
}

std::vector<std::string> device_weight_planner_names() {
  std::vector<std::string> names;
  for (const Row& r : table()) {
    if (!r.traits->needs_weights_on_host) names.push_back(r.name);
  }
  return names;
}

void check_weights_placement(const std::string& planner, bool weights_on_host, const std::string& host_switch) {
  const PlannerTraits& traits = planner_traits(planner);
  if (traits.needs_weights_on_host && !weights_on_host) {
    throw UsageError("planner " + planner + " swaps weights kept in host memory; it needs " + host_switch);
  }
  if (weights_on_host && !traits.plans_weights_on_host) {
    std::string able;
    for (const Row& r : table()) {
      if (r.traits->plans_weights_on_host) able += (able.empty() ? "" : ", ") + r.name;
    }
    throw UsageError("planner " + planner + " cannot plan weights in host memory; with " + host_switch +
                     " expected one of: " + able);
  }
}

}  // namespace memtrain::plan
