// The typed choices of a spec: one parser each, old string-only specs and
// new enum-only specs normalised to the same thing, clear refusals for an
// unknown name or a string and an enum that disagree, the runtime config a
// spec is parsed into, the transport names, and every shipped
// configs/*.tables file still loading.
#include "protocol/spec_choices.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "core/transport_name.h"
#include "protocol/table_config.h"
#include "protocol/table_runtime_config.h"

namespace ps::protocol {
namespace {

TEST(SpecChoicesTest, EveryNameParsesAndPrintsBack) {
  for (const char* n : {"sum", "sgd", "momentum", "adagrad", "adam", "ftrl"}) {
    auto k = OptimizerKindFromName(n);
    ASSERT_TRUE(k.ok()) << n;
    EXPECT_EQ(OptimizerKindName(*k), n);
  }
  for (const char* n : {"none", "threshold", "topk"}) {
    auto k = SparsifyMethodFromName(n);
    ASSERT_TRUE(k.ok()) << n;
    EXPECT_EQ(SparsifyMethodName(*k), n);
  }
  for (const char* n : {"zeros", "uniform", "normal"}) {
    auto k = InitializerKindFromName(n);
    ASSERT_TRUE(k.ok()) << n;
    EXPECT_EQ(InitializerKindName(*k), n);
  }
  for (const char* n : {"async", "bsp", "ssp"}) {
    auto k = ConsistencyFromName(n);
    ASSERT_TRUE(k.ok()) << n;
    EXPECT_EQ(ConsistencyName(*k), n);
  }
  EXPECT_EQ(*OptimizerKindFromName(""), proto::OPTIMIZER_UNSET);
  auto bad = OptimizerKindFromName("rmsprop");
  EXPECT_TRUE(bad.status().Is(StatusCode::kInvalidArgument));
  EXPECT_EQ(bad.status().message(),
            "unknown optimizer 'rmsprop' (sum, sgd, momentum, adagrad, adam, "
            "ftrl)");
}

TEST(SpecChoicesTest, DefaultsApplyWhereNeitherIsGiven) {
  proto::TableSpec t;
  EXPECT_EQ(*OptimizerKindOf(t.optimizer()), proto::OPTIMIZER_SUM);
  EXPECT_EQ(*SparsifyMethodOf(t.sparsify()), proto::SPARSIFY_NONE);
  EXPECT_EQ(*InitializerKindOf(t.initializer()), proto::INITIALIZER_ZEROS);
  EXPECT_EQ(*ConsistencyOf(proto::ClusterInfo()), proto::CONSISTENCY_ASYNC);
}

TEST(SpecChoicesTest, StringOnlyAndEnumOnlySpecsNormaliseAlike) {
  auto old_style = ParseTableConfig(R"(table { id: 1 name: "e" dim: 2
      capacity: 10 optimizer { name: "adagrad" }
      sparsify { method: "topk" topk_fraction: 0.5 }
      initializer { name: "normal" scale: 0.1 } })");
  auto new_style = ParseTableConfig(R"(table { id: 1 name: "e" dim: 2
      capacity: 10 optimizer { kind: OPTIMIZER_ADAGRAD }
      sparsify { kind: SPARSIFY_TOPK topk_fraction: 0.5 }
      initializer { kind: INITIALIZER_NORMAL scale: 0.1 } })");
  ASSERT_TRUE(old_style.ok()) << old_style.status();
  ASSERT_TRUE(new_style.ok()) << new_style.status();
  EXPECT_EQ(old_style->SerializeAsString(), new_style->SerializeAsString());
  const proto::TableSpec& t = old_style->table(0);
  EXPECT_EQ(t.optimizer().kind(), proto::OPTIMIZER_ADAGRAD);
  EXPECT_EQ(t.optimizer().name(), "adagrad");
  EXPECT_EQ(t.sparsify().kind(), proto::SPARSIFY_TOPK);
  EXPECT_EQ(t.initializer().kind(), proto::INITIALIZER_NORMAL);
  // Nothing given: both stay unset (the defaults apply).
  auto plain = ParseTableConfig(R"(table { id: 1 name: "p" dim: 1
      capacity: 4 })");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->table(0).has_optimizer());
  EXPECT_FALSE(plain->table(0).has_sparsify());
}

TEST(SpecChoicesTest, DisagreementAndUnknownNamesNameTableAndField) {
  auto both = ParseTableConfig(R"(table { id: 3 name: "w" dim: 1
      capacity: 4 optimizer { name: "sgd" kind: OPTIMIZER_ADAM } })");
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(both.status().Is(StatusCode::kInvalidArgument));
  EXPECT_NE(both.status().message().find("table 'w' (id 3)"), std::string::npos)
      << both.status();
  EXPECT_NE(both.status().message().find("optimizer.name and .kind"),
            std::string::npos)
      << both.status();

  proto::TableSpec spec;
  spec.set_id(4);
  spec.set_name("v");
  spec.mutable_sparsify()->set_method("random");
  const proto::TableSpec before = spec;
  Status s = NormalizeTableSpec(&spec);
  EXPECT_TRUE(s.Is(StatusCode::kInvalidArgument));
  EXPECT_NE(s.message().find("table 'v' (id 4)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("unknown sparsify method 'random' (none, "
                             "threshold, topk)"),
            std::string::npos)
      << s;
  EXPECT_EQ(spec.SerializeAsString(), before.SerializeAsString());

  proto::ClusterInfo info;
  info.set_consistency("bsp");
  info.set_consistency_mode(proto::CONSISTENCY_SSP);
  EXPECT_TRUE(NormalizeClusterInfo(&info).Is(StatusCode::kInvalidArgument));
  info.set_consistency_mode(proto::CONSISTENCY_UNSET);
  ASSERT_TRUE(NormalizeClusterInfo(&info).ok());
  EXPECT_EQ(info.consistency_mode(), proto::CONSISTENCY_BSP);
}

