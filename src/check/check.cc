// SPDX-License-Identifier: Apache-2.0
#include "check/check.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "bridge/config.h"
#include "bridge/names.h"
#include "bridge/pods.h"
#include "bridge/tag.h"
#include "kube/config.h"
#include "net/http_client.h"
#include "slurm/token_source.h"
#include "wiring/bridge_jobs.h"
#include "wiring/clients.h"

namespace sb::check {
namespace asio = boost::asio;
namespace {

tl::unexpected<Error> Context(Error e, const std::string& what) {
  e.message = what + ": " + e.message;
  return tl::unexpected<Error>(std::move(e));
}

// The jobs our pods name (wiring::NamedJobIds), and those of them whose record an ended state
// does not spare (invariant 6: two bound pods of the job on one node, component by component).
struct PodJobs {
  std::set<std::int64_t> ids;
  std::set<std::int64_t> crowded;
};

PodJobs NamedJobs(const std::vector<kube::Pod>& pods, const bridge::InvariantOptions& options) {
  PodJobs out;
  std::map<std::tuple<std::int64_t, std::string, std::string>, int> on_node;
  for (const kube::Pod& p : pods) {
    if (p.spec.scheduler_name != options.scheduler_name) continue;
    for (std::int64_t id : wiring::NamedJobIds(p)) out.ids.insert(id);
    const std::optional<std::int64_t> labelled = wiring::LabelledJobId(p);
    if (!labelled || p.spec.node_name.empty() || bridge::PodFinished(p)) continue;
    auto offset = p.metadata.labels.find(std::string(bridge::kHetJobOffsetLabel));
    const std::string component = offset == p.metadata.labels.end() ? "" : offset->second;
    if (++on_node[{*labelled, component, p.spec.node_name}] == 2) out.crowded.insert(*labelled);
  }
  return out;
}

// Whether a job's record must be read: its state alone serves the invariants once the job has
// ended (they skip an ended job but for invariant 1, which needs its state only, and 6: see
// PodJobs::crowded). Every other state, an empty one included (invariant 7), needs the tag.
bool NeedsRecord(const std::vector<std::string>& state) {
  if (state.empty()) return true;
  const std::string& base = state.front();
  return !bridge::JobEnded(base) || base == "GONE";
}

// Drops the fields the invariants do not read (bridge/invariants.cc): a check of 50,000 jobs
// keeps their ids, states, tags, nodes and components only.
void KeepCheckedFields(slurm::JobInfo& j) {
  slurm::JobInfo kept;
  kept.job_id = j.job_id;
  kept.job_state = std::move(j.job_state);
  kept.admin_comment = std::move(j.admin_comment);
  kept.nodes = std::move(j.nodes);
  kept.het_job_id = j.het_job_id;
  kept.het_job_offset = j.het_job_offset;
  j = std::move(kept);
}

}  // namespace

asio::awaitable<Result<bridge::Snapshot>> ReadSnapshot(kube::Client& kube, slurm::Client& slurm,
                                                       const bridge::InvariantOptions& options,
                                                       JobScope jobs_scope) {
  bridge::Snapshot s;
  // Named, not a braced temporary in the co_await: GCC 12 destroys such a temporary twice.
  // Our pods only (the invariants skip the others): a cluster's other pods cost nothing.
  kube::ListOptions ours;
  ours.limit = 500;
  ours.field_selector = "spec.schedulerName=" + options.scheduler_name;
  auto pods = co_await kube::ListAllAs<kube::Pod>(kube, kube::PodsRef(options.namespace_), ours);
  if (!pods) co_return Context(pods.error(), "listing pods");
  s.pods = std::move(pods->items);
  kube::ListOptions paged;
  paged.limit = 500;
  auto nodes = co_await kube::ListAllAs<kube::Node>(kube, kube::NodesRef(), paged);
  if (!nodes) co_return Context(nodes.error(), "listing nodes");
  s.nodes = std::move(nodes->items);

  const PodJobs named = NamedJobs(s.pods, options);
  if (jobs_scope == JobScope::kAll) {
    // One scan of the whole list, keeping the bridge's jobs and those the pods name (a label
    // may name another's job: invariant 1 says so) with their components.
    slurm::JobFilter keep = [ids = named.ids, cluster = options.cluster_name,
                             scheduler = options.scheduler_name](const slurm::JobInfo& j) {
      if (ids.contains(j.job_id) || (j.het_job_id != 0 && ids.contains(j.het_job_id))) {
        return true;
      }
      std::optional<bridge::JobTag> tag = bridge::ParseJobTag(j.admin_comment);
      return tag && tag->BelongsTo(cluster, scheduler);
    };
    auto jobs = co_await slurm.ScanJobs(0, std::move(keep));
    if (!jobs) co_return Context(jobs.error(), "listing Slurm jobs");
    s.jobs = std::move(jobs->jobs);
    co_return s;
  }

  // The jobs the pods name: states first, then the records of those whose state matters.
  std::vector<std::int64_t> ids(named.ids.begin(), named.ids.end());
  auto states = co_await wiring::ReadJobStates(slurm, std::move(ids));
  if (!states) co_return Context(states.error(), "reading the states of Slurm jobs");
  std::vector<std::int64_t> detailed;
  for (const auto& [id, state] : *states) {
    if (NeedsRecord(state) || named.crowded.contains(id)) detailed.push_back(id);
  }
  wiring::RecordReadOptions slim;
  slim.trim = KeepCheckedFields;
  auto records = co_await wiring::ReadJobRecords(slurm, std::move(detailed), std::move(slim));
  if (!records) co_return Context(records.error(), "reading Slurm jobs");
  std::set<std::int64_t> read;
  for (const slurm::JobInfo& j : *records) read.insert(j.job_id);
  s.jobs = std::move(*records);
  for (auto& [id, state] : *states) {
    if (read.contains(id) || NeedsRecord(state) || named.crowded.contains(id)) continue;
    slurm::JobInfo ended;  // its state is all the invariants look at (see NeedsRecord)
    ended.job_id = id;
    ended.job_state = std::move(state);
    s.jobs.push_back(std::move(ended));
  }
  co_return s;
}

asio::awaitable<Result<std::vector<bridge::Violation>>> CheckUntilSettled(
    kube::Client& kube, slurm::Client& slurm, bridge::InvariantOptions options,
    SettleOptions settle) {
  const auto deadline = std::chrono::steady_clock::now() + settle.settle;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    Result<bridge::Snapshot> s = co_await ReadSnapshot(kube, slurm, options, settle.jobs);
    const bool last = std::chrono::steady_clock::now() >= deadline;
    if (!s && last) co_return tl::unexpected(s.error());
    if (s) {
      std::vector<bridge::Violation> v =
          bridge::CheckInvariants(*s, std::chrono::system_clock::now(), options);
      if (v.empty() || last) co_return v;
    }
    timer.expires_after(settle.interval);
    co_await timer.async_wait(asio::use_awaitable);
  }
}

