// The report `memtrain jobs --json` writes (docs/jobs.md), from the jobs
// layer's GroupReport.
#pragma once

#include <nlohmann/json.hpp>

#include "jobs/group_report.h"

namespace memtrain::cli {

nlohmann::json group_report_json(const jobs::GroupReport& report);

}  // namespace memtrain::cli