TEST(TableRuntimeConfigTest, SpecParsedOnceIntoTypedChoices) {
  auto config = ParseTableConfig(R"(table { id: 1 name: "e" dim: 2
      capacity: 10 push_value_type: FP16
      optimizer { name: "adam" learning_rate: 0.5 }
      sparsify { method: "threshold" epsilon: 0.25 }
      initializer { name: "uniform" scale: 0.1 seed: 9 } })");
  ASSERT_TRUE(config.ok()) << config.status();
  auto rt = TableRuntimeConfig::FromSpec(config->table(0));
  ASSERT_TRUE(rt.ok()) << rt.status();
  EXPECT_EQ(rt->optimizer_kind, proto::OPTIMIZER_ADAM);
  ASSERT_TRUE(rt->optimizer.has_value());
  ASSERT_TRUE(std::holds_alternative<kernels::AdamConfig>(*rt->optimizer));
  EXPECT_EQ(std::get<kernels::AdamConfig>(*rt->optimizer).learning_rate, 0.5f);
  EXPECT_EQ(rt->sparsify, proto::SPARSIFY_THRESHOLD);
  EXPECT_EQ(rt->sparsify_epsilon, 0.25f);
  EXPECT_EQ(rt->initializer, proto::INITIALIZER_UNIFORM);
  EXPECT_EQ(rt->initializer_seed, 9u);
  EXPECT_EQ(rt->push_value_type, kernels::ValueType::kFp16);

  proto::TableSpec sum;
  sum.set_id(2);
  sum.set_name("s");
  sum.set_dim(1);
  sum.set_capacity(1);
  auto rs = TableRuntimeConfig::FromSpec(sum);
  ASSERT_TRUE(rs.ok()) << rs.status();
  EXPECT_EQ(rs->optimizer_kind, proto::OPTIMIZER_SUM);
  EXPECT_FALSE(rs->optimizer.has_value());
}

TEST(TransportNameTest, OneParserForEveryFlag) {
  EXPECT_EQ(*xfer::TransportChoiceFromName("auto"),
            xfer::TransportChoice::kAuto);
  EXPECT_EQ(*xfer::TransportChoiceFromName("shm"), xfer::TransportChoice::kShm);
  EXPECT_EQ(*xfer::TransportChoiceFromName("tcp"), xfer::TransportChoice::kTcp);
  auto verbs = xfer::TransportChoiceFromName("verbs");
  ASSERT_FALSE(verbs.ok());  // not a process flag's choice
  EXPECT_EQ(verbs.status().message(), "must be auto, shm or tcp, not 'verbs'");
  EXPECT_EQ(
      *xfer::TransportChoiceFromName("verbs", {xfer::TransportChoice::kShm,
                                               xfer::TransportChoice::kVerbs}),
      xfer::TransportChoice::kVerbs);
  for (auto c : {xfer::TransportChoice::kAuto, xfer::TransportChoice::kShm,
                 xfer::TransportChoice::kTcp}) {
    EXPECT_EQ(*xfer::TransportChoiceFromName(xfer::TransportChoiceName(c)), c);
  }
}

// Old configs (string names) keep loading, every one of them.
TEST(TableConfigFilesTest, EveryShippedConfigLoads) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(PS_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".tables") continue;
    ++files;
    auto config = LoadTableConfig(entry.path().string());
    ASSERT_TRUE(config.ok()) << entry.path() << ": " << config.status();
    for (const auto& t : config->table()) {
      auto rt = TableRuntimeConfig::FromSpec(t);
      EXPECT_TRUE(rt.ok()) << entry.path() << ": " << rt.status();
      // Normalised: a given name has its enum.
      if (!t.optimizer().name().empty()) {
        EXPECT_NE(t.optimizer().kind(), proto::OPTIMIZER_UNSET) << t.name();
      }
    }
  }
  EXPECT_GE(files, 5);
}

TEST(SpecChoicesTest, AdamsRateIsSharedAmongTheWorkersPushes) {
  // Each push is an Adam step of full size, whatever its gradient: N
  // workers' pushes share the step's rate. The other optimizers add the
  // pushes' gradients, so their specs stay as they are.
  proto::TableSpec adam;
  adam.set_name("mlp");
  adam.mutable_optimizer()->set_name("adam");
  adam.mutable_optimizer()->set_learning_rate(0.003f);
  EXPECT_FLOAT_EQ(SpecPerPush(adam, 1).optimizer().learning_rate(), 0.003f);
  EXPECT_FLOAT_EQ(SpecPerPush(adam, 3).optimizer().learning_rate(), 0.001f);
  EXPECT_EQ(SpecPerPush(adam, 3).name(), "mlp");
  // An unset rate is Adam's default, 0.001.
  adam.mutable_optimizer()->clear_learning_rate();
  EXPECT_FLOAT_EQ(SpecPerPush(adam, 2).optimizer().learning_rate(), 0.0005f);
  for (const char* other : {"sgd", "adagrad", "ftrl", "sum"}) {
    proto::TableSpec t;
    t.mutable_optimizer()->set_name(other);
    t.mutable_optimizer()->set_learning_rate(0.05f);
    EXPECT_FLOAT_EQ(SpecPerPush(t, 4).optimizer().learning_rate(), 0.05f)
        << other;
  }
}

}  // namespace
}  // namespace ps::protocol
