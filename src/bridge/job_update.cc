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
};

bool IsSet(const std::string& v) { return !v.empty(); }
bool IsSet(const std::vector<std::string>& v) { return !v.empty(); }
bool IsSet(const std::optional<std::int32_t>& v) { return v.has_value(); }
bool IsSet(const slurm::NoValNumber& v) { return v.set; }

}  // namespace

JobUpdate PendingJobUpdate(const slurm::JobDescription& sent, const slurm::JobDescription& wanted) {
  JobUpdate u;
  auto compare = [&](const auto& field) {
    const auto& before = sent.*(field.member);
    const auto& after = wanted.*(field.member);
    if (before == after) return;
    if (IsSet(after)) {
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
  compare(S{"name", &J::name, false});
  compare(S{"partition", &J::partition, false});
  compare(S{"account", &J::account, false});
  compare(S{"qos", &J::qos, false});
  compare(S{"reservation", &J::reservation, true});
  compare(S{"constraints", &J::constraints, true});
  compare(S{"licenses", &J::licenses, true});
  compare(S{"wckey", &J::wckey, false});
  compare(S{"comment", &J::comment, true});
  compare(S{"admin_comment", &J::admin_comment, true});
  compare(S{"mcs_label", &J::mcs_label, false});
  compare(S{"nodes", &J::nodes, false});
  compare(I{"minimum_nodes", &J::minimum_nodes, false});
  compare(I{"maximum_nodes", &J::maximum_nodes, false});
  compare(I{"tasks", &J::tasks, false});
  compare(I{"tasks_per_node", &J::tasks_per_node, false});
  compare(I{"cpus_per_task", &J::cpus_per_task, false});
  compare(N{"memory_per_node", &J::memory_per_node, false});
  compare(N{"time_limit", &J::time_limit, false});
  compare(N{"priority", &J::priority, false});
  compare(S{"tres_per_node", &J::tres_per_node, true});
  compare(S{"tres_per_job", &J::tres_per_job, true});
  compare(L{"excluded_nodes", &J::excluded_nodes, true});
  compare(L{"shared", &J::shared, false});
  return u;
}

}  // namespace sb::bridge
