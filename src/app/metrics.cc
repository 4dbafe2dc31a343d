// SPDX-License-Identifier: Apache-2.0
#include "app/metrics.h"

#include <array>
#include <sstream>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace sb::app {
namespace {

// Prometheus text exposition format 0.0.4.
class MetricsText {
 public:
  void Family(std::string_view name, std::string_view help, std::string_view type) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  }
  template <typename V>
  void Sample(std::string_view name, std::string_view labels, V value) {
    out_ << name;
    if (!labels.empty()) out_ << '{' << labels << '}';
    out_ << ' ' << value << '\n';
  }
  void Histogram(std::string_view name, const scheduler::LatencyHistogram& h) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.buckets.size(); ++i) {
      cumulative += h.buckets[i];
      Sample(std::string(name) + "_bucket",
             fmt::format("le=\"{}\"", scheduler::LatencyHistogram::kBounds[i]), cumulative);
    }
    Sample(std::string(name) + "_bucket", "le=\"+Inf\"", h.count);
    Sample(std::string(name) + "_sum", "", h.sum);
    Sample(std::string(name) + "_count", "", h.count);
  }
  void Histogram(std::string_view name, std::string_view labels, const net::ClientStats& s) {
    std::uint64_t cumulative = 0;
    const std::string sep = labels.empty() ? "" : ",";
    for (std::size_t i = 0; i < s.latency_buckets.size(); ++i) {
      cumulative += s.latency_buckets[i];
      Sample(std::string(name) + "_bucket",
             fmt::format("{}{}le=\"{}\"", labels, sep, net::ClientStats::kLatencyBounds[i]),
             cumulative);
    }
    Sample(std::string(name) + "_bucket", fmt::format("{}{}le=\"+Inf\"", labels, sep),
           s.latency_count);
    Sample(std::string(name) + "_sum", labels, s.latency_sum_seconds);
    Sample(std::string(name) + "_count", labels, s.latency_count);
  }
  [[nodiscard]] std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

