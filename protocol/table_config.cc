#include "protocol/table_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <variant>

#include "protocol/spec_choices.h"

namespace ps::protocol {
namespace {

// Collects the text parser's complaints instead of letting it log them.
class ParseErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (!text_.empty()) text_ += "; ";
    text_ += "line " + std::to_string(line + 1) + " column " +
             std::to_string(column + 1) + ": " + message;
  }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace

StatusOr<proto::TableConfig> ParseTableConfig(const std::string& text) {
  proto::TableConfig config;
  google::protobuf::TextFormat::Parser parser;
  ParseErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return InvalidArgument("table config: " + errors.text());
  }
  if (config.table_size() == 0) {
    return InvalidArgument("table config defines no table");
  }
  std::set<uint32_t> ids;
  std::set<std::string> names;
  for (auto& t : *config.mutable_table()) {
    PS_RETURN_IF_ERROR(ValidateTableSpec(t));
    PS_RETURN_IF_ERROR(NormalizeTableSpec(&t));
    if (!ids.insert(t.id()).second) {
      return InvalidArgument("table id " + std::to_string(t.id()) +
                             " is used twice");
    }
    if (!names.insert(t.name()).second) {
      return InvalidArgument("table name '" + t.name() + "' is used twice");
    }
  }
  return config;
}

StatusOr<proto::TableConfig> LoadTableConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot open table config " + path);
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return IOError("cannot read table config " + path);
  auto config = ParseTableConfig(text.str());
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

StatusOr<kernels::OptimizerConfig> OptimizerFromSpec(
    const proto::OptimizerSpec& s) {
  PS_ASSIGN_OR_RETURN(proto::OptimizerKind kind, OptimizerKindOf(s));
  auto or_default = [](float v, float d) { return v != 0.0f ? v : d; };
  kernels::OptimizerConfig config;
  switch (kind) {
    case proto::OPTIMIZER_SGD:
      config = kernels::SgdConfig{or_default(s.learning_rate(), 0.01f)};
      break;
    case proto::OPTIMIZER_MOMENTUM:
      config = kernels::MomentumConfig{or_default(s.learning_rate(), 0.01f),
                                       or_default(s.momentum(), 0.9f)};
      break;
    case proto::OPTIMIZER_ADAGRAD:
      config = kernels::AdagradConfig{
          or_default(s.learning_rate(), 0.01f), or_default(s.epsilon(), 1e-8f),
          or_default(s.initial_accumulator(), 0.1f)};
      break;
    case proto::OPTIMIZER_ADAM:
      config = kernels::AdamConfig{
          or_default(s.learning_rate(), 0.001f), or_default(s.beta1(), 0.9f),
          or_default(s.beta2(), 0.999f), or_default(s.epsilon(), 1e-8f)};
      break;
    case proto::OPTIMIZER_FTRL:
      config = kernels::FtrlConfig{or_default(s.ftrl_alpha(), 0.05f),
                                   or_default(s.ftrl_beta(), 1.0f), s.ftrl_l1(),
                                   s.ftrl_l2()};
      break;
    default:  // OptimizerKindOf resolves UNSET to SUM
      return NotFound("optimizer 'sum' accumulates gradients as they are");
  }
  PS_RETURN_IF_ERROR(kernels::ValidateOptimizerConfig(config));
  return config;
}

proto::TableSpec SpecPerPush(const proto::TableSpec& spec,
                             uint32_t pushes_per_step) {
  proto::TableSpec out = spec;
  auto config = OptimizerFromSpec(spec.optimizer());
  if (pushes_per_step > 1 && config.ok()) {
    if (auto* adam = std::get_if<kernels::AdamConfig>(&*config)) {
      out.mutable_optimizer()->set_learning_rate(adam->learning_rate /
                                                 pushes_per_step);
    }
  }
  return out;
}

