#include <sstream>

#include <gtest/gtest.h>

#include "core/error.h"
#include "predict/measurement.h"

namespace memtrain::predict {
namespace {

std::vector<Measurement> parse(const std::string& text) {
  std::istringstream in(text);
  return read_measurements_csv(in, "m.csv");
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(MeasurementCsv, RoundTripsWhatItWrites) {
  const std::vector<Measurement> rows = {{"none", 16, 73400320, 0.412}, {"checkpoint", 64, 1 << 20, 1.5e-3}};
  std::ostringstream out;
  write_measurements_csv(out, rows);
  const std::vector<Measurement> back = parse(out.str());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].method, "checkpoint");
  EXPECT_EQ(back[1].batch, 64);
  EXPECT_EQ(back[1].peak_bytes, 1 << 20);
  EXPECT_DOUBLE_EQ(back[0].step_seconds, 0.412);
  EXPECT_EQ(method_names(back), (std::vector<std::string>{"none", "checkpoint"}));
}

TEST(MeasurementCsv, ColumnsMayComeInAnyOrderWithExtras) {
  const auto rows =
      parse("step_seconds,gpu,batch,method,peak_bytes\r\n0.5,a100,8,offload,1e9\n\n0.9,a100,16,offload,2e9\n");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].method, "offload");
  EXPECT_EQ(rows[1].batch, 16);
  EXPECT_EQ(rows[1].peak_bytes, 2000000000);
  EXPECT_EQ(rows_of(rows, "offload").size(), 2u);
  EXPECT_TRUE(rows_of(rows, "none").empty());
}

TEST(MeasurementCsv, BadInputNamesTheLineAndColumn) {
  EXPECT_NE(error_of("method,batch,peak_bytes\nnone,1,2\n").find("no column 'step_seconds'"), std::string::npos);
  EXPECT_NE(error_of("method,batch,peak_bytes,step_seconds\nnone,4,100,0.1\nnone,x,100,0.1\n")
                .find("m.csv: line 3: column batch is 'x'"),
            std::string::npos);
  EXPECT_NE(error_of("method,batch,peak_bytes,step_seconds\nnone,2.5,100,0.1\n").find("expected a whole number"),
            std::string::npos);
  EXPECT_NE(error_of("method,batch,peak_bytes,step_seconds\nnone,2,-1,0.1\n").find("column peak_bytes"),
            std::string::npos);
  EXPECT_NE(error_of("method,batch,peak_bytes,step_seconds\nnone,2,10,0\n").find("column step_seconds"),
            std::string::npos);
  EXPECT_NE(error_of("method,batch,peak_bytes,step_seconds\nnone,2,10\n").find("line 2 has 3 columns"),
            std::string::npos);
  EXPECT_NE(error_of("method,batch,peak_bytes,step_seconds\n").find("no measurements"), std::string::npos);
  EXPECT_NE(error_of("").find("no header"), std::string::npos);
  EXPECT_THROW(read_measurements_csv_file("/nonexistent/m.csv"), DataError);
}

TEST(MeasurementCsv, RefusesToWriteANameThatBreaksTheFormat) {
  std::ostringstream out;
  EXPECT_THROW(write_measurements_csv(out, {{"a,b", 1, 1, 1}}), Error);
}

}  // namespace
}  // namespace memtrain::predict
