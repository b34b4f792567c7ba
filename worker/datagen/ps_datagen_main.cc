// ps_datagen: writes click logs labelled by a planted model and prints that
// model's own AUC and logloss on what it wrote: the best any model can do on
// the data. --layout picks what the log looks like (layout.h): Criteo TSV
// (the default), a one-hot libsvm log shaped like the Frappe app-usage log,
// or a CSV shaped like the Avazu CTR log. The defaults (--max_vocab,
// --factor_rank) keep the planted model learnable from about 1M rows, so the
// printed optimum is one a good learner can come close to, not just an upper
// bound.
// --vocab=criteo gives the fields the Criteo Kaggle log's value counts and
// long tails instead (vocabulary.h): there values seen once carry planted
// weights nobody can learn, and the optimum is an upper bound.
#include <gflags/gflags.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "cli/flags.h"
#include "cli/guarded_main.h"
#include "worker/datagen/avazu_synth.h"
#include "worker/datagen/bias_calibration.h"
#include "worker/datagen/criteo_synth.h"
#include "worker/datagen/layout.h"
#include "worker/datagen/onehot_synth.h"
#include "worker/datagen/planted_model.h"
#include "worker/datagen/row_synth.h"
#include "worker/eval/metrics.h"

DEFINE_uint64(rows, 1000000,
              "Training rows to write, in [1, 100000000] (the planted "
              "model's AUC keeps 12 bytes per row in memory).");
DEFINE_uint64(eval_rows, 200000,
              "Held-out rows to write (0: none), at most 100000000.");
DEFINE_string(output, "train.tsv", "Where the training rows go.");
DEFINE_string(eval_output, "eval.tsv",
              "Where the held-out rows go (in the same layout; an Avazu "
              "file has its own header).");
DEFINE_string(layout, "criteo",
              "What the log looks like. 'criteo': TSV of a 0/1 label, 13 "
              "integer columns and 26 categorical 8-hex-digit tokens (the "
              "Criteo log's; --vocab shapes the fields). 'onehot': a one-hot "
              "libsvm/libFM log shaped like the Frappe app-usage log, lines "
              "'label idx:1 ...' with one feature in each of 10 fields "
              "(user 957 values, item 4082, then daytime 7, weekday 7, "
              "isweekend 2, homework 3, cost 2, weather 9, country 80, city "
              "233: 5382 in all, times --vocab_scale), idx a global 1-based "
              "index unique across fields; about a third of the rows are "
              "clicks. 'avazu': a CSV shaped like the Avazu CTR log, the "
              "header id,click,hour,C1,banner_pos,site_id,...,C21 (24 "
              "columns, comma-separated, no quoting; read it with "
              "--data_format=csv --csv_columns=\"label=click ignore=id\"), "
              "id a unique 64-bit number, hour YYMMDDHH over 10 days, the "
              "site/app/device columns 8-hex-digit ids with the real log's "
              "value counts (device_ip 6.7M and device_id 2.7M, long-tailed; "
              "times --vocab_scale), the others small integers; about 17% "
              "clicks. The planted model sees the categorical columns and "
              "the hour of the day.");
DEFINE_string(model, "lr",
              "Planted model: 'lr' (logistic regression) or 'fm' "
              "(factorization machine: pairwise feature interactions).");
DEFINE_uint64(seed, 1, "Seed: the same seed and flags give the same files.");
DEFINE_string(vocab, "small",
              "--layout=criteo: shape of the 26 categorical fields' "
              "vocabularies. 'small': "
              "--max_vocab and --zipf_exponent set them (at most thousands "
              "of values a field at the default; the fast tests and the demo "
              "use it). 'criteo': each field has as many values as the same "
              "field of the Criteo Kaggle click log (from 3 to 10.1M; times "
              "--vocab_scale) and its own Zipf exponent, so the big fields "
              "have the real log's long tail of values seen once. Sampled in "
              "constant memory per field.");
