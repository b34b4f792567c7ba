// ps_worker --metrics_out and scripts/plot_metrics.sh with the real
// programs: a short --local training run on generated rows appends train
// and eval points as JSON lines; the plot script writes the gnuplot input
// (naming the series train loss, eval AUC, eval NE, samples/s) and a PNG of
// non-trivial size.
//
// Thread-safety: one test thread; the programs are child processes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/train/run_program.h"

namespace ps::testing {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos;
       at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

TEST(MetricsPlotTest, CurvesOfAShortRunBecomeAPng) {
  auto dir = ScratchDir::Create("ps-metrics-plot");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string d = (*dir)->path();
  const std::string src = PS_SOURCE_DIR;

  Outcome gen = RunProgram(
      {PS_DATAGEN_BIN, "--model=fm", "--rows=20000", "--eval_rows=4000",
       "--seed=3", "--output=" + d + "/train.tsv",
       "--eval_output=" + d + "/eval.tsv"},
      d + "/datagen.log", 60);
  ASSERT_EQ(gen.code, 0) << gen.output;

  const std::string metrics = d + "/curves.jsonl";
  Outcome train = RunProgram(
      {PS_WORKER_BIN, "--flagfile=" + src + "/configs/fm.flags", "--local",
       "--tables=" + src + "/configs/fm.tables",
       "--train_data=" + d + "/train.tsv", "--eval_data=" + d + "/eval.tsv",
       "--epochs=2", "--eval_every=5000", "--progress_secs=0",
       "--metrics_out=" + metrics},
      d + "/worker.log", 60);
  ASSERT_EQ(train.code, 0) << train.output;
  const std::string lines = ReadFile(metrics);
  // An eval point after the first epoch and at the end (and every 5000
  // examples when the 100 ms poll of the trainer sees them: the run is
  // fast); a train point at least at each epoch's end.
  EXPECT_GE(Count(lines, "{\"kind\":\"eval\",\"worker\":0,"), 2u) << lines;
  EXPECT_GE(Count(lines, "{\"kind\":\"train\",\"worker\":0,"), 2u) << lines;
  EXPECT_EQ(Count(lines, "\"final\":true"), 1u) << lines;
  EXPECT_TRUE(Has(lines, "\"samples_per_sec\":")) << lines;
  EXPECT_TRUE(Has(lines, "\"eval_ne\":")) << lines;

  const std::string png = d + "/curves.png";
  Outcome plot =
      RunProgram({"/bin/bash", src + "/scripts/plot_metrics.sh", metrics, png},
                 d + "/plot.log", 60);
  ASSERT_EQ(plot.code, 0) << plot.output;
  EXPECT_TRUE(Has(plot.output, png)) << plot.output;  // prints its path
  const std::string image = ReadFile(png);
  EXPECT_GT(image.size(), 20000u);  // four panels of curves, not a blank
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  const std::string gp = ReadFile(d + "/curves.gp");
  for (const char* series :
       {"title 'train loss'", "title 'eval AUC'", "title 'eval NE'",
        "title 'samples/s (worker 0)'", "set output"}) {
    EXPECT_TRUE(Has(gp, series)) << series << " in\n" << gp;
  }
  EXPECT_GE(Count(ReadFile(d + "/curves.eval.dat"), "\n"), 3u);

  // No usable line: exit 1 with a message, no PNG.
  const std::string empty = d + "/empty.jsonl";
  ASSERT_TRUE((*dir)->WriteFile("empty.jsonl", "not json\n").ok());
  Outcome none = RunProgram(
      {"/bin/bash", src + "/scripts/plot_metrics.sh", empty, d + "/empty.png"},
      d + "/plot-empty.log", 30);
  EXPECT_EQ(none.code, 1) << none.output;
  EXPECT_TRUE(Has(none.output, "no train or eval lines")) << none.output;
}

}  // namespace
}  // namespace ps::testing
