#include "protocol/spec_choices.h"

#include <span>

namespace ps::protocol {
namespace {

// One choice's names: the value of each, in the order error messages list
// them; UNSET (0) is "".
template <typename E>
struct Named {
  std::string_view name;
  E value;
};

constexpr Named<proto::OptimizerKind> kOptimizers[] = {
    {"sum", proto::OPTIMIZER_SUM},
    {"sgd", proto::OPTIMIZER_SGD},
    {"momentum", proto::OPTIMIZER_MOMENTUM},
    {"adagrad", proto::OPTIMIZER_ADAGRAD},
    {"adam", proto::OPTIMIZER_ADAM},
    {"ftrl", proto::OPTIMIZER_FTRL},
};
constexpr Named<proto::SparsifyMethod> kSparsifyMethods[] = {
    {"none", proto::SPARSIFY_NONE},
    {"threshold", proto::SPARSIFY_THRESHOLD},
    {"topk", proto::SPARSIFY_TOPK},
};
constexpr Named<proto::InitializerKind> kInitializers[] = {
    {"zeros", proto::INITIALIZER_ZEROS},
    {"uniform", proto::INITIALIZER_UNIFORM},
    {"normal", proto::INITIALIZER_NORMAL},
};
constexpr Named<proto::Consistency> kConsistencies[] = {
    {"async", proto::CONSISTENCY_ASYNC},
    {"bsp", proto::CONSISTENCY_BSP},
    {"ssp", proto::CONSISTENCY_SSP},
};

template <typename E>
std::string List(std::span<const Named<E>> names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

// `what` names the choice in messages ("optimizer").
template <typename E>
StatusOr<E> FromName(std::span<const Named<E>> names, std::string_view what,
                     std::string_view name) {
  if (name.empty()) return static_cast<E>(0);
  for (const auto& n : names) {
    if (n.name == name) return n.value;
  }
  return InvalidArgument("unknown " + std::string(what) + " '" +
                         std::string(name) + "' (" + List(names) + ")");
}

template <typename E>
std::string_view NameOf(std::span<const Named<E>> names, E value) {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return {};
}

// The choice a (string, enum) pair makes: the one that is set, both when
// they agree, `fallback` when neither is.
// `fields` names the pair in messages ("optimizer.name and .kind").
template <typename E>
StatusOr<E> Resolve(std::span<const Named<E>> names, std::string_view what,
                    std::string_view fields, std::string_view name, E value,
                    E fallback) {
  PS_ASSIGN_OR_RETURN(E from_name, FromName(names, what, name));
  if (static_cast<int>(value) != 0 && NameOf(names, value).empty()) {
    return InvalidArgument("unknown " + std::string(what) + " value " +
                           std::to_string(static_cast<int>(value)) + " in " +
                           std::string(fields));
  }
  if (static_cast<int>(from_name) != 0 && static_cast<int>(value) != 0 &&
      from_name != value) {
    return InvalidArgument(std::string(fields) + " disagree: '" +
                           std::string(name) + "' and '" +
                           std::string(NameOf(names, value)) + "'");
  }
  if (static_cast<int>(from_name) != 0) return from_name;
  if (static_cast<int>(value) != 0) return value;
  return fallback;
}

// Normalises one (string, enum) pair in place: each set from the other.
template <typename E, typename GetName, typename GetValue, typename SetName,
          typename SetValue>
Status NormalizeOne(std::span<const Named<E>> names, std::string_view what,
                    std::string_view fields, std::string_view where,
                    GetName get_name, GetValue get_value, SetName set_name,
                    SetValue set_value) {
  auto chosen =
      Resolve(names, what, fields, get_name(), get_value(), static_cast<E>(0));
  if (!chosen.ok()) return chosen.status().WithContext(std::string(where));
  if (static_cast<int>(*chosen) == 0) return Status::OK();  // neither given
  set_value(*chosen);
  set_name(std::string(NameOf(names, *chosen)));
  return Status::OK();
}

}  // namespace

StatusOr<proto::OptimizerKind> OptimizerKindFromName(std::string_view name) {
  return FromName<proto::OptimizerKind>(kOptimizers, "optimizer", name);
}
StatusOr<proto::SparsifyMethod> SparsifyMethodFromName(std::string_view name) {
  return FromName<proto::SparsifyMethod>(kSparsifyMethods, "sparsify method",
                                         name);
}
StatusOr<proto::InitializerKind> InitializerKindFromName(
    std::string_view name) {
  return FromName<proto::InitializerKind>(kInitializers, "initializer", name);
}
StatusOr<proto::Consistency> ConsistencyFromName(std::string_view name) {
  return FromName<proto::Consistency>(kConsistencies, "consistency", name);
}

std::string_view OptimizerKindName(proto::OptimizerKind kind) {
  return NameOf<proto::OptimizerKind>(kOptimizers, kind);
}
std::string_view SparsifyMethodName(proto::SparsifyMethod method) {
  return NameOf<proto::SparsifyMethod>(kSparsifyMethods, method);
}
std::string_view InitializerKindName(proto::InitializerKind kind) {
  return NameOf<proto::InitializerKind>(kInitializers, kind);
}
std::string_view ConsistencyName(proto::Consistency consistency) {
  return NameOf<proto::Consistency>(kConsistencies, consistency);
}

std::string_view TableKindName(proto::TableKind kind) {
  switch (kind) {
    case proto::HASHED:
      return "hashed";
    case proto::EXACT:
      return "exact";
    case proto::DENSE:
      return "dense";
    default:
      return "unknown kind";
  }
}

StatusOr<proto::OptimizerKind> OptimizerKindOf(const proto::OptimizerSpec& s) {
  return Resolve<proto::OptimizerKind>(kOptimizers, "optimizer",
                                       "optimizer.name and .kind", s.name(),
                                       s.kind(), proto::OPTIMIZER_SUM);
}
StatusOr<proto::SparsifyMethod> SparsifyMethodOf(const proto::SparsifySpec& s) {
  return Resolve<proto::SparsifyMethod>(kSparsifyMethods, "sparsify method",
                                        "sparsify.method and .kind", s.method(),
                                        s.kind(), proto::SPARSIFY_NONE);
}
StatusOr<proto::InitializerKind> InitializerKindOf(
    const proto::InitializerSpec& s) {
  return Resolve<proto::InitializerKind>(kInitializers, "initializer",
                                         "initializer.name and .kind", s.name(),
                                         s.kind(), proto::INITIALIZER_ZEROS);
}
StatusOr<proto::Consistency> ConsistencyOf(const proto::ClusterInfo& info) {
  return Resolve<proto::Consistency>(
      kConsistencies, "consistency", "consistency and consistency_mode",
      info.consistency(), info.consistency_mode(), proto::CONSISTENCY_ASYNC);
}

Status NormalizeTableSpec(proto::TableSpec* spec) {
  const std::string where =
      "table '" + spec->name() + "' (id " + std::to_string(spec->id()) + ")";
  proto::TableSpec t = *spec;  // changed only when every choice is valid
  // Reads through the const accessors and writes only a choice that was
  // given, so an absent sub-message stays absent.
  PS_RETURN_IF_ERROR(NormalizeOne<proto::OptimizerKind>(
      kOptimizers, "optimizer", "optimizer.name and .kind", where,
      [&] { return t.optimizer().name(); },
      [&] { return t.optimizer().kind(); },
      [&](std::string n) { t.mutable_optimizer()->set_name(std::move(n)); },
      [&](proto::OptimizerKind k) { t.mutable_optimizer()->set_kind(k); }));
  PS_RETURN_IF_ERROR(NormalizeOne<proto::SparsifyMethod>(
      kSparsifyMethods, "sparsify method", "sparsify.method and .kind", where,
      [&] { return t.sparsify().method(); },
      [&] { return t.sparsify().kind(); },
      [&](std::string n) { t.mutable_sparsify()->set_method(std::move(n)); },
      [&](proto::SparsifyMethod k) { t.mutable_sparsify()->set_kind(k); }));
  PS_RETURN_IF_ERROR(NormalizeOne<proto::InitializerKind>(
      kInitializers, "initializer", "initializer.name and .kind", where,
      [&] { return t.initializer().name(); },
      [&] { return t.initializer().kind(); },
      [&](std::string n) { t.mutable_initializer()->set_name(std::move(n)); },
      [&](proto::InitializerKind k) { t.mutable_initializer()->set_kind(k); }));
  *spec = std::move(t);
  return Status::OK();
}

Status NormalizeClusterInfo(proto::ClusterInfo* info) {
  PS_RETURN_IF_ERROR(NormalizeOne<proto::Consistency>(
      kConsistencies, "consistency", "consistency and consistency_mode",
      "cluster info", [&] { return info->consistency(); },
      [&] { return info->consistency_mode(); },
      [&](std::string n) { info->set_consistency(std::move(n)); },
      [&](proto::Consistency c) { info->set_consistency_mode(c); }));
  for (auto& t : *info->mutable_tables()) {
    PS_RETURN_IF_ERROR(NormalizeTableSpec(&t));
  }
  return Status::OK();
}

}  // namespace ps::protocol
