// The typed choices of a table spec and of a cluster (ps.proto's
// OptimizerKind, SparsifyMethod, InitializerKind, Consistency): one parser
// per choice from its name, the name of each value, and NormalizeTableSpec,
// which makes a spec's deprecated string fields and its enum fields agree.
//
// Configs and checkpoint manifests written before the enums existed carry
// only the strings ("adagrad"); new ones may carry only the enums. A spec is
// normalised once where it enters (a table config is loaded, a worker gets
// ClusterInfo): afterwards its enums are set (UNSET only where neither was
// given, meaning the default) and its strings spell the same choice.
//
// Pure functions: thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "base/status_or.h"
#include "protocol/ps.pb.h"

namespace ps::protocol {

// Name -> value. "" gives UNSET (not given); an unknown name gives
// kInvalidArgument listing the names (e.g. "unknown optimizer 'x' (sum,
// sgd, momentum, adagrad, adam, ftrl)").
StatusOr<proto::OptimizerKind> OptimizerKindFromName(std::string_view name);
StatusOr<proto::SparsifyMethod> SparsifyMethodFromName(std::string_view name);
StatusOr<proto::InitializerKind> InitializerKindFromName(std::string_view name);
StatusOr<proto::Consistency> ConsistencyFromName(std::string_view name);

// Value -> name ("" for UNSET).
std::string_view OptimizerKindName(proto::OptimizerKind kind);
std::string_view SparsifyMethodName(proto::SparsifyMethod method);
std::string_view InitializerKindName(proto::InitializerKind kind);
std::string_view ConsistencyName(proto::Consistency consistency);
// "hashed", "exact", "dense" (for logs: a table config names kinds in
// upper case, as ps.proto does).
std::string_view TableKindName(proto::TableKind kind);

// The effective choice of a spec (string or enum, whichever is set; the
// default where neither is: SUM, NONE, ZEROS, ASYNC). kInvalidArgument for an
// unknown name or when string and enum disagree.
StatusOr<proto::OptimizerKind> OptimizerKindOf(const proto::OptimizerSpec& s);
StatusOr<proto::SparsifyMethod> SparsifyMethodOf(const proto::SparsifySpec& s);
StatusOr<proto::InitializerKind> InitializerKindOf(
    const proto::InitializerSpec& s);
StatusOr<proto::Consistency> ConsistencyOf(const proto::ClusterInfo& info);

// Makes enum and string of each choice of `spec` agree (the one given sets
// the other). kInvalidArgument naming the table and the field for an unknown
// name or a string and an enum that disagree; `spec` is then unchanged.
Status NormalizeTableSpec(proto::TableSpec* spec);

// The same for ClusterInfo's consistency and every table it carries.
Status NormalizeClusterInfo(proto::ClusterInfo* info);

}  // namespace ps::protocol
