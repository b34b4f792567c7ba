// Loading and checking table specs. Tables come from a text-format
// TableConfig file (configs/*.tables); every field is checked before a server
// allocates anything, and every problem names the table and the field.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/status_or.h"
#include "kernels/optimizers.h"
#include "kernels/quantize.h"
#include "protocol/ps.pb.h"

namespace ps::protocol {

// Reads and validates a text-format TableConfig, and normalises each spec
// (NormalizeTableSpec in spec_choices.h: string and enum choices agree).
// kNotFound / kIOError for the file, kInvalidArgument for its content (with
// line and column from the parser, or the table and field at fault).
StatusOr<proto::TableConfig> LoadTableConfig(const std::string& path);
// Parses text-format content (for tests and flags that carry it inline).
StatusOr<proto::TableConfig> ParseTableConfig(const std::string& text);

// The largest admit_after_examples (the workers' sketch counts to 65535).
inline constexpr uint32_t kMaxAdmitAfterExamples = 65535;
// The largest admit_after_pushes of an EXACT table (its server-side sketch,
// table/admission_sketch.h, counts to 65535 too).
inline constexpr uint32_t kMaxAdmitAfterPushes = 65535;
// The largest evict_after_seconds (about 31 years; the table keeps a row's
// last update in seconds as 32 bits).
inline constexpr uint64_t kMaxEvictAfterSeconds = 1000000000;

// Checks one table: dim >= 1, capacity >= 1, known optimizer with valid
// hyper-parameters, known sparsify method and initializer (by string or
// enum, and the two agreeing), EXACT settings (admit_after_pushes in
// [1, kMaxAdmitAfterPushes], a known when_full, evict_after_seconds at
// most kMaxEvictAfterSeconds; when_full and evictions only on EXACT tables),
// admit_after_examples (in
// [0, kMaxAdmitAfterExamples]) or adaptive_admission (reliability in
// [0, 1)), neither on DENSE tables.
Status ValidateTableSpec(const proto::TableSpec& spec);

// The kernels' optimizer for a spec (OPTIMIZER_SUM has none: returns
// kNotFound).
StatusOr<kernels::OptimizerConfig> OptimizerFromSpec(
    const proto::OptimizerSpec& spec);

// The spec a server applies pushes with, one by one, when `pushes_per_step`
// workers each push their share of every step (async and ssp jobs; a bsp
// job's host tables fold a step's pushes instead: server/shard.h). SGD,
// Adagrad and FTRL add the pushes' gradients, which sums to about the
// step's; Adam's step size does not depend on the gradient's, so each push
// would move a row as far as a whole step, and N workers would train at N
// times the rate of --local. Its learning rate is divided among the pushes.
// pushes_per_step >= 1.
proto::TableSpec SpecPerPush(const proto::TableSpec& spec,
                             uint32_t pushes_per_step);

kernels::ValueType ValueTypeFromProto(proto::ValueType type);

}  // namespace ps::protocol
