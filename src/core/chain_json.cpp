#include "core/chain_json.h"

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "core/json_fields.h"

namespace memtrain {

using nlohmann::json;

Chain chain_from_json(const json& j, const std::string& origin) {
  if (!j.is_object()) throw Error(origin + ": expected a JSON object with a 'stages' array");
  auto st = j.find("stages");
  if (st == j.end() || !st->is_array() || st->empty()) {
    throw Error(origin + ": expected a non-empty 'stages' array (the last stage is the loss)");
  }
  Chain chain;
  for (size_t i = 0; i < st->size(); ++i) {
    const json& s = (*st)[i];
    const std::string where = origin + ": stage " + std::to_string(i);
    expect_object(s, where);
    Stage stage;
    stage.name = name_field(s, "stage" + std::to_string(i), where);
    stage.forward_time = number_field(s, "forward_time", true, 0, where);
    stage.backward_time = number_field(s, "backward_time", true, 0, where);
    stage.input_bytes = bytes_field(s, "input_bytes", true, 0, where);
    stage.saved_bytes = bytes_field(s, "saved_bytes", true, 0, where);
    stage.forward_temp_bytes = bytes_field(s, "forward_temp_bytes", false, 0, where);
    // A chain written by hand has one forward temp; it then serves both kinds.
    stage.nograd_forward_temp_bytes =
        bytes_field(s, "nograd_forward_temp_bytes", false, stage.forward_temp_bytes, where);
    stage.backward_temp_bytes = bytes_field(s, "backward_temp_bytes", false, 0, where);
    stage.param_bytes = bytes_field(s, "param_bytes", false, 0, where);
    stage.state_bytes = bytes_field(s, "state_bytes", false, 0, where);
    // Absent: gradients the size of the weights (float weights, no buffers),
    // as far as the state holds them.
    stage.grad_bytes = bytes_field(s, "grad_bytes", false, std::min(stage.param_bytes, stage.state_bytes), where);
    stage.update_time = number_field(s, "update_time", false, 0, where);
    auto variants = s.find("variants");
    if (variants != s.end()) {
      if (!variants->is_array()) throw Error(where + ": field 'variants' must be an array of objects");
      for (size_t v = 0; v < variants->size(); ++v) {
        const json& x = (*variants)[v];
        const std::string at = where + " variant " + std::to_string(v + 1);
        expect_object(x, at);
        StageVariant sv;
        sv.name = name_field(x, "variant" + std::to_string(v + 1), at);
        sv.forward_time = number_field(x, "forward_time", true, 0, at);
        sv.backward_time = number_field(x, "backward_time", true, 0, at);
        sv.saved_bytes = bytes_field(x, "saved_bytes", true, 0, at);
        sv.forward_temp_bytes = bytes_field(x, "forward_temp_bytes", false, 0, at);
        sv.backward_temp_bytes = bytes_field(x, "backward_temp_bytes", false, 0, at);
        stage.variants.push_back(sv);
      }
    }
    chain.stages.push_back(stage);
  }
  chain.output_bytes = bytes_field(j, "output_bytes", false, 0, origin);
  chain.update_temp_bytes = bytes_field(j, "update_temp_bytes", false, 0, origin);
  chain.resident_bytes = bytes_field(j, "resident_bytes", false, 0, origin);
  chain.device_to_host_bandwidth = number_field(j, "device_to_host_bandwidth", false, 0, origin);
  chain.host_to_device_bandwidth = number_field(j, "host_to_device_bandwidth", false, 0, origin);
  chain.copy_issue_time = number_field(j, "copy_issue_time", false, 0, origin);
  chain.weights_on_host = bool_field(j, "weights_on_host", false, origin);
  chain.updates_inline = bool_field(j, "updates_inline", false, origin);
  if (auto r = j.find("reduction"); r != j.end()) {
    const std::string where = origin + ": reduction";
    expect_object(*r, where);
    GradientReduction& reduction = chain.reduction;
    auto buckets = r->find("buckets");
    if (buckets == r->end() || !buckets->is_array() || buckets->empty())
      throw Error(where + ": expected a non-empty 'buckets' array (the last stage's bucket first)");
    for (std::size_t b = 0; b < buckets->size(); ++b) {
      const json& x = (*buckets)[b];
      const std::string at = where + " bucket " + std::to_string(b);
      expect_object(x, at);
      ReduceBucket bucket;
      bucket.first_stage = whole_field(x, "first_stage", true, 0, 0, chain.size() - 1, at);
      bucket.bytes = bytes_field(x, "bytes", true, 0, at);
      bucket.collectives = whole_field(x, "collectives", false, 1, 1, 1 << 20, at);
      reduction.buckets.push_back(bucket);
    }
    reduction.reserve_bytes = bytes_field(*r, "reserve_bytes", false, 0, where);
    reduction.network.latency = number_field(*r, "latency", false, 0, where);
    reduction.network.seconds_per_byte = number_field(*r, "seconds_per_byte", false, 0, where);
  }
  chain.validate(origin);
  return chain;
}

json chain_to_json(const Chain& chain) {
  json stages = json::array();
  for (const Stage& s : chain.stages) {
    json variants = json::array();
    for (const StageVariant& v : s.variants) {
      variants.push_back({{"name", v.name},
                          {"forward_time", v.forward_time},
                          {"backward_time", v.backward_time},
                          {"saved_bytes", v.saved_bytes},
                          {"forward_temp_bytes", v.forward_temp_bytes},
                          {"backward_temp_bytes", v.backward_temp_bytes}});
    }
    stages.push_back({{"name", s.name},
                      {"forward_time", s.forward_time},
                      {"backward_time", s.backward_time},
                      {"input_bytes", s.input_bytes},
                      {"saved_bytes", s.saved_bytes},
                      {"forward_temp_bytes", s.forward_temp_bytes},
                      {"nograd_forward_temp_bytes", s.nograd_forward_temp_bytes},
                      {"backward_temp_bytes", s.backward_temp_bytes},
                      {"param_bytes", s.param_bytes},
                      {"state_bytes", s.state_bytes},
                      {"grad_bytes", s.grad_bytes},
                      {"update_time", s.update_time}});
    if (!variants.empty()) stages.back()["variants"] = variants;
  }
  json out = {{"stages", stages}, {"output_bytes", chain.output_bytes}, {"update_temp_bytes", chain.update_temp_bytes}};
  if (chain.resident_bytes > 0) out["resident_bytes"] = chain.resident_bytes;
  if (chain.device_to_host_bandwidth > 0) out["device_to_host_bandwidth"] = chain.device_to_host_bandwidth;
  if (chain.host_to_device_bandwidth > 0) out["host_to_device_bandwidth"] = chain.host_to_device_bandwidth;
  if (chain.copy_issue_time > 0) out["copy_issue_time"] = chain.copy_issue_time;
  if (chain.weights_on_host) out["weights_on_host"] = true;
  if (chain.updates_inline) out["updates_inline"] = true;
  if (!chain.reduction.empty()) {
    json buckets = json::array();
    for (const ReduceBucket& b : chain.reduction.buckets)
      buckets.push_back({{"first_stage", b.first_stage}, {"bytes", b.bytes}, {"collectives", b.collectives}});
    out["reduction"] = {{"buckets", buckets},
                        {"reserve_bytes", chain.reduction.reserve_bytes},
                        {"latency", chain.reduction.network.latency},
                        {"seconds_per_byte", chain.reduction.network.seconds_per_byte}};
  }
  return out;
}

Chain read_chain_file(const std::string& path) {
  return chain_from_json(read_json_file(path, "chain"), "chain file '" + path + "'");
}

void write_chain_file(const Chain& chain, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw Error("chain file '" + path + "' cannot be written");
  out << chain_to_json(chain).dump(2) << "\n";
  if (!out) throw Error("chain file '" + path + "': write failed");
}

}  // namespace memtrain
