#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "core/chain_json.h"
#include "core/error.h"

namespace memtrain {
namespace {

using nlohmann::json;

json two_stage_chain() {
  return json::parse(R"({
    "stages": [
      {"name": "a", "forward_time": 1.5, "backward_time": 3, "input_bytes": 10, "saved_bytes": 40,
       "forward_temp_bytes": 5, "backward_temp_bytes": 7, "param_bytes": 100},
      {"name": "loss", "forward_time": 0.5, "backward_time": 1, "input_bytes": 20, "saved_bytes": 24}
    ],
    "output_bytes": 4})");
}

std::string error_of(const json& j) {
  try {
    chain_from_json(j, "test.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChainJson, ReadsFieldsAndDefaults) {
  const Chain c = chain_from_json(two_stage_chain(), "test.json");
  ASSERT_EQ(c.size(), 2);
  EXPECT_EQ(c.stages[0].name, "a");
  EXPECT_DOUBLE_EQ(c.stages[0].forward_time, 1.5);
  EXPECT_EQ(c.stages[0].saved_bytes, 40);
  EXPECT_EQ(c.stages[0].nograd_forward_temp_bytes, 5) << "defaults to forward_temp_bytes";
  EXPECT_EQ(c.stages[1].forward_temp_bytes, 0);
  EXPECT_EQ(c.stages[1].param_bytes, 0);
  EXPECT_EQ(c.output_bytes, 4);
  EXPECT_EQ(c.activation_bytes(2), 4);
  EXPECT_EQ(c.persistent_bytes(), 100);
}

TEST(ChainJson, RoundTripsEveryField) {
  Chain c = chain_from_json(two_stage_chain(), "test.json");
  c.stages[1].nograd_forward_temp_bytes = 99;
  c.stages[1].state_bytes = 300;
  c.update_temp_bytes = 8;
  c.weights_on_host = true;
  c.updates_inline = true;
  c.copy_issue_time = 4e-5;
  const Chain back = chain_from_json(chain_to_json(c), "again");
  EXPECT_EQ(chain_to_json(back), chain_to_json(c));
  EXPECT_EQ(back.stages[1].nograd_forward_temp_bytes, 99);
  EXPECT_EQ(back.update_temp_bytes, 8);
  EXPECT_TRUE(back.weights_on_host);
  EXPECT_TRUE(back.updates_inline);
  EXPECT_DOUBLE_EQ(back.copy_issue_time, 4e-5);
}

TEST(ChainJson, ErrorsNameTheStageAndField) {
  json j = two_stage_chain();
  j["stages"][1].erase("saved_bytes");
  EXPECT_NE(error_of(j).find("stage 1: missing field 'saved_bytes'"), std::string::npos) << error_of(j);

  j = two_stage_chain();
  j["stages"][0]["input_bytes"] = -3;
  EXPECT_NE(error_of(j).find("stage 0: field 'input_bytes' is -3; expected a number >= 0"), std::string::npos)
      << error_of(j);

  j = two_stage_chain();
  j["stages"][0]["saved_bytes"] = 2.5;
  EXPECT_NE(error_of(j).find("whole number of bytes"), std::string::npos) << error_of(j);

  j = two_stage_chain();
  j["stages"][0]["forward_time"] = "fast";
  EXPECT_NE(error_of(j).find("expected a number"), std::string::npos) << error_of(j);

  j = two_stage_chain();
  j["copy_issue_time"] = -1;
  EXPECT_NE(error_of(j).find("copy_issue_time"), std::string::npos) << error_of(j);

  EXPECT_NE(error_of(json::parse(R"({"stages": []})")).find("non-empty 'stages'"), std::string::npos);
  EXPECT_NE(error_of(json::parse("[1,2]")).find("test.json"), std::string::npos);
}

TEST(ChainJson, FileErrorsNameThePath) {
  EXPECT_THROW(read_chain_file("/nonexistent/chain.json"), Error);
  const std::string path = ::testing::TempDir() + "/broken_chain.json";
  std::ofstream(path) << "{ not json";
  try {
    read_chain_file(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memtrain

namespace memtrain {
namespace {

TEST(ChainJson, ReadsAndWritesOperatorVariants) {
  json j = two_stage_chain();
  j["stages"][0]["variants"] = json::parse(
      R"([{"name": "relu-1bit", "forward_time": 1.6, "backward_time": 3.1, "saved_bytes": 22,
           "backward_temp_bytes": 3}])");
  const Chain c = chain_from_json(j, "test.json");
  ASSERT_EQ(c.stages[0].variant_count(), 2);
  EXPECT_EQ(c.stages[1].variant_count(), 1);
  const StageVariant v = c.stages[0].variant(1);
  EXPECT_EQ(v.name, "relu-1bit");
  EXPECT_EQ(v.saved_bytes, 22);
  EXPECT_EQ(v.forward_temp_bytes, 0);
  EXPECT_EQ(v.backward_temp_bytes, 3);
  EXPECT_EQ(c.stages[0].variant(0).saved_bytes, 40) << "variant 0 is the stage itself";
  const Chain back = chain_from_json(chain_to_json(c), "round trip");
  EXPECT_EQ(back.stages[0].variant(1).saved_bytes, 22);
  EXPECT_DOUBLE_EQ(back.stages[0].variant(1).backward_time, 3.1);
  EXPECT_FALSE(chain_to_json(c)["stages"][1].contains("variants")) << "no variants, no field";

  j["stages"][0]["variants"][0].erase("saved_bytes");
  EXPECT_EQ(error_of(j), "test.json: stage 0 variant 1: missing field 'saved_bytes'");
  j["stages"][0]["variants"] = 3;
  EXPECT_EQ(error_of(j), "test.json: stage 0: field 'variants' must be an array of objects");
}

}  // namespace
}  // namespace memtrain

#include "core/graph_json.h"

namespace memtrain {
namespace {

TEST(GraphJson, ReadsAForwardGraphAndDerivesItsBackward) {
  const json j = json::parse(R"({"persistent_bytes": 7, "nodes": [
      {"name": "x", "time": 0, "output_bytes": 8},
      {"name": "a", "time": 1, "output_bytes": 16, "temp_bytes": 2, "inputs": [0]},
      {"name": "loss", "time": 1, "output_bytes": 4, "inputs": [1, 0]}]})");
  const Graph g = training_graph_from_json(j, "g.json");
  ASSERT_EQ(g.size(), 6);
  EXPECT_EQ(g.persistent_bytes, 7);
  EXPECT_EQ(g.nodes[1].temp_bytes, 2);
  EXPECT_EQ(g.nodes[3].name, "grad loss");
  json included = j;
  included["backward"] = "included";
  EXPECT_EQ(training_graph_from_json(included, "g.json").size(), 3);
  json with_variant = included;
  with_variant["nodes"][1]["variants"] = json::parse(R"([{"name": "lean", "time": 1.5, "temp_bytes": 1}])");
  const Graph v = training_graph_from_json(with_variant, "g.json");
  ASSERT_EQ(v.nodes[1].variant_count(), 2);
  EXPECT_EQ(v.nodes[1].variants[0].name, "lean");
  EXPECT_DOUBLE_EQ(v.nodes[1].time_of(1), 1.5);
  EXPECT_EQ(v.nodes[1].temp_of(1), 1);
  EXPECT_EQ(v.nodes[1].temp_of(0), 2);
}

TEST(GraphJson, ErrorsNameTheNodeAndField) {
  auto error_of_graph = [](const json& j) {
    try {
      training_graph_from_json(j, "g.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of_graph(json::parse(R"({"nodes": [{"time": 1}]})")), "g.json: node 0: missing field 'output_bytes'");
  EXPECT_EQ(error_of_graph(json::parse(R"({"nodes": [{"time": 1, "output_bytes": 4, "inputs": [0]}]})")),
            "g.json: node 0 ('node0'): input 0 is not an earlier node; expected 0..-1");
  EXPECT_EQ(error_of_graph(json::parse(R"({"nodes": [{"time": 1, "output_bytes": 4}], "backward": "maybe"})")),
            "g.json: field 'backward' is 'maybe'; expected 'derive' (default) or 'included'");
  EXPECT_EQ(
      error_of_graph(json::parse(
          R"({"nodes": [{"time": 1, "output_bytes": 4, "variants": [{"name": "v", "time": -1, "temp_bytes": 0}]}]})")),
      "g.json: node 0, variant 1: field 'time' is -1; expected a number >= 0");
}

}  // namespace
}  // namespace memtrain
