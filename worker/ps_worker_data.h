// ps_worker's data flags: --data_format and --csv_columns (defined in
// ps_worker_data.cc), checked at start against --train_data's header, and
// the fields deepfm's MLP gets from a CSV log. Called from main's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status_or.h"
#include "worker/data/line_parsers.h"

namespace ps::worker {

struct DataFlags {
  data::DataFormat format = data::DataFormat::kCriteo;
  std::string csv_spec;
  // A CSV log's feature columns (its fields), when --train_data is a file
  // that can be read twice; nullopt for other formats and for a pipe (whose
  // header only the trainer reads).
  std::optional<uint32_t> csv_fields;
};

// The flags, the csv spec resolved against `train_data`'s header line:
// kInvalidArgument naming the flag that is wrong, kNotFound / kIOError for
// the file.
StatusOr<DataFlags> ResolveDataFlags(const std::string& train_data);

}  // namespace ps::worker
