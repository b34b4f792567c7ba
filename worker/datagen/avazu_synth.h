// AvazuSynth: a CSV shaped like the Avazu CTR log (Kaggle "Click-Through
// Rate Prediction", 2014): a header, then rows of the 24 columns
//
//   id,click,hour,C1,banner_pos,site_id,site_domain,site_category,app_id,
//   app_domain,app_category,device_id,device_ip,device_model,device_type,
//   device_conn_type,C14,C15,C16,C17,C18,C19,C20,C21
//
// comma-separated, never quoted: id a unique 64-bit decimal, click 0/1 from
// the planted model, hour YYMMDDHH over the log's 10 days (14102100 to
// 14103023), the site/app/device columns 8-hex-digit hashed ids, the others
// small integers (see avazu_synth.cc for each column's value count, taken
// from the real log, and skew). As in the real log, a row is either site or
// app traffic: the other side's three columns hold their one "none" value.
// The planted model sees the 21 categorical columns, each value's id the
// one the CSV reader gives it (HashFeature(field, text), C1 field 1, ...),
// and the hour of the day (not the day: an hour effect that recurs daily, as
// in click logs; the reader sees the YYMMDDHH token, of which it is a
// function), not id.
//
// For ps_worker --data_format=csv --csv_columns="label=click ignore=id"
// (every other column categorical). Columns of 100 values or more scale with
// SynthOptions::vocab_scale (at least 2 values); the enumerations (C1,
// banner_pos, the categories, device_type, ...) keep theirs. At scale 1
// device_ip has 6.7M values and device_id 2.7M, so, as in the real log, most
// of their values are seen once and the planted optimum is an upper bound.
// Deterministic for a seed and the options.
//
// Thread safety: none; one AvazuSynth per thread.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "worker/datagen/categorical_fields.h"
#include "worker/datagen/planted_model.h"
#include "worker/datagen/row_synth.h"

namespace ps::datagen {

class AvazuSynth : public RowSynth {
 public:
  // The click rate ps_datagen plants when --bias is left unset: the real
  // log's training CTR (about 17%).
  static constexpr double kClickRate = 0.17;
  static constexpr int kColumns = 24;

  // The planted weights' spread (--model=lr; halved for fm) when
  // --weight_stddev is left unset: its planted optimum AUC about 0.76 for LR
  // (what good models reach on the real log), 0.7 for FM.
  static constexpr double kWeightStddev = 0.3;

  // Reads options.seed, factor_rank and vocab_scale.
  AvazuSynth(const SynthOptions& options, const PlantedModel* model);

  std::string Header() const override;
  int NextRow(std::string* line, double* probability) override;

  // The number of values of file column `column` (0: id, 1: click: 0; 2:
  // hour: 240) at this synth's scale.
  uint64_t ColumnValues(int column) const;

 private:
  const PlantedModel* model_;
  std::mt19937_64 rng_;
  CategoricalFields fields_;  // one per categorical column, from C1 on
  double factor_rank_;
  uint64_t token_salt_, id_salt_;
  uint64_t rows_ = 0;
  std::vector<uint64_t> ids_;
  std::vector<float> feature_scale_;
};

}  // namespace ps::datagen
