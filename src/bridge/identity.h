// SPDX-License-Identifier: Apache-2.0
//
// bridge/identity.h
//
// Who a namespace's Slurm jobs run as, and which of the identity and priority annotations its
// pods (or their root objects) may use (config key identityPolicy). Every job is submitted with
// SlurmUser's token, which Slurm lets choose any user, account, reservation and priority: without
// a policy a tenant with the ordinary `edit` role could run as someone else, charge another
// team's account, use another team's reservation or jump the queue. Pure code: the admission
// webhook checks a request with it, and Translate checks it again at submit (the webhook may be
// off).
//
//   identityPolicy:
//     - namespaces: [team-a, "lab-*"]   # names; "x-*" matches by prefix; "*" every namespace
//       user: alice          # the jobs run as alice ("": the token's user; "*": the annotation)
//       group: ""            # the same for group-id
//       accounts: [physics]  # the values the account annotation may take ("*": any)
//       qos: [normal, high]
//       partitions: [gpu]    # the configured partition is always allowed
//       reservations: []
//       wckeys: []
//       maxPriority: 1000    # the priority annotation may ask for 0..1000 (absent: not at all)
//
// The first rule naming a namespace applies. A namespace no rule names gets the default rule:
// the token's user and group, the configured partition, and none of the other annotations
// (Slurm's defaults apply: the user's default account and QOS). A single-tenant cluster that
// wants upstream's behaviour (every annotation honoured) writes one rule:
//     - {namespaces: ["*"], user: "*", group: "*", accounts: ["*"], qos: ["*"],
//        partitions: ["*"], reservations: ["*"], wckeys: ["*"], maxPriority: 2147483647}
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace sb::bridge {

struct IdentityRule {
  std::vector<std::string> namespaces;
  std::string user;   // "" the token's user; "*" the user-id annotation chooses; else fixed
  std::string group;  // the same for group-id
  std::vector<std::string> accounts;
  std::vector<std::string> qos;
  std::vector<std::string> partitions;
  std::vector<std::string> reservations;
  std::vector<std::string> wckeys;
  std::optional<std::int32_t> max_priority;  // nullopt: the priority annotation is refused
  bool operator==(const IdentityRule&) const = default;
};

struct IdentityPolicy {
  std::vector<IdentityRule> rules;
  // The configured partition (config key partition): allowed in every namespace.
  std::string default_partition;
  bool operator==(const IdentityPolicy&) const = default;

  // The rule for namespace `ns`; nullptr: none names it (the default rule applies).
  [[nodiscard]] const IdentityRule* RuleFor(std::string_view ns) const;
};

// What a namespace's jobs are submitted with.
struct Identity {
  std::string user_id;   // "" none sent (the token's user)
  std::string group_id;  // "" none sent
};

// The job annotations (by suffix: "account", "priority", ...) that `policy` refuses to pods of
// namespace `ns`, each as one message naming the annotation, the value and the rule; empty: all
// allowed. `job_annotations` are suffix -> value (annotations.h's JobAnnotations).
[[nodiscard]] std::vector<std::string> IdentityViolations(
    const std::map<std::string, std::string>& job_annotations, std::string_view ns,
    const IdentityPolicy& policy);

// The user and group a job of namespace `ns` is submitted as, from the rule and (where the rule
// lets them choose) the annotations. Call after IdentityViolations found nothing.
[[nodiscard]] Identity IdentityFor(const std::map<std::string, std::string>& job_annotations,
                                   std::string_view ns, const IdentityPolicy& policy);

}  // namespace sb::bridge