std::string RenderMetrics(const MetricsSnapshot& s) {
  MetricsText m;
  const scheduler::Stats& ss = s.scheduler;
  const controllers::PodControllerStats& ps = s.pods;
  const controllers::NodeControllerStats& ns = s.nodes;
  m.Family("slurm_bridge_leader", "1 when this process leads (or runs without election)", "gauge");
  m.Sample("slurm_bridge_leader", "", s.leader ? 1 : 0);
  m.Family("slurm_bridge_jobs_submitted_total", "Slurm placeholder jobs submitted", "counter");
  m.Sample("slurm_bridge_jobs_submitted_total", "", ss.jobs_submitted);
  m.Family("slurm_bridge_jobs_adopted_total", "Jobs found by tag after a restart", "counter");
  m.Sample("slurm_bridge_jobs_adopted_total", "", ss.jobs_adopted);
  m.Family("slurm_bridge_jobs_cancelled_total", "Slurm jobs cancelled, by why", "counter");
  m.Sample("slurm_bridge_jobs_cancelled_total", "reason=\"pods_gone_before_binding\"",
           ss.jobs_cancelled);
  m.Sample("slurm_bridge_jobs_cancelled_total", "reason=\"duplicate\"", ss.duplicates_cancelled);
  m.Sample("slurm_bridge_jobs_cancelled_total", "reason=\"node_not_in_kubernetes\"",
           ss.unmapped_cancelled);
  m.Sample("slurm_bridge_jobs_cancelled_total", "reason=\"pods_done\"", ps.jobs_cancelled);
  m.Sample("slurm_bridge_jobs_cancelled_total", "reason=\"orphan\"", ps.orphans_cancelled);
  m.Sample("slurm_bridge_jobs_cancelled_total", "reason=\"resubmitted\"", ss.jobs_resubmitted);
  m.Family("slurm_bridge_jobs_replaced_total", "Jobs that ended before binding and were replaced",
           "counter");
  m.Sample("slurm_bridge_jobs_replaced_total", "", ss.jobs_replaced);
  m.Family("slurm_bridge_jobs_updated_total",
           "Pending jobs sent a changed description (annotations, exclusions)", "counter");
  m.Sample("slurm_bridge_jobs_updated_total", "", ss.jobs_updated);
  m.Family("slurm_bridge_submit_errors_total", "Submits Slurm refused or that failed", "counter");
  m.Sample("slurm_bridge_submit_errors_total", "", ss.submit_errors);
  m.Family("slurm_bridge_pods_bound_total", "Pods bound to the node of their Slurm job", "counter");
  m.Sample("slurm_bridge_pods_bound_total", "", ss.pods_bound);
  m.Family("slurm_bridge_bind_errors_total", "Bindings that failed", "counter");
  m.Sample("slurm_bridge_bind_errors_total", "", ss.bind_errors);
  m.Family("slurm_bridge_pods_deleted_total", "Bound pods deleted because their job ended",
           "counter");
  m.Sample("slurm_bridge_pods_deleted_total", "", ps.pods_deleted);
  m.Family("slurm_bridge_finalizers_removed_total", "Finalizers released", "counter");
  m.Sample("slurm_bridge_finalizers_removed_total", "", ps.finalizers_removed);
  m.Family("slurm_bridge_stray_pods_deleted_total",
           "Bound bridge pods deleted because no live job of this bridge lists them", "counter");
  m.Sample("slurm_bridge_stray_pods_deleted_total", "", ps.strays_deleted);
  m.Family("slurm_bridge_orphan_sweeps_skipped_total",
           "Orphan sweeps skipped because the pod watch was not healthy", "counter");
  m.Sample("slurm_bridge_orphan_sweeps_skipped_total", "", ps.sweeps_skipped);
  m.Family("slurm_bridge_sweep_slurm_reads_total",
           "What the controllers' sweep asked Slurm, by kind: the start-up job list (once) and "
           "its failed tries, the state reads of this bridge's jobs, single job reads",
           "counter");
  m.Sample("slurm_bridge_sweep_slurm_reads_total", "kind=\"startup_list\"", ps.startup_lists);
  m.Sample("slurm_bridge_sweep_slurm_reads_total", "kind=\"startup_list_failed\"",
           ps.startup_list_failures);
  m.Sample("slurm_bridge_sweep_slurm_reads_total", "kind=\"states\"", ps.sweep_state_reads);
  m.Sample("slurm_bridge_sweep_slurm_reads_total", "kind=\"job\"", ps.sweep_job_reads);
  m.Family("slurm_bridge_sweep_jobs", "Live jobs of this bridge the controllers' sweep knows",
           "gauge");
  m.Sample("slurm_bridge_sweep_jobs", "", ps.own_jobs);
  m.Family("slurm_bridge_foreign_looking_jobs",
           "Live jobs tagged for this cluster whose pods and namespaces are missing here "
           "(start-up check; another cluster with the same clusterName?)",
           "gauge");
  m.Sample("slurm_bridge_foreign_looking_jobs", "", ps.foreign_looking_jobs);
  m.Family("slurm_bridge_node_taints_total", "Bridge taints added or removed", "counter");
  m.Sample("slurm_bridge_node_taints_total", "op=\"added\"", ns.taints_added);
  m.Sample("slurm_bridge_node_taints_total", "op=\"removed\"", ns.taints_removed);
  m.Family("slurm_bridge_node_drains_total", "Slurm drains and undrains from cordons", "counter");
  m.Sample("slurm_bridge_node_drains_total", "op=\"drain\"", ns.drains);
  m.Sample("slurm_bridge_node_drains_total", "op=\"undrain\"", ns.undrains);
  m.Family("slurm_bridge_external_node_ops_total",
           "Slurm external nodes registered for labelled Kubernetes nodes, by operation",
           "counter");
  m.Sample("slurm_bridge_external_node_ops_total", "op=\"register\"", ns.external_registered);
  m.Sample("slurm_bridge_external_node_ops_total", "op=\"drain\"", ns.external_drains);
  m.Sample("slurm_bridge_external_node_ops_total", "op=\"recreate\"", ns.external_recreated);
  m.Sample("slurm_bridge_external_node_ops_total", "op=\"remove\"", ns.external_removed);
  m.Sample("slurm_bridge_external_node_ops_total", "op=\"update\"", ns.external_updates);
  m.Family("slurm_bridge_node_condition_updates_total", "SlurmNodeReady condition writes",
           "counter");
  m.Sample("slurm_bridge_node_condition_updates_total", "", ns.condition_updates);
  m.Family("slurm_bridge_reconcile_errors_total", "Failed reconciles, by controller", "counter");
  m.Sample("slurm_bridge_reconcile_errors_total", "controller=\"pods\"", ps.errors);
  m.Sample("slurm_bridge_reconcile_errors_total", "controller=\"nodes\"", ns.errors);
  m.Family("slurm_bridge_queue_depth", "Work items ready in a queue", "gauge");
  m.Sample("slurm_bridge_queue_depth", "queue=\"scheduler\"", s.scheduler_queue_depth);
  m.Sample("slurm_bridge_queue_depth", "queue=\"pods\"", s.pods_queue_depth);
  m.Family("slurm_bridge_tracked_jobs", "Jobs the scheduler waits on", "gauge");
  m.Sample("slurm_bridge_tracked_jobs", "", s.tracked_jobs);
  m.Family("slurm_bridge_job_state_polls_total",
           "Polls of Slurm's job states (one per interval for the whole process), by kind",
           "counter");
  m.Sample("slurm_bridge_job_state_polls_total", "kind=\"full\"",
           s.job_watch.polls - s.job_watch.fresh_polls);
  m.Sample("slurm_bridge_job_state_polls_total", "kind=\"fresh\"", s.job_watch.fresh_polls);
  m.Family("slurm_bridge_jobs_missing",
           "Watched jobs with bound pods that the last state poll did not find", "gauge");
  m.Sample("slurm_bridge_jobs_missing", "", ps.jobs_missing);
  m.Family("slurm_bridge_jobs_steady",
           "Running jobs whose pods are all bound and running: their states are read every "
           "boundJobPollInterval, not every jobPollInterval",
           "gauge");
  m.Sample("slurm_bridge_jobs_steady", "", ps.jobs_steady);
  m.Family("slurm_bridge_gone_brake_engaged",
           "1 while more jobs are missing than jobGoneBrake: their pods are not deleted", "gauge");
  m.Sample("slurm_bridge_gone_brake_engaged", "", ps.gone_brake_engaged ? 1 : 0);
  m.Family("slurm_bridge_job_state_poll_errors_total", "Polls of Slurm's job states that failed",
           "counter");
  m.Sample("slurm_bridge_job_state_poll_errors_total", "", s.job_watch.poll_errors);
  // Each family's samples follow its own HELP and TYPE lines (the format wants them together).
  const std::array<std::pair<std::string_view, const EventStats*>, 3> recorders = {
      {{"scheduler", &s.scheduler_events}, {"pods", &s.pods_events}, {"nodes", &s.nodes_events}}};
  m.Family("slurm_bridge_events_dropped_total",
           "Events not written (queue full, spam-filtered, failed for good), by component",
           "counter");
  for (const auto& [name, e] : recorders) {
    m.Sample("slurm_bridge_events_dropped_total", fmt::format("component=\"{}\"", name),
             e->dropped);
  }
  m.Family("slurm_bridge_events_pending", "Events queued to be written, by component", "gauge");
  for (const auto& [name, e] : recorders) {
    m.Sample("slurm_bridge_events_pending", fmt::format("component=\"{}\"", name), e->pending);
  }
  const net::ClientStats& sl = s.slurm_http;
  const net::ClientStats& ku = s.kube_http;
  m.Family("slurm_bridge_client_requests_total", "Requests sent, by server", "counter");
  m.Sample("slurm_bridge_client_requests_total", "server=\"slurmrestd\"", sl.requests);
  m.Sample("slurm_bridge_client_requests_total", "server=\"kube-apiserver\"", ku.requests);
  m.Family("slurm_bridge_client_connections_opened_total",
           "Connections opened, by server (the other requests reused one)", "counter");
  m.Sample("slurm_bridge_client_connections_opened_total", "server=\"slurmrestd\"",
           sl.connections_opened);
  m.Sample("slurm_bridge_client_connections_opened_total", "server=\"kube-apiserver\"",
           ku.connections_opened);
  m.Family("slurm_bridge_client_errors_total", "Failed requests, by server and kind", "counter");
  m.Sample("slurm_bridge_client_errors_total", "server=\"slurmrestd\",kind=\"transport\"",
           sl.transport_errors);
  m.Sample("slurm_bridge_client_errors_total", "server=\"slurmrestd\",kind=\"4xx\"",
           sl.responses_4xx);
  m.Sample("slurm_bridge_client_errors_total", "server=\"slurmrestd\",kind=\"5xx\"",
           sl.responses_5xx);
  m.Sample("slurm_bridge_client_errors_total", "server=\"kube-apiserver\",kind=\"transport\"",
           ku.transport_errors);
  m.Sample("slurm_bridge_client_errors_total", "server=\"kube-apiserver\",kind=\"4xx\"",
           ku.responses_4xx);
  m.Sample("slurm_bridge_client_errors_total", "server=\"kube-apiserver\",kind=\"5xx\"",
           ku.responses_5xx);
  m.Family("slurm_bridge_client_request_duration_seconds",
           "Request latency (retries included), by server", "histogram");
  m.Histogram("slurm_bridge_client_request_duration_seconds", "server=\"slurmrestd\"", sl);
  m.Histogram("slurm_bridge_client_request_duration_seconds", "server=\"kube-apiserver\"", ku);
  m.Family("slurm_bridge_pods_waiting",
           "Pending pods the scheduler told why they wait, by why: Slurm's reason, or "
           "gang_incomplete, submitting, not_described",
           "gauge");
  std::map<std::string, std::size_t> waiting = s.pods_waiting;
  for (const char* bridge_reason : {"gang_incomplete", "submitting", "not_described"}) {
    waiting.try_emplace(bridge_reason, 0);
  }
  for (const auto& [reason, n] : waiting) {
    m.Sample("slurm_bridge_pods_waiting", fmt::format("reason=\"{}\"", reason), n);
  }
  m.Family("slurm_bridge_submit_latency_seconds",
           "From a submit sent to Slurm's answer (the job id)", "histogram");
  m.Histogram("slurm_bridge_submit_latency_seconds", ss.submit_latency);
  m.Family("slurm_bridge_bind_latency_seconds",
           "From a job of this process seen RUNNING to its pods bound", "histogram");
  m.Histogram("slurm_bridge_bind_latency_seconds", ss.bind_latency);
  return m.str();
}

}  // namespace sb::app
