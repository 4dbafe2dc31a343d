// SPDX-License-Identifier: Apache-2.0
// The identity policy: parsing, the rule a namespace gets, what it refuses, who jobs run as.
#include <gtest/gtest.h>

#include "bridge/config.h"
#include "bridge/identity.h"

namespace sb::bridge {
namespace {

using Annotations = std::map<std::string, std::string>;

IdentityPolicy Parse(std::string_view yaml) {
  Result<Config> c = ParseConfig(yaml);
  EXPECT_TRUE(c) << c.error().message;
  return c ? c->identity_policy : IdentityPolicy{};
}

constexpr std::string_view kTwoTeams = R"(
partition: slurm-bridge
identityPolicy:
  - namespaces: [team-a]
    user: alice
    group: physics
    accounts: [physics]
    qos: [normal, high]
    partitions: [gpu]
    reservations: [maint]
    wckeys: [proj1]
    maxPriority: 1000
  - namespaces: ["lab-*"]
    user: "*"
    accounts: ["*"]
)";

TEST(IdentityPolicyTest, ParsesRulesAndTheConfiguredPartition) {
  IdentityPolicy p = Parse(kTwoTeams);
  ASSERT_EQ(p.rules.size(), 2u);
  EXPECT_EQ(p.default_partition, "slurm-bridge");
  const IdentityRule want{.namespaces = {"team-a"},
                          .user = "alice",
                          .group = "physics",
                          .accounts = {"physics"},
                          .qos = {"normal", "high"},
                          .partitions = {"gpu"},
                          .reservations = {"maint"},
                          .wckeys = {"proj1"},
                          .max_priority = 1000};
  EXPECT_EQ(p.rules[0], want);
  EXPECT_EQ(p.rules[1], (IdentityRule{.namespaces = {"lab-*"}, .user = "*", .accounts = {"*"}}));
}

TEST(IdentityPolicyTest, BadRulesAreErrorsThatNameTheKey) {
  struct Row {
    std::string yaml;
    std::string error;
  };
  for (const Row& r : std::vector<Row>{
           {"identityPolicy: {a: b}", "identityPolicy: must be a list of rules"},
           {"identityPolicy: [{user: x}]", "identityPolicy[0]: every entry needs a non-empty"},
           {"identityPolicy: [{namespaces: []}]", "identityPolicy[0]: every entry needs"},
           {"identityPolicy: [{namespaces: [a], users: [x]}]", "unknown field users"},
           {"identityPolicy: [{namespaces: [a], maxPriority: -1}]",
            "identityPolicy[0].maxPriority: \"-1\" is not a number"},
           {"identityPolicy: [{namespaces: [a], accounts: x}]",
            "identityPolicy[0].accounts: must be a list of strings"},
           {"identityPolicy: [x]", "identityPolicy[0]: entries must be maps"},
       }) {
    Result<Config> c = ParseConfig(r.yaml);
    ASSERT_FALSE(c) << r.yaml;
    EXPECT_NE(c.error().message.find(r.error), std::string::npos)
        << r.yaml << " -> " << c.error().message;
  }
}

TEST(IdentityPolicyTest, FirstRuleNamingTheNamespaceApplies) {
  IdentityPolicy p = Parse(R"(
identityPolicy:
  - {namespaces: [a], user: first}
  - {namespaces: ["a*"], user: second}
  - {namespaces: ["*"], user: rest}
)");
  EXPECT_EQ(p.RuleFor("a")->user, "first");
  EXPECT_EQ(p.RuleFor("ab")->user, "second");
  EXPECT_EQ(p.RuleFor("b")->user, "rest");
  EXPECT_EQ(Parse("").RuleFor("a"), nullptr);
}

// Each row: the annotations of a pod in `ns`, and the messages' beginnings (empty: allowed).
TEST(IdentityPolicyTest, WhatEachNamespaceMayAskFor) {
  const IdentityPolicy p = Parse(kTwoTeams);
  struct Row {
    std::string name;
    std::string ns;
    Annotations annotations;
    std::vector<std::string> refused;  // the annotation suffixes refused, in order
  };
  const std::vector<Row> rows = {
      {"nothing asked", "other", {}, {}},
      {"default rule: the configured partition", "other", {{"partition", "slurm-bridge"}}, {}},
      {"default rule: no other partition", "other", {{"partition", "gpu"}}, {"partition"}},
      {"default rule: no identity, account, qos, reservation, wckey or priority",
       "other",
       {{"user-id", "root"},
        {"group-id", "0"},
        {"account", "a"},
        {"qos", "q"},
        {"reservation", "r"},
        {"wckey", "w"},
        {"priority", "1"}},
       {"user-id", "group-id", "account", "qos", "reservation", "wckey", "priority"}},
      {"default rule: a non-number priority is left to Translate",
       "other",
       {{"priority", "high"}},
       {}},
      {"team-a: everything its rule lists",
       "team-a",
       {{"user-id", "alice"},
        {"group-id", " physics "},
        {"account", "physics"},
        {"qos", "high"},
        {"partition", "gpu"},
        {"reservation", "maint"},
        {"wckey", "proj1"},
        {"priority", "1000"}},
       {}},
      {"team-a: the configured partition too", "team-a", {{"partition", "slurm-bridge"}}, {}},
      {"team-a: another user, account, partition, priority too high",
       "team-a",
       {{"user-id", "bob"}, {"account", "chemistry"}, {"partition", "batch"}, {"priority", "1001"}},
       {"user-id", "account", "partition", "priority"}},
      {"lab-*: any user and account, no qos",
       "lab-7",
       {{"user-id", "carol"}, {"account", "x"}, {"qos", "high"}},
       {"qos"}},
      {"a prefix rule does not match the bare prefix", "lab", {{"account", "x"}}, {"account"}},
  };
  for (const Row& r : rows) {
    std::vector<std::string> got = IdentityViolations(r.annotations, r.ns, p);
    ASSERT_EQ(got.size(), r.refused.size()) << r.name << ": " << ::testing::PrintToString(got);
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(got[i].starts_with("annotation slurmjob.slinky.slurm.net/" + r.refused[i] + ": "))
          << r.name << ": " << got[i];
    }
  }
}