DEFINE_double(vocab_scale, 1,
              "--vocab=criteo, --layout=onehot and --layout=avazu: multiplies "
              "every field's value count (each keeps at least 2; Avazu's "
              "columns of fewer than 100 values, its enumerations, keep "
              "theirs), e.g. 0.1 for quicker tests; the skew of each field "
              "stays. In [1e-6, 10].");
DEFINE_uint32(max_vocab, 100,
              "--layout=criteo --vocab=small: largest categorical vocabulary; "
              "the 26 fields "
              "get this divided by 1, 3, 9, ... 729 (at least 3); in [3, "
              "10000000] "
              "(each value has a slot in a frequency table). 100 keeps the "
              "rarest value above a thousand rows per 1M, so the planted "
              "model's parameters (w and 8 factors per value) can be "
              "estimated from about 1M rows: at 3000, values seen a few "
              "dozen times carry planted weights no model can learn, every "
              "model overfits them, and the printed optimum is out of "
              "reach.");
DEFINE_double(zipf_exponent, 1.1,
              "--layout=criteo --vocab=small: skew of category frequencies, "
              "in [0, 10] (0: uniform). --vocab=criteo and the other layouts "
              "set one per field.");
DEFINE_double(bias, -1.2,
              "Planted bias: sets the click rate; in [-30, 30]. "
              "--layout=criteo: -1.2 when unset. --layout=onehot and avazu: "
              "when unset, the bias that gives the layout its click rate (a "
              "third, 17%) under the planted weights and --model, found on "
              "20000 sample rows.");
DEFINE_double(weight_stddev, 0.2,
              "Spread of planted feature weights, in [0, 10] (more puts "
              "every click probability at 0 or 1). Unset: 0.2 (--model=fm: "
              "0.1); --layout=onehot 0.5 and --layout=avazu 0.3 (halved for "
              "fm), as their rows have fewer features (10, 22) than "
              "Criteo's 39 and need more weight each for a like signal.");
DEFINE_int32(fm_dim, 8,
             "Planted FM factor dimension (--model=fm), in [1, 256].");
DEFINE_double(factor_stddev, 0.12, "Spread of planted FM factors, in [0, 10].");
DEFINE_double(factor_rank, 30,
              "--model=fm: the planted factors of a category of frequency "
              "rank r in its field (0: most frequent) are scaled by "
              "min(1, (factor_rank / (r + 1))^2), so the strong "
              "interactions are among values frequent enough to learn from "
              "about 1M rows (a factor of a value seen a few hundred times "
              "cannot be estimated by any model). 0: all factors at full "
              "spread. The printed optimum is this planted model's own. In "
              "[0, 1e9].");
DEFINE_string(metrics_json, "",
              "If set, also write the planted optimum as JSON to this file.");

namespace {

constexpr int kExitFailed = 1, kExitUsage = 2;

// Bounds (see the flags' help): rows cost 12 bytes each in memory for the
// planted AUC, --vocab=small values a slot each (--vocab=criteo none: its
// scale bounds a field at 10^8 values, which only the token hash sees); the
// real-valued parameters beyond theirs make every probability 0 or 1 (or,
// unbounded, inf - inf).
constexpr uint64_t kMaxRows = 100000000;
constexpr uint32_t kMaxVocab = 10000000;
constexpr int32_t kMaxFmDim = 256;
constexpr double kMinVocabScale = 1e-6, kMaxVocabScale = 10;
constexpr double kMinBias = -30, kMaxBias = 30;
// Rows drawn to calibrate the bias: its click rate is then within about
// 0.3 percentage points of the target, at a few tens of milliseconds.
constexpr int kCalibrationRows = 20000;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "ps_datagen: %s\n", message.c_str());
  return code;
}

bool IsDefault(const char* flag) {
  return gflags::GetCommandLineFlagInfoOrDie(flag).is_default;
}

