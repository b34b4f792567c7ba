// ps_datagen: writes Criteo-shaped click logs labelled by a planted model and
// prints that model's own AUC and logloss on what it wrote: the best any
// model can do on the data. The defaults (--max_vocab, --factor_rank) keep
// the planted model learnable from about 1M rows, so the printed optimum is
// one a good learner can come close to, not just an upper bound.
#include <gflags/gflags.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "worker/datagen/criteo_synth.h"
#include "worker/datagen/planted_model.h"
#include "worker/train/metrics.h"

DEFINE_uint64(rows, 1000000, "Training rows to write.");
DEFINE_uint64(eval_rows, 200000, "Held-out rows to write (0: none).");
DEFINE_string(output, "train.tsv", "Where the training rows go.");
DEFINE_string(eval_output, "eval.tsv", "Where the held-out rows go.");
DEFINE_string(model, "lr",
              "Planted model: 'lr' (logistic regression) or 'fm' "
              "(factorization machine: pairwise feature interactions).");
DEFINE_uint64(seed, 1, "Seed: the same seed and flags give the same files.");
DEFINE_uint32(max_vocab, 100,
              "Largest categorical vocabulary; the 26 fields get this "
              "divided by 1, 3, 9, ... 729 (at least 3). 100 keeps the "
              "rarest value above a thousand rows per 1M, so the planted "
              "model's parameters (w and 8 factors per value) can be "
              "estimated from about 1M rows: at 3000, values seen a few "
              "dozen times carry planted weights no model can learn, every "
              "model overfits them, and the printed optimum is out of "
              "reach.");
DEFINE_double(zipf_exponent, 1.1, "Skew of category frequencies.");
DEFINE_double(bias, -1.2, "Planted bias: sets the click rate (about 25%).");
DEFINE_double(weight_stddev, 0.2, "Spread of planted feature weights.");
DEFINE_int32(fm_dim, 8, "Planted FM factor dimension (--model=fm).");
DEFINE_double(factor_stddev, 0.12, "Spread of planted FM factors.");
DEFINE_double(factor_rank, 30,
              "--model=fm: the planted factors of a category of frequency "
              "rank r in its field (0: most frequent) are scaled by "
              "min(1, (factor_rank / (r + 1))^2), so the strong "
              "interactions are among values frequent enough to learn from "
              "about 1M rows (a factor of a value seen a few hundred times "
              "cannot be estimated by any model). 0: all factors at full "
              "spread. The printed optimum is this planted model's own.");
DEFINE_string(metrics_json, "",
              "If set, also write the planted optimum as JSON to this file.");

namespace {

struct Written {
  uint64_t rows = 0, clicks = 0;
  double auc = 0, logloss = 0;
};

// Writes `rows` rows to `path`; returns what the planted model scores on them.
bool WriteRows(ps::datagen::CriteoSynth* synth, uint64_t rows,
               const std::string& path, Written* out) {
  std::ofstream file(path, std::ios::binary);
  if (!file) {
    std::cerr << "ps_datagen: cannot write " << path << "\n";
    return false;
  }
  std::vector<float> p, labels;
  p.reserve(rows);
  labels.reserve(rows);
  std::string line;
  for (uint64_t i = 0; i < rows; ++i) {
    double prob;
    synth->NextRow(&line, &prob);
    file << line << '\n';
    p.push_back(static_cast<float>(prob));
    labels.push_back(line[0] == '1' ? 1.0f : 0.0f);
    out->clicks += line[0] == '1';
  }
  file.close();
  if (!file) {
    std::cerr << "ps_datagen: write to " << path << " failed\n";
    return false;
  }
  out->rows = rows;
  out->auc = ps::train::Auc(p, labels);
  out->logloss = ps::train::LogLoss(p, labels);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "writes Criteo-shaped TSV from a planted model.\n"
      "  ps_datagen --rows=1000000 --eval_rows=200000 --model=fm "
      "--output=train.tsv --eval_output=eval.tsv");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  ps::datagen::PlantedOptions planted;
  if (FLAGS_model == "lr") {
    planted.kind = ps::datagen::PlantedOptions::Kind::kLr;
  } else if (FLAGS_model == "fm") {
    planted.kind = ps::datagen::PlantedOptions::Kind::kFm;
    planted.weight_stddev = 0.1f;
  } else {
    std::cerr << "ps_datagen: --model must be lr or fm, not '" << FLAGS_model
              << "'\n";
    return 2;
  }
  if (FLAGS_rows == 0 || FLAGS_fm_dim < 1 || FLAGS_max_vocab < 3 ||
      !(FLAGS_factor_rank >= 0)) {
    std::cerr << "ps_datagen: need --rows >= 1, --fm_dim >= 1, "
                 "--max_vocab >= 3, --factor_rank >= 0\n";
    return 2;
  }
  planted.seed = FLAGS_seed;
  planted.bias = static_cast<float>(FLAGS_bias);
  if (!gflags::GetCommandLineFlagInfoOrDie("weight_stddev").is_default ||
      planted.kind == ps::datagen::PlantedOptions::Kind::kLr) {
    planted.weight_stddev = static_cast<float>(FLAGS_weight_stddev);
  }
  planted.fm_dim = FLAGS_fm_dim;
  planted.factor_stddev = static_cast<float>(FLAGS_factor_stddev);
  ps::datagen::PlantedModel model(planted);
  ps::datagen::SynthOptions synth_options{
      FLAGS_seed, FLAGS_max_vocab, FLAGS_zipf_exponent, FLAGS_factor_rank};
  ps::datagen::CriteoSynth synth(synth_options, &model);

  Written train, eval;
  if (!WriteRows(&synth, FLAGS_rows, FLAGS_output, &train)) return 1;
  if (FLAGS_eval_rows > 0 &&
      !WriteRows(&synth, FLAGS_eval_rows, FLAGS_eval_output, &eval)) {
    return 1;
  }
  std::printf(
      "ps_datagen: %llu rows -> %s (CTR %.3f), planted %s: AUC %.4f "
      "logloss %.4f\n",
      static_cast<unsigned long long>(train.rows), FLAGS_output.c_str(),
      static_cast<double>(train.clicks) / train.rows, FLAGS_model.c_str(),
      train.auc, train.logloss);
  if (eval.rows > 0) {
    std::printf(
        "ps_datagen: %llu rows -> %s (CTR %.3f), planted %s: AUC %.4f "
        "logloss %.4f\n",
        static_cast<unsigned long long>(eval.rows), FLAGS_eval_output.c_str(),
        static_cast<double>(eval.clicks) / eval.rows, FLAGS_model.c_str(),
        eval.auc, eval.logloss);
  }
  const Written& best = eval.rows > 0 ? eval : train;
  std::printf("planted optimum AUC %.4f logloss %.4f\n", best.auc,
              best.logloss);
  if (!FLAGS_metrics_json.empty()) {
    std::ofstream json(FLAGS_metrics_json);
    json << "{\"planted_model\": \"" << FLAGS_model
         << "\", \"planted_auc\": " << best.auc
         << ", \"planted_logloss\": " << best.logloss
         << ", \"train_rows\": " << train.rows
         << ", \"eval_rows\": " << eval.rows << "}\n";
    if (!json) {
      std::cerr << "ps_datagen: cannot write " << FLAGS_metrics_json << "\n";
      return 1;
    }
  }
  return 0;
}
