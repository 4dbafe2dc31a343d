// SPDX-License-Identifier: Apache-2.0
#include "app/metrics.h"

#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing/documented_metrics.h"

namespace sb::app {
namespace {

using sb::testing::DocumentedMetrics;
using sb::testing::ListedMetric;

// Each counter of the components is served under its documented name, with its value.
TEST(RenderMetricsTest, EachStatIsServedUnderItsName) {
  MetricsSnapshot s;
  s.leader = false;
  s.scheduler.jobs_updated = 3;
  s.scheduler.jobs_cancelled = 4;
  s.scheduler.jobs_adopted = 5;
  s.scheduler.duplicates_cancelled = 12;
  s.scheduler.unmapped_cancelled = 13;
  s.scheduler.jobs_resubmitted = 23;
  s.pods.strays_deleted = 6;
  s.pods.sweeps_skipped = 7;
  s.pods.foreign_looking_jobs = 8;
  s.pods.orphans_cancelled = 9;
  s.pods.startup_lists = 1;
  s.pods.startup_list_failures = 24;
  s.pods.sweep_state_reads = 25;
  s.pods.sweep_job_reads = 26;
  s.pods.own_jobs = 27;
  s.nodes.drains = 10;
  s.nodes.external_recreated = 22;
  s.tracked_jobs = 11;
  s.scheduler_events = {.dropped = 14, .pending = 15};
  s.nodes_events = {.dropped = 16, .pending = 0};
  s.kube_http.connections_opened = 17;
  s.pods.jobs_missing = 21;
  s.pods.jobs_steady = 28;
  s.pods.gone_brake_engaged = true;
  s.job_watch = {.polls = 20, .fresh_polls = 2, .poll_errors = 19, .ids_asked = 0};
  const std::string text = RenderMetrics(s);
  struct Row {
    std::string sample;  // name{labels} value
    std::string type;
  };
  const std::vector<Row> rows = {
      {"slurm_bridge_leader 0", "gauge"},
      {"slurm_bridge_jobs_updated_total 3", "counter"},
      {R"(slurm_bridge_jobs_cancelled_total{reason="pods_gone_before_binding"} 4)", "counter"},
      {"slurm_bridge_jobs_adopted_total 5", "counter"},
      {"slurm_bridge_stray_pods_deleted_total 6", "counter"},
      {"slurm_bridge_orphan_sweeps_skipped_total 7", "counter"},
      {"slurm_bridge_foreign_looking_jobs 8", "gauge"},
      {"slurm_bridge_jobs_steady 28", "gauge"},
      {R"(slurm_bridge_jobs_cancelled_total{reason="orphan"} 9)", "counter"},
      {R"(slurm_bridge_sweep_slurm_reads_total{kind="startup_list"} 1)", "counter"},
      {R"(slurm_bridge_sweep_slurm_reads_total{kind="startup_list_failed"} 24)", "counter"},
      {R"(slurm_bridge_sweep_slurm_reads_total{kind="states"} 25)", "counter"},
      {R"(slurm_bridge_sweep_slurm_reads_total{kind="job"} 26)", "counter"},
      {"slurm_bridge_sweep_jobs 27", "gauge"},
      {R"(slurm_bridge_node_drains_total{op="drain"} 10)", "counter"},
      {R"(slurm_bridge_external_node_ops_total{op="recreate"} 22)", "counter"},
      {"slurm_bridge_tracked_jobs 11", "gauge"},
      {R"(slurm_bridge_jobs_cancelled_total{reason="duplicate"} 12)", "counter"},
      {R"(slurm_bridge_jobs_cancelled_total{reason="node_not_in_kubernetes"} 13)", "counter"},
      {R"(slurm_bridge_jobs_cancelled_total{reason="resubmitted"} 23)", "counter"},
      {R"(slurm_bridge_events_dropped_total{component="scheduler"} 14)", "counter"},
      {R"(slurm_bridge_events_pending{component="scheduler"} 15)", "gauge"},
      {R"(slurm_bridge_events_dropped_total{component="nodes"} 16)", "counter"},
      {R"(slurm_bridge_events_dropped_total{component="pods"} 0)", "counter"},
      {R"(slurm_bridge_client_connections_opened_total{server="kube-apiserver"} 17)", "counter"},
      {R"(slurm_bridge_job_state_polls_total{kind="full"} 18)", "counter"},
      {R"(slurm_bridge_job_state_polls_total{kind="fresh"} 2)", "counter"},
      {"slurm_bridge_job_state_poll_errors_total 19", "counter"},
      {"slurm_bridge_jobs_missing 21", "gauge"},
      {"slurm_bridge_gone_brake_engaged 1", "gauge"},
  };
  for (const Row& r : rows) {
    EXPECT_NE(text.find("\n" + r.sample + "\n"), std::string::npos) << r.sample;
    const std::string name = r.sample.substr(0, r.sample.find_first_of("{ "));
    const std::size_t type = text.find("\n# TYPE " + name + " " + r.type + "\n");
    EXPECT_NE(type, std::string::npos) << name << " is not a " << r.type;
    // The sample belongs to the family whose TYPE line came last before it.
    const std::size_t at = text.find("\n" + r.sample + "\n");
    EXPECT_LT(type, at) << r.sample << " comes before its TYPE line";
    EXPECT_GT(text.find("\n# TYPE ", type + 1), at)
        << r.sample << " is not among its family's lines";
  }
}

// Every metric and label docs/operations.md's table lists is rendered (the e2e test checks the
// same of each process's /metrics).
TEST(RenderMetricsTest, EveryReadmeMetricIsRendered) {
  const std::string text = RenderMetrics(MetricsSnapshot{});
  const std::vector<ListedMetric> listed = DocumentedMetrics();
  ASSERT_GE(listed.size(), 23u) << "docs/operations.md's metrics table not found";
  for (const ListedMetric& lm : listed) {
    EXPECT_NE(text.find("\n# TYPE " + lm.name + " "), std::string::npos)
        << lm.name << " is in docs/operations.md but not rendered";
    for (const std::string& label : lm.labels) {
      const std::regex sample("(^|\n)" + lm.name + R"((_bucket)?\{[^}\n]*\b)" + label + "=\"");
      EXPECT_TRUE(std::regex_search(text, sample)) << lm.name << " has no sample with " << label;
    }
  }
}

}  // namespace
}  // namespace sb::app
