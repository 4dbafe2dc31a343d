// SPDX-License-Identifier: Apache-2.0
#include "bridge/job_update.h"

#include <optional>

namespace sb::bridge {
namespace {

// One field of a job description: compared, copied into the update, cleared when allowed.
template <typename T>
struct Field {
  const char* name;
  T slurm::JobDescription::* member;
  bool clearable;  // Slurm takes an empty value as "none" for this field
  bool in_place;   // no limit of Slurm's looks at it: an operator may update it (header)
};

bool IsSet(const std::string& v) { return !v.empty(); }
bool IsSet(const std::vector<std::string>& v) { return !v.empty(); }
bool IsSet(const std::optional<std::int32_t>& v) { return v.has_value(); }
bool IsSet(const slurm::NoValNumber& v) { return v.set; }

}  // namespace

JobUpdate PendingJobUpdate(const std::optional<slurm::JobDescription>& sent,
                           const slurm::JobDescription& wanted) {
  JobUpdate u;
  const slurm::JobDescription none;
  const slurm::JobDescription& base = sent ? *sent : none;
  auto compare = [&](const auto& field) {
    if (!field.in_place && !sent) return;  // unknown: taken to be as submitted
    const auto& before = base.*(field.member);
    const auto& after = wanted.*(field.member);
    if (before == after) return;
    if (!field.in_place) {
      u.resubmit.emplace_back(field.name);
    } else if (IsSet(after)) {
      u.changes.*(field.member) = after;
      u.changed.emplace_back(field.name);
    } else if (field.clearable) {
      u.changes.clear.emplace_back(field.name);
      u.changed.emplace_back(field.name);
    } else {
      u.kept.emplace_back(field.name);
    }
  };
  using J = slurm::JobDescription;
  using S = Field<std::string>;
  using L = Field<std::vector<std::string>>;
  using I = Field<std::optional<std::int32_t>>;
  using N = Field<slurm::NoValNumber>;
  // Not compared: flags, script, environment, output files, working directory, user and group
  // (fixed once the job exists), required nodes (never set by the bridge) and hold.
  // In place: the name, the comments (the tag among them), the nodes to avoid and the
  // features to ask for, and the priority (which identityPolicy governs, and which the bridge's
  // submit sets with the same token). Everything else is checked against a limit at submit: the
  // partition (MaxTime, MaxNodes, AllowAccounts), the account and QOS (association and QOS
  // limits), the reservation and wckey (access), the licenses and every TRES (MaxTRES*), the
  // node and task counts, the time limit, the MCS label and the sharing.
  compare(S{"name", &J::name, false, true});
  compare(S{"partition", &J::partition, false, false});
  compare(S{"account", &J::account, false, false});
  compare(S{"qos", &J::qos, false, false});
  compare(S{"reservation", &J::reservation, true, false});
  compare(S{"constraints", &J::constraints, true, true});
  compare(S{"licenses", &J::licenses, true, false});
  compare(S{"wckey", &J::wckey, false, false});
  compare(S{"comment", &J::comment, true, true});
  compare(S{"admin_comment", &J::admin_comment, true, true});
  compare(S{"mcs_label", &J::mcs_label, false, false});
  compare(S{"nodes", &J::nodes, false, false});
  compare(I{"minimum_nodes", &J::minimum_nodes, false, false});
  compare(I{"maximum_nodes", &J::maximum_nodes, false, false});
  compare(I{"tasks", &J::tasks, false, false});
  compare(I{"tasks_per_node", &J::tasks_per_node, false, false});
  compare(I{"cpus_per_task", &J::cpus_per_task, false, false});
  compare(N{"memory_per_node", &J::memory_per_node, false, false});
  compare(N{"time_limit", &J::time_limit, false, false});
  compare(N{"priority", &J::priority, false, true});
  compare(S{"tres_per_node", &J::tres_per_node, true, false});
  compare(S{"tres_per_job", &J::tres_per_job, true, false});
  compare(L{"excluded_nodes", &J::excluded_nodes, true, true});
  compare(L{"shared", &J::shared, false, false});
  if (!u.resubmit.empty()) {
    // Nothing is sent to a job that is to be submitted anew.
    u.changes = {};
    u.changed.clear();
    u.kept.clear();
  }
  return u;
}

}  // namespace sb::bridge