TEST(IdentityPolicyTest, MessagesNameTheValueTheNamespaceAndTheRule) {
  const IdentityPolicy p = Parse(kTwoTeams);
  EXPECT_EQ(IdentityViolations({{"account", "chemistry"}}, "team-a", p),
            std::vector<std::string>{
                "annotation slurmjob.slinky.slurm.net/account: \"chemistry\" is not allowed in "
                "namespace team-a (identityPolicy rule 1 (namespaces team-a); it allows physics)"});
  EXPECT_EQ(
      IdentityViolations({{"priority", "5"}}, "other", p),
      std::vector<std::string>{
          "annotation slurmjob.slinky.slurm.net/priority: \"5\" is not allowed in namespace other "
          "(identityPolicy: no rule names namespace other, so the default rule applies; it "
          "allows none: Slurm's priority policy decides)"});
}

TEST(IdentityPolicyTest, WhoTheJobsRunAs) {
  const IdentityPolicy p = Parse(kTwoTeams);
  Identity a = IdentityFor({}, "team-a", p);
  EXPECT_EQ(a.user_id, "alice");
  EXPECT_EQ(a.group_id, "physics");
  Identity lab = IdentityFor({{"user-id", " carol "}, {"group-id", "g"}}, "lab-1", p);
  EXPECT_EQ(lab.user_id, "carol");  // the rule lets the annotation choose
  EXPECT_EQ(lab.group_id, "");      // ... but not the group: the token's
  Identity other = IdentityFor({{"user-id", "root"}}, "other", p);
  EXPECT_EQ(other.user_id, "");
  EXPECT_EQ(other.group_id, "");
}

TEST(IdentityPolicyTest, UpstreamCompatibleRuleAllowsEverything) {
  const IdentityPolicy p = Parse(R"(
identityPolicy:
  - {namespaces: ["*"], user: "*", group: "*", accounts: ["*"], qos: ["*"], partitions: ["*"],
     reservations: ["*"], wckeys: ["*"], maxPriority: 2147483647}
)");
  const Annotations all = {{"user-id", "root"}, {"group-id", "0"},         {"account", "a"},
                           {"qos", "q"},        {"partition", "p"},        {"reservation", "r"},
                           {"wckey", "w"},      {"priority", "2000000000"}};
  EXPECT_TRUE(IdentityViolations(all, "any", p).empty());
  EXPECT_EQ(IdentityFor(all, "any", p).user_id, "root");
}

}  // namespace
}  // namespace sb::bridge
