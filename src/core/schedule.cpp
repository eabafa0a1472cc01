#include "core/schedule.h"

#include <algorithm>
#include <set>
#include <utility>

namespace memtrain {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::ForwardAll: return "forward_all";
    case OpKind::ForwardCheckpoint: return "forward_checkpoint";
    case OpKind::ForwardNone: return "forward_none";
    case OpKind::Loss: return "loss";
    case OpKind::Backward: return "backward";
    case OpKind::Offload: return "offload";
    case OpKind::Release: return "release";
    case OpKind::Prefetch: return "prefetch";
    case OpKind::OffloadSaved: return "offload_saved";
    case OpKind::ReleaseSaved: return "release_saved";
    case OpKind::PrefetchSaved: return "prefetch_saved";
    case OpKind::FetchWeights: return "fetch_weights";
    case OpKind::DropWeights: return "drop_weights";
    case OpKind::OffloadGrads: return "offload_grads";
    case OpKind::FetchGrads: return "fetch_grads";
    case OpKind::Update: return "update";
    case OpKind::AllReduce: return "all_reduce";
  }
  return "?";
}

bool is_micro_batch_op(OpKind kind) {
  switch (kind) {
    case OpKind::FetchWeights:
    case OpKind::DropWeights:
    case OpKind::OffloadGrads:
    case OpKind::FetchGrads:
    case OpKind::Update:
    case OpKind::AllReduce: return false;
    default: return true;
  }
}

bool is_forward(OpKind kind) {
  return kind == OpKind::ForwardAll || kind == OpKind::ForwardCheckpoint || kind == OpKind::ForwardNone;
}

bool starts_copy(OpKind kind) {
  switch (kind) {
    case OpKind::Offload:
    case OpKind::Prefetch:
    case OpKind::OffloadSaved:
    case OpKind::PrefetchSaved:
    case OpKind::FetchWeights:
    case OpKind::OffloadGrads:
    case OpKind::FetchGrads: return true;
    default: return false;
  }
}

int Schedule::micro_batches() const {
  int most = 0;
  for (const Op& op : ops) most = std::max(most, op.micro);
  return most + 1;
}

int Schedule::recomputed_forwards(int stages) const {
  int forwards = 0;
  for (const Op& op : ops) {
    if (is_forward(op.kind)) ++forwards;
  }
  return forwards - stages * micro_batches();
}

bool Schedule::recomputes_locally() const {
  std::set<std::pair<int, int>> ran;  // (micro-batch, stage) run forward already
  for (size_t k = 0; k < ops.size(); ++k) {
    const Op& op = ops[k];
    if (!is_forward(op.kind) || ran.insert({op.micro, op.stage}).second) continue;
    auto next = std::find_if(ops.begin() + static_cast<std::ptrdiff_t>(k) + 1, ops.end(),
                             [](const Op& o) { return o.kind == OpKind::Backward; });
    if (next == ops.end() || next->stage != op.stage || next->micro != op.micro) return false;
  }
  return true;
}

std::string Schedule::to_string() const {
  std::string out;
  for (const Op& op : ops) {
    if (!out.empty()) out += ' ';
    switch (op.kind) {
      case OpKind::ForwardAll: out += "Fall"; break;
      case OpKind::ForwardCheckpoint: out += "Fck"; break;
      case OpKind::ForwardNone: out += "Fn"; break;
      case OpKind::Loss:
        out += "L";
        if (op.micro != 0) out += "@" + std::to_string(op.micro);
        continue;
      case OpKind::Backward: out += "B"; break;
      case OpKind::Offload: out += "Off"; break;
      case OpKind::Release: out += "Rel"; break;
      case OpKind::Prefetch: out += "Pre"; break;
      case OpKind::OffloadSaved: out += "OffS"; break;
      case OpKind::ReleaseSaved: out += "RelS"; break;
      case OpKind::PrefetchSaved: out += "PreS"; break;
      case OpKind::FetchWeights: out += "Win"; break;
      case OpKind::DropWeights: out += "Wout"; break;
      case OpKind::OffloadGrads: out += "Gout"; break;
      case OpKind::FetchGrads: out += "Gin"; break;
      case OpKind::Update: out += "U"; break;
      case OpKind::AllReduce: out += "AR"; break;
    }
    out += std::to_string(op.stage);
    if (op.variant != 0) out += ".v" + std::to_string(op.variant);
    if (op.micro != 0) out += "@" + std::to_string(op.micro);
  }
  return out;
}

nlohmann::json Schedule::to_json() const {
  nlohmann::json ops_json = nlohmann::json::array();
  for (const Op& op : ops) {
    nlohmann::json o = {{"op", op_kind_name(op.kind)}};
    if (op.kind != OpKind::Loss) o["stage"] = op.stage;
    if (op.variant != 0) o["variant"] = op.variant;
    if (op.micro != 0) o["micro"] = op.micro;
    ops_json.push_back(o);
  }
  return ops_json;
}

}  // namespace memtrain
