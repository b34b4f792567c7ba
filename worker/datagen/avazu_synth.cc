#include "worker/datagen/avazu_synth.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "protocol/shard_map.h"
#include "worker/data/feature_hash.h"

namespace ps::datagen {
namespace {

// How a column's value of frequency rank r is written.
enum class Kind {
  kHashed,   // 8 hex digits, HashedToken
  kEnum,     // the r-th of a list of integers
  kInteger,  // base + r * step + (a hash of r) % step: distinct per rank
};

// Site traffic fills the site columns and leaves the app columns at their
// "none" value (rank 0), app traffic the other way round.
enum class Side { kBoth, kSite, kApp };

struct Column {
  const char* name;
  Kind kind;
  // Distinct values in the real log's training file (40,428,967 rows, 10
  // days), as commonly tabulated from it (our notes, not re-counted here:
  // we have no copy of the log); for kEnum the list's length.
  uint64_t values;
  // Zipf exponent of the ranks (after the rank-0 share below, if any).
  // Chosen, not fitted: the enumerations steep (C1 1005, device_type 1,
  // C15/C16 320x50 are 80-90% of the real log), ids about 1, the two
  // huge id columns flat so that most of their values are rare.
  double exponent;
  Side side = Side::kBoth;
  // Share of rows whose value is rank 0 whatever the Zipf law says: the real
  // device_id is "a99f214a" (no id) in about 82% of rows, C20 is -1 in
  // about 47%.
  double head = 0;
  int list[9] = {};            // kEnum: the first `values`
  int64_t base = 0, step = 1;  // kInteger
};

// File columns 3..23 (0: id, 1: click, 2: hour). The integer lists and
// ranges are the real log's most frequent values first.
const Column kCategoricalColumns[] = {
    {"C1",
     Kind::kEnum,
     7,
     3.5,
     Side::kBoth,
     0,
     {1005, 1002, 1010, 1012, 1007, 1001, 1008}},
    {"banner_pos", Kind::kEnum, 7, 2.2, Side::kBoth, 0, {0, 1, 7, 2, 4, 5, 3}},
    {"site_id", Kind::kHashed, 4737, 1.1, Side::kSite},
    {"site_domain", Kind::kHashed, 7745, 1.1, Side::kSite},
    {"site_category", Kind::kHashed, 26, 1.5, Side::kSite},
    {"app_id", Kind::kHashed, 8552, 1.1, Side::kApp},
    {"app_domain", Kind::kHashed, 559, 1.3, Side::kApp},
    {"app_category", Kind::kHashed, 36, 1.5, Side::kApp},
    {"device_id", Kind::kHashed, 2686408, 0.6, Side::kBoth, 0.82},
    {"device_ip", Kind::kHashed, 6729486, 0.75},
    {"device_model", Kind::kHashed, 8251, 1.0},
    {"device_type", Kind::kEnum, 5, 3.5, Side::kBoth, 0, {1, 0, 4, 5, 2}},
    {"device_conn_type", Kind::kEnum, 4, 3.0, Side::kBoth, 0, {0, 2, 3, 5}},
    {"C14", Kind::kInteger, 2626, 1.0, Side::kBoth, 0, {}, 375, 9},
    {"C15",
     Kind::kEnum,
     8,
     3.5,
     Side::kBoth,
     0,
     {320, 300, 216, 728, 120, 1024, 480, 768}},
    {"C16",
     Kind::kEnum,
     9,
     3.5,
     Side::kBoth,
     0,
     {50, 250, 36, 480, 90, 20, 768, 320, 1024}},
    {"C17", Kind::kInteger, 435, 1.0, Side::kBoth, 0, {}, 112, 6},
    {"C18", Kind::kEnum, 4, 1.5, Side::kBoth, 0, {0, 3, 2, 1}},
    {"C19", Kind::kInteger, 68, 1.2, Side::kBoth, 0, {}, 33, 28},
    // Rank 0 is written -1 (the real log's "none"), the others from 100000.
    {"C20", Kind::kInteger, 172, 1.0, Side::kBoth, 0.47, {}, 100000, 1},
    {"C21", Kind::kInteger, 60, 1.2, Side::kBoth, 0, {}, 1, 3},
};
constexpr int kCategorical =
    sizeof(kCategoricalColumns) / sizeof(kCategoricalColumns[0]);
constexpr int kFirstCategorical = 3;  // file column of C1
constexpr int kHourColumn = 2;
// Field numbers as ps_worker --data_format=csv --csv_columns="label=click
// ignore=id" reads the file (csv_layout.h: the feature columns in header
// order), so the planted model's ids of the categorical columns are the
// reader's: hour is field 0, C1 field 1, ...
constexpr uint32_t kHourField = 0, kFirstCategoricalField = 1;
static_assert(kFirstCategorical + kCategorical == AvazuSynth::kColumns);

// The real log's share of app traffic (its rows with site_id "85f751fd").
constexpr double kAppShare = 0.36;
constexpr int kDays = 10, kFirstDay = 21;  // 2014-10-21 .. 2014-10-30

// A column's rank 0 is its "none" value drawn outside the Zipf law.
bool HasNoneValue(const Column& c) {
  return c.side != Side::kBoth || c.head > 0;
}

uint64_t ScaledValues(const Column& c, double scale) {
  // Enumerations (categories, positions, sizes) do not grow with a log.
  if (c.values < 100) return c.values;
  return static_cast<uint64_t>(
      std::max(2.0, std::round(static_cast<double>(c.values) * scale)));
}

std::vector<FieldVocabulary> Vocabularies(double scale) {
  std::vector<FieldVocabulary> fields;
  for (const Column& c : kCategoricalColumns) {
    // Columns with a "none" value draw the others, ranks 1.., from Zipf.
    uint64_t n = ScaledValues(c, scale) - (HasNoneValue(c) ? 1 : 0);
    fields.push_back({n, c.exponent});
  }
  return fields;
}

}  // namespace

AvazuSynth::AvazuSynth(const SynthOptions& options, const PlantedModel* model)
    : model_(model),
      // Another stream than the other layouts' for the same seed.
      rng_(options.seed ^ 0x6176617a75ULL),
      fields_(Vocabularies(options.vocab_scale),
              CategoricalFields::Sampling::kRejection),
      factor_rank_(options.factor_rank),
      token_salt_(options.seed * 7919 + 0x61),
      id_salt_(protocol::Mix64(options.seed ^ 0x6964ULL)) {}

std::string AvazuSynth::Header() const {
  std::string header = "id,click,hour";
  for (const Column& c : kCategoricalColumns) {
    header += ',';
    header += c.name;
  }
  return header;
}

uint64_t AvazuSynth::ColumnValues(int column) const {
  if (column < kHourColumn) return 0;
  if (column == kHourColumn) return kDays * 24;
  int c = column - kFirstCategorical;
  return fields_.vocabulary(c).size +
         (HasNoneValue(kCategoricalColumns[c]) ? 1 : 0);
}

int AvazuSynth::NextRow(std::string* line, double* probability) {
  std::uniform_real_distribution<double> unit(0, 1);
  char buf[32];
  ids_.clear();
  feature_scale_.clear();

  int hour =
      std::min(kDays * 24 - 1, static_cast<int>(unit(rng_) * kDays * 24));
  std::snprintf(buf, sizeof(buf), "1410%02d%02d", kFirstDay + hour / 24,
                hour % 24);
  std::string rest = ",";
  rest += buf;
  // The planted model sees the hour of the day, as a feature of its own.
  std::snprintf(buf, sizeof(buf), "%02d", hour % 24);
  ids_.push_back(data::HashFeature(kHourField, buf));
  feature_scale_.push_back(1.0f);  // 24 values, all frequent

  bool app = unit(rng_) < kAppShare;
  for (int c = 0; c < kCategorical; ++c) {
    const Column& column = kCategoricalColumns[c];
    bool none = (column.side == Side::kSite && app) ||
                (column.side == Side::kApp && !app) ||
                (column.head > 0 && unit(rng_) < column.head);
    uint64_t rank = none ? 0 : fields_.SampleRank(c, rng_);
    if (!none && HasNoneValue(column)) ++rank;
    uint32_t hash = HashedToken(token_salt_, c, rank);
    switch (column.kind) {
      case Kind::kHashed:
        std::snprintf(buf, sizeof(buf), "%08x", hash);
        break;
      case Kind::kEnum:
        std::snprintf(buf, sizeof(buf), "%d", column.list[rank]);
        break;
      case Kind::kInteger: {
        long long v = column.base + static_cast<long long>(rank) * column.step +
                      hash % column.step;
        if (column.head > 0 && rank == 0) v = -1;
        std::snprintf(buf, sizeof(buf), "%lld", v);
        break;
      }
    }
    rest += ',';
    rest += buf;
    ids_.push_back(data::HashFeature(kFirstCategoricalField + c, buf));
    feature_scale_.push_back(RankFactorScale(factor_rank_, rank));
  }
  *probability = model_->Probability(ids_, feature_scale_);
  int label = unit(rng_) < *probability ? 1 : 0;
  // A bijection of the row number: unique across the train and eval files.
  *line = std::to_string(protocol::Mix64(id_salt_ + rows_++));
  *line += label ? ",1" : ",0";
  *line += rest;
  return label;
}

}  // namespace ps::datagen