std::chrono::milliseconds DefaultSettle(std::chrono::milliseconds job_sweep_interval) {
  return std::max<std::chrono::milliseconds>(std::chrono::seconds(5), job_sweep_interval) +
         2 * job_sweep_interval;
}

int RunCheck(const CheckCmdOptions& options, std::ostream& out, std::ostream& err) {
  Result<bridge::Config> config = wiring::LoadConfig(options.config_path);
  if (!config) {
    err << "slurm-bridge check: " << config.error().message << "\n";
    return 1;
  }
  if (config->slurm_rest_api.empty()) {
    err << "slurm-bridge check: " << options.config_path
        << ": config key slurmRestApi is required\n";
    return 1;
  }
  const char* jwt_file = std::getenv("SLURM_JWT_FILE");
  if (jwt_file == nullptr || *jwt_file == '\0') {
    err << "slurm-bridge check: SLURM_JWT_FILE is not set: it names the file holding "
           "slurmrestd's JWT\n";
    return 1;
  }
  SettleOptions settle{.settle = DefaultSettle(config->job_sweep_interval),
                       .jobs = options.all_jobs ? JobScope::kAll : JobScope::kNamedByPods};
  if (!options.settle.empty()) {
    Result<std::chrono::milliseconds> d = bridge::ParseDuration(options.settle);
    if (!d) {
      err << "slurm-bridge check: --settle: " << d.error().message << "\n";
      return 1;
    }
    settle.settle = *d;
  }

  asio::io_context io(1);
  kube::LoadOptions kube_load;
  kube_load.kubeconfig_path = options.kubeconfig;
  Result<kube::Config> kube_config = kube::LoadConfig(kube_load);
  if (!kube_config) {
    err << "slurm-bridge check: Kubernetes config: " << kube_config.error().message << "\n";
    return 1;
  }
  Result<std::unique_ptr<net::HttpClient>> kube_http =
      kube::MakeHttpClient(io.get_executor(), *kube_config, {});
  if (!kube_http) {
    err << "slurm-bridge check: Kubernetes client: " << kube_http.error().message << "\n";
    return 1;
  }
  std::unique_ptr<kube::Client> kube_client = kube::MakeClient(**kube_http, kube_config->token);
  slurm::ClientConfig slurm_config = wiring::SlurmClientConfig(*config);
  Result<slurm::ClientPtr> slurm_client =
      slurm::MakeClient(io.get_executor(), slurm_config, slurm::MakeFileTokenSource(jwt_file));
  if (!slurm_client) {
    err << "slurm-bridge check: Slurm client: " << slurm_client.error().message << "\n";
    return 1;
  }

  bridge::InvariantOptions inv{.scheduler_name = config->scheduler_name,
                               .cluster_name = config->cluster_name,
                               .namespace_ = options.namespace_};
  if (!options.max_wait.empty()) {
    Result<std::chrono::milliseconds> d = bridge::ParseDuration(options.max_wait);
    if (!d) {
      err << "slurm-bridge check: --max-wait: " << d.error().message << "\n";
      return 1;
    }
    inv.max_wait = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  std::optional<Result<std::vector<bridge::Violation>>> result;
  asio::co_spawn(io, CheckUntilSettled(*kube_client, **slurm_client, inv, settle),
                 [&](const std::exception_ptr& e, Result<std::vector<bridge::Violation>> r) {
                   if (e) {
                     r = MakeError(ErrorCode::kInternal, "the check failed");
                   }
                   result = std::move(r);
                 });
  io.run();
  if (!result || !*result) {
    err << "slurm-bridge check: "
        << (result ? result->error().ToString() : std::string("the check did not finish")) << "\n";
    return 1;
  }
  for (const bridge::Violation& v : **result) out << v.text << "\n";
  if ((*result)->empty()) out << "no violations\n";
  return (*result)->empty() ? 0 : 1;
}

}  // namespace sb::check