// A flag of the other vocabulary shape, set: it would be ignored, so say so.
ps::Status CheckVocabFlags(ps::datagen::VocabShape vocab) {
  if (vocab == ps::datagen::VocabShape::kCriteo) {
    if (!IsDefault("max_vocab")) {
      return ps::InvalidArgument(
          "--max_vocab must be left unset with --vocab=criteo (its fields "
          "have the Criteo log's value counts; scale them with "
          "--vocab_scale)");
    }
    if (!IsDefault("zipf_exponent")) {
      return ps::InvalidArgument(
          "--zipf_exponent must be left unset with --vocab=criteo (each of "
          "its fields has its own exponent)");
    }
    return ps::cli::CheckRealFlag("vocab_scale", FLAGS_vocab_scale,
                                  kMinVocabScale, kMaxVocabScale);
  }
  if (!IsDefault("vocab_scale")) {
    return ps::InvalidArgument(
        "--vocab_scale must be left unset with --vocab=small (it scales "
        "--vocab=criteo; use --max_vocab)");
  }
  return ps::Status::OK();
}

// --layout=onehot and avazu have their own fields: the Criteo layout's
// vocabulary flags would be ignored, so say so.
ps::Status CheckLayoutFlags() {
  for (const char* flag : {"vocab", "max_vocab", "zipf_exponent"}) {
    if (!IsDefault(flag)) {
      return ps::InvalidArgument(
          std::string("--") + flag +
          " must be left unset with --layout=" + FLAGS_layout +
          " (it shapes --layout=criteo's fields; this layout has its own, "
          "scaled by --vocab_scale)");
    }
  }
  return ps::cli::CheckRealFlag("vocab_scale", FLAGS_vocab_scale,
                                kMinVocabScale, kMaxVocabScale);
}

// Every flag before anything is allocated or written; *layout is --layout,
// *vocab is --vocab.
ps::Status CheckFlags(ps::datagen::Layout* layout,
                      ps::datagen::VocabShape* vocab) {
  using ps::cli::CheckIntFlag;
  using ps::cli::CheckRealFlag;
  using ps::cli::CheckUintFlag;
  if (FLAGS_model != "lr" && FLAGS_model != "fm") {
    return ps::InvalidArgument("--model must be lr or fm, not '" + FLAGS_model +
                               "'");
  }
  ps::StatusOr<ps::datagen::Layout> parsed_layout =
      ps::datagen::ParseLayout(FLAGS_layout);
  if (!parsed_layout.ok()) return parsed_layout.status();
  *layout = *parsed_layout;
  if (*layout == ps::datagen::Layout::kCriteo) {
    ps::StatusOr<ps::datagen::VocabShape> shape =
        ps::datagen::ParseVocabShape(FLAGS_vocab);
    if (!shape.ok()) return shape.status();
    *vocab = *shape;
    PS_RETURN_IF_ERROR(CheckVocabFlags(*vocab));
  } else {
    PS_RETURN_IF_ERROR(CheckLayoutFlags());
  }
  PS_RETURN_IF_ERROR(CheckUintFlag("rows", FLAGS_rows, 1, kMaxRows));
  PS_RETURN_IF_ERROR(CheckUintFlag("eval_rows", FLAGS_eval_rows, 0, kMaxRows));
  PS_RETURN_IF_ERROR(CheckUintFlag("max_vocab", FLAGS_max_vocab, 3, kMaxVocab));
  PS_RETURN_IF_ERROR(CheckIntFlag("fm_dim", FLAGS_fm_dim, 1, kMaxFmDim));
  PS_RETURN_IF_ERROR(
      CheckRealFlag("zipf_exponent", FLAGS_zipf_exponent, 0, 10));
  PS_RETURN_IF_ERROR(CheckRealFlag("bias", FLAGS_bias, kMinBias, kMaxBias));
  PS_RETURN_IF_ERROR(
      CheckRealFlag("weight_stddev", FLAGS_weight_stddev, 0, 10));
  PS_RETURN_IF_ERROR(
      CheckRealFlag("factor_stddev", FLAGS_factor_stddev, 0, 10));
  PS_RETURN_IF_ERROR(CheckRealFlag("factor_rank", FLAGS_factor_rank, 0, 1e9));
  return ps::Status::OK();
}

