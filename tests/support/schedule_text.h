// Schedules written the way Schedule::to_string() prints them
// ("Fck0 Fall1 Off1 L B1 Pre1 ...", "Win2 Fck2@1 Gout2 U2", "B2 AR2"), for tests
// worked out by hand.
#pragma once

#include <cctype>
#include <sstream>
#include <stdexcept>
#include <string>

#include "core/schedule.h"

namespace memtrain::testing {

inline Schedule parse_schedule(const std::string& text) {
  const struct {
    const char* prefix;
    OpKind kind;
  } kinds[] = {{"Fall", OpKind::ForwardAll},
               {"Fck", OpKind::ForwardCheckpoint},
               {"Fn", OpKind::ForwardNone},
               {"Off", OpKind::Offload},
               {"Rel", OpKind::Release},
               {"Pre", OpKind::Prefetch},
               {"Win", OpKind::FetchWeights},
               {"Wout", OpKind::DropWeights},
               {"Gout", OpKind::OffloadGrads},
               {"Gin", OpKind::FetchGrads},
               {"U", OpKind::Update},
               {"B", OpKind::Backward},
               {"L", OpKind::Loss},
               {"OffS", OpKind::OffloadSaved},
               {"RelS", OpKind::ReleaseSaved},
               {"PreS", OpKind::PrefetchSaved},
               {"AR", OpKind::AllReduce}};
  Schedule s;
  std::istringstream in(text);
  std::string t;
  while (in >> t) {
    Op op{OpKind::Loss, -1};
    std::string rest;
    bool known = false;
    for (const auto& k : kinds) {
      const std::string prefix = k.prefix;
      if (t.rfind(prefix, 0) == 0 && (t.size() == prefix.size() || t[prefix.size()] == '@' ||
                                      std::isdigit(static_cast<unsigned char>(t[prefix.size()])))) {
        op.kind = k.kind;
        rest = t.substr(prefix.size());
        known = true;
        break;
      }
    }
    if (!known) throw std::invalid_argument("parse_schedule: unknown operation '" + t + "'");
    const size_t at = rest.find('@');
    if (at != std::string::npos) {
      op.micro = std::stoi(rest.substr(at + 1));
      rest = rest.substr(0, at);
    }
    const size_t dot = rest.find(".v");
    if (dot != std::string::npos) {
      op.variant = std::stoi(rest.substr(dot + 2));
      rest = rest.substr(0, dot);
    }
    if (op.kind != OpKind::Loss) op.stage = std::stoi(rest);
    s.ops.push_back(op);
  }
  return s;
}

}  // namespace memtrain::testing