Status ValidateTableSpec(const proto::TableSpec& t) {
  const std::string where =
      "table '" + t.name() + "' (id " + std::to_string(t.id()) + ")";
  if (t.name().empty()) {
    return InvalidArgument("table id " + std::to_string(t.id()) +
                           " has no name");
  }
  if (t.dim() == 0 || t.dim() > 65536) {
    return InvalidArgument(where + ": dim must be in [1, 65536]");
  }
  if (t.capacity() == 0 || t.capacity() > (uint64_t{1} << 40)) {
    return InvalidArgument(where + ": capacity must be in [1, 2^40]");
  }
  if (!proto::ValueType_IsValid(t.push_value_type())) {
    return InvalidArgument(where + ": unknown push_value_type");
  }
  auto opt = OptimizerFromSpec(t.optimizer());
  if (!opt.ok() && !opt.status().Is(StatusCode::kNotFound)) {
    return opt.status().WithContext(where);
  }
  const auto& sp = t.sparsify();
  auto method = SparsifyMethodOf(sp);
  if (!method.ok()) return method.status().WithContext(where);
  if (*method == proto::SPARSIFY_THRESHOLD) {
    if (!(sp.epsilon() >= 0.0f) || !std::isfinite(sp.epsilon())) {
      return InvalidArgument(where + ": sparsify epsilon must be >= 0");
    }
  } else if (*method == proto::SPARSIFY_TOPK) {
    if (!(sp.topk_fraction() > 0.0f && sp.topk_fraction() <= 1.0f)) {
      return InvalidArgument(where + ": topk_fraction must be in (0, 1]");
    }
  }
  auto init = InitializerKindOf(t.initializer());
  if (!init.ok()) return init.status().WithContext(where);
  if (t.kind() == proto::EXACT &&
      (t.admit_after_pushes() == 0 ||
       t.admit_after_pushes() > kMaxAdmitAfterPushes)) {
    return InvalidArgument(where + ": admit_after_pushes must be in [1, " +
                           std::to_string(kMaxAdmitAfterPushes) + "], not " +
                           std::to_string(t.admit_after_pushes()));
  }
  if (t.kind() != proto::EXACT &&
      t.when_full() != proto::WHEN_FULL_EVICT_LEAST_RECENT) {
    return InvalidArgument(where + ": when_full is for EXACT tables");
  }
  if (t.kind() != proto::EXACT &&
      (t.evict_after_steps() != 0 || t.evict_after_seconds() != 0)) {
    return InvalidArgument(where +
                           ": evict_after_steps and evict_after_seconds are "
                           "for EXACT tables");
  }
  if (t.evict_after_seconds() > kMaxEvictAfterSeconds) {
    return InvalidArgument(where + ": evict_after_seconds must be at most " +
                           std::to_string(kMaxEvictAfterSeconds) +
                           " (0: never), not " +
                           std::to_string(t.evict_after_seconds()));
  }
  if (!proto::ExactWhenFull_IsValid(t.when_full())) {
    return InvalidArgument(where + ": unknown when_full " +
                           std::to_string(t.when_full()));
  }
  if (t.admit_after_examples() > kMaxAdmitAfterExamples) {
    return InvalidArgument(where + ": admit_after_examples must be in [0, " +
                           std::to_string(kMaxAdmitAfterExamples) +
                           "] (0: off), not " +
                           std::to_string(t.admit_after_examples()));
  }
  if (t.kind() == proto::DENSE &&
      (t.admit_after_examples() != 0 || t.has_adaptive_admission())) {
    return InvalidArgument(
        where +
        ": admit_after_examples and adaptive_admission are for HASHED and "
        "EXACT tables (a DENSE table's rows are not feature values)");
  }
  if (t.has_adaptive_admission()) {
    if (t.admit_after_examples() != 0) {
      return InvalidArgument(where +
                             ": admit_after_examples and adaptive_admission "
                             "exclude each other (a fixed threshold or one "
                             "set from the data)");
    }
    const double r = t.adaptive_admission().reliability();
    if (!(r >= 0 && r < 1)) {
      return InvalidArgument(
          where +
          ": adaptive_admission reliability must be in [0, 1) (0: "
          "0.5), not " +
          std::to_string(r));
    }
  }
  return Status::OK();
}

kernels::ValueType ValueTypeFromProto(proto::ValueType type) {
  return static_cast<kernels::ValueType>(type);
}

}  // namespace ps::protocol