struct Written {
  uint64_t rows = 0, clicks = 0;
  double auc = 0, logloss = 0;
};

std::unique_ptr<ps::datagen::RowSynth> MakeSynth(
    ps::datagen::Layout layout, const ps::datagen::SynthOptions& options,
    const ps::datagen::PlantedModel* model) {
  switch (layout) {
    case ps::datagen::Layout::kOnehot:
      return std::make_unique<ps::datagen::OnehotSynth>(options, model);
    case ps::datagen::Layout::kAvazu:
      return std::make_unique<ps::datagen::AvazuSynth>(options, model);
    case ps::datagen::Layout::kCriteo:
      break;
  }
  return std::make_unique<ps::datagen::CriteoSynth>(options, model);
}

// The bias that gives `layout` its click rate under the planted weights
// (bias_calibration.h). The sample is the first rows to be written (a synth
// of the same seed: the same tokens and so the same planted weights, whose
// few head values, such as Avazu's C1=1005 in 9 rows of 10, move the click
// rate most); their features do not depend on the bias, their labels do.
double CalibratedBias(ps::datagen::Layout layout,
                      const ps::datagen::SynthOptions& options,
                      ps::datagen::PlantedOptions planted) {
  double rate = layout == ps::datagen::Layout::kOnehot
                    ? ps::datagen::OnehotSynth::kClickRate
                    : ps::datagen::AvazuSynth::kClickRate;
  planted.bias = 0;
  ps::datagen::PlantedModel model(planted);
  std::unique_ptr<ps::datagen::RowSynth> synth =
      MakeSynth(layout, options, &model);
  return ps::datagen::CalibrateBias(synth.get(), kCalibrationRows, rate,
                                    kMinBias, kMaxBias);
}

// Writes `rows` rows to `path`; returns what the planted model scores on them.
ps::Status WriteRows(ps::datagen::RowSynth* synth, uint64_t rows,
                     const std::string& path, Written* out) {
  std::ofstream file(path, std::ios::binary);
  if (!file) return ps::IOError("cannot write " + path);
  if (std::string header = synth->Header(); !header.empty()) {
    file << header << '\n';
  }
  std::vector<float> p, labels;
  p.reserve(rows);
  labels.reserve(rows);
  std::string line;
  for (uint64_t i = 0; i < rows; ++i) {
    double prob;
    int label = synth->NextRow(&line, &prob);
    file << line << '\n';
    p.push_back(static_cast<float>(prob));
    labels.push_back(static_cast<float>(label));
    out->clicks += label;
  }
  file.close();
  if (!file) return ps::IOError("write to " + path + " failed");
  out->rows = rows;
  out->auc = ps::eval::Auc(p, labels);
  out->logloss = ps::eval::LogLoss(p, labels);
  // Auc is NaN when a probability is not finite; the flag bounds keep the
  // planted logits finite, so this is a bug, not a usage error.
  if (std::isnan(out->auc) || std::isnan(out->logloss)) {
    return ps::Internal("the planted model's click probabilities on " + path +
                        " are not all finite");
  }
  return ps::Status::OK();
}

int Main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "writes click logs labelled by a planted model: Criteo-shaped TSV, "
      "or a one-hot libsvm log, or an Avazu-shaped CSV (--layout).\n"
      "  ps_datagen --rows=1000000 --eval_rows=200000 --model=fm "
      "--output=train.tsv --eval_output=eval.tsv\n"
      "  ps_datagen --vocab=criteo ...   fields with the Criteo Kaggle log's "
      "value counts (up to 10.1M) and long tails\n"
      "  ps_datagen --layout=onehot --rows=50000 --output=train.libsvm "
      "--eval_output=eval.libsvm\n"
      "  ps_datagen --layout=avazu --rows=100000 --output=train.csv "
      "--eval_output=eval.csv\n"
      "Exit status: 0 done, 1 failed (a file cannot be written), 2 bad "
      "usage.");
  if (ps::Status s = ps::cli::PrecheckFlags(argc, argv); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (argc > 1) {
    return Fail(kExitUsage, "unexpected argument '" + std::string(argv[1]) +
                                "' (see --help)");
  }
  ps::datagen::Layout layout = ps::datagen::Layout::kCriteo;
  ps::datagen::VocabShape vocab = ps::datagen::VocabShape::kSmall;
  if (ps::Status s = CheckFlags(&layout, &vocab); !s.ok()) {
    return Fail(kExitUsage, s.message());
  }
  ps::datagen::PlantedOptions planted;
  if (FLAGS_model == "lr") {
    planted.kind = ps::datagen::PlantedOptions::Kind::kLr;
  } else {
    planted.kind = ps::datagen::PlantedOptions::Kind::kFm;
    planted.weight_stddev = 0.1f;
  }
  planted.seed = FLAGS_seed;
  planted.bias = static_cast<float>(FLAGS_bias);
  if (!IsDefault("weight_stddev") ||
      planted.kind == ps::datagen::PlantedOptions::Kind::kLr) {
    planted.weight_stddev = static_cast<float>(FLAGS_weight_stddev);
  }
  if (layout != ps::datagen::Layout::kCriteo && IsDefault("weight_stddev")) {
    // Halved for FM, as the Criteo layout's 0.1: its interactions add the
    // rest of the signal.
    double lr_stddev = layout == ps::datagen::Layout::kOnehot
                           ? ps::datagen::OnehotSynth::kWeightStddev
                           : ps::datagen::AvazuSynth::kWeightStddev;
    planted.weight_stddev = static_cast<float>(
        planted.kind == ps::datagen::PlantedOptions::Kind::kLr ? lr_stddev
                                                               : lr_stddev / 2);
  }
  planted.fm_dim = FLAGS_fm_dim;
  planted.factor_stddev = static_cast<float>(FLAGS_factor_stddev);
  ps::datagen::SynthOptions synth_options;
  synth_options.seed = FLAGS_seed;
  synth_options.vocab = vocab;
  synth_options.max_vocab = FLAGS_max_vocab;
  synth_options.zipf_exponent = FLAGS_zipf_exponent;
  synth_options.vocab_scale = FLAGS_vocab_scale;
  synth_options.factor_rank = FLAGS_factor_rank;
  if (layout != ps::datagen::Layout::kCriteo && IsDefault("bias")) {
    planted.bias =
        static_cast<float>(CalibratedBias(layout, synth_options, planted));
    std::printf(
        "ps_datagen: planted bias %.4f (calibrated to the layout's "
        "click rate)\n",
        planted.bias);
  }
  ps::datagen::PlantedModel model(planted);
  std::unique_ptr<ps::datagen::RowSynth> synth =
      MakeSynth(layout, synth_options, &model);

  Written train, eval;
  if (ps::Status s = WriteRows(synth.get(), FLAGS_rows, FLAGS_output, &train);
      !s.ok()) {
    return Fail(kExitFailed, s.ToString());
  }
  if (FLAGS_eval_rows > 0) {
    ps::Status s =
        WriteRows(synth.get(), FLAGS_eval_rows, FLAGS_eval_output, &eval);
    if (!s.ok()) return Fail(kExitFailed, s.ToString());
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
         << ", \"eval_rows\": " << eval.rows << ", \"layout\": \""
         << FLAGS_layout << "\", \"planted_bias\": " << planted.bias << "}\n";
    if (!json) return Fail(kExitFailed, "cannot write " + FLAGS_metrics_json);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ps::cli::GuardedMain("ps_datagen", [&] { return Main(argc, argv); });
}
