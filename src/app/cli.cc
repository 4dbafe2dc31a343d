// SPDX-License-Identifier: Apache-2.0
#include "app/cli.h"

#include <ostream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "app/admission_cmd.h"
#include "app/epilog_cmd.h"
#include "app/logging.h"
#include "app/run_cmd.h"
#include "check/check.h"
#include "common/version.h"
#include "explain/explain.h"

namespace sb::app {
namespace {

bool HasSubcommand(CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (sub->check_name(name)) {
      return true;
    }
  }
  return false;
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  // Installed as kubectl-slurm, kubectl runs it for `kubectl slurm ...`.
  const std::string self = argc > 0 ? std::string(argv[0]) : std::string();
  const bool invoked_as_plugin =
      self.substr(self.find_last_of('/') == std::string::npos ? 0 : self.find_last_of('/') + 1) ==
      "kubectl-slurm";
  CLI::App app{"slurm-bridge: hands the placement of Kubernetes pods to Slurm",
               invoked_as_plugin ? "kubectl slurm" : "slurm-bridge"};
  app.require_subcommand(1);
  bool show_version = false;
  app.add_flag("--version", show_version, "Print the version and exit");
  CLI::App* version = app.add_subcommand("version", "Print the version");

  // scheduler, controllers and all share their flags.
  const std::vector<std::string> levels = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};
  RunOptions run_opts;
  std::string log_level = "info";
  std::string log_format = "text";
  auto add_log_flags = [&](CLI::App* cmd) {
    cmd->add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off")
        ->capture_default_str()
        ->check(CLI::IsMember(levels));
    cmd->add_option("--log-format", log_format,
                    "text, or json (one object per line: ts, level, msg)")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "json"}));
  };
  auto add_run_flags = [&](CLI::App* cmd) {
    cmd->add_option("--config", run_opts.config_path, "Bridge config file (YAML)")
        ->capture_default_str();
    cmd->add_option("--kubeconfig", run_opts.kubeconfig,
                    "kubeconfig file (default: $KUBECONFIG, else in-cluster)");
    add_log_flags(cmd);
    cmd->add_flag("--leader-elect", run_opts.leader_elect,
                  "Run only while holding the leader Lease (for several replicas)");
    cmd->add_option("--leader-election-namespace", run_opts.leader_election_namespace,
                    "Namespace of the Lease (default: the pod's namespace, else default)");
    cmd->add_option("--leader-election-id", run_opts.leader_election_id,
                    "Name of the Lease (default: upstream's name for the component)");
    cmd->add_option("--metrics-bind-address", run_opts.metrics_bind_address,
                    "Address of /metrics (Prometheus text); 0 turns it off")
        ->capture_default_str();
    cmd->add_option("--health-probe-bind-address", run_opts.health_probe_bind_address,
                    "Address of /healthz and /readyz; 0 turns it off")
        ->capture_default_str();
  };
  CLI::App* sched = app.add_subcommand(
      "scheduler",
      "Hand pending pods to Slurm as placeholder jobs and bind them where Slurm runs them");
  add_run_flags(sched);
  CLI::App* ctrl = app.add_subcommand(
      "controllers", "Keep pods and Slurm jobs, Kubernetes nodes and Slurm nodes in step");
  add_run_flags(ctrl);
  CLI::App* all = app.add_subcommand(
      "all", "Scheduler and controllers in one process (and the webhook with --webhook)");
  add_run_flags(all);
  bool all_webhook = false;
  all->add_flag("--webhook", all_webhook,
                "Also serve the admission webhook (flags --webhook-bind-address, --cert-file, "
                "--key-file)");

  AdmissionOptions adm_opts;
  CLI::App* adm = app.add_subcommand(
      "admission", "Admission webhook: hand pods of managed namespaces to the bridge");
  adm->add_option("--config", adm_opts.config_path, "Bridge config file (YAML)")
      ->capture_default_str();
  adm->add_option("--kubeconfig", adm_opts.kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, else in-cluster)");
  adm->add_option("--bind-address", adm_opts.bind_address, "HTTPS address of the webhook")
      ->capture_default_str();
  adm->add_option("--cert-file", adm_opts.cert_file,
                  "Serving certificate (PEM), reloaded on change")
      ->capture_default_str();
  adm->add_option("--key-file", adm_opts.key_file, "Its private key (PEM)")->capture_default_str();
  adm->add_option("--health-probe-bind-address", adm_opts.health_probe_bind_address,
                  "HTTP address of /healthz and /readyz (0: off)")
      ->capture_default_str();
  adm->add_option("--privileged-user", adm_opts.privileged_users,
                  "User allowed to set the bridge's labels and annotations (repeatable; a "
                  "trailing * matches a prefix; default: "
                  "system:serviceaccount:<own namespace>:slurm-bridge-*)");
  adm->add_option("--privileged-group", adm_opts.privileged_groups,
                  "Group whose users may set the bridge's labels and annotations (repeatable)");
  adm->add_option("--system-namespace", adm_opts.system_namespaces,
                  "Namespace whose pods (DaemonSet pods included) may tolerate the managed-node "
                  "taint (repeatable)")
      ->capture_default_str();
  adm->add_option("--max-connections-per-ip", adm_opts.max_connections_per_ip,
                  "Connections one client address may hold (0: no cap; each kube-apiserver is "
                  "one address and opens a connection per concurrent call)")
      ->capture_default_str();
  all->add_option("--webhook-bind-address", adm_opts.bind_address,
                  "HTTPS address of the webhook (with --webhook)")
      ->capture_default_str();
  all->add_option("--cert-file", adm_opts.cert_file, "Webhook serving certificate (PEM)")
      ->capture_default_str();
  all->add_option("--key-file", adm_opts.key_file, "Its private key (PEM)")->capture_default_str();
  add_log_flags(adm);

  check::CheckCmdOptions check_opts;
  CLI::App* chk = app.add_subcommand(
      "check",
      "Check the invariants between Kubernetes and Slurm; print the violations, exit 1 if any");
  chk->add_option("--config", check_opts.config_path, "Bridge config file (YAML)")
      ->capture_default_str();
  chk->add_option("--kubeconfig", check_opts.kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, else in-cluster)");
  chk->add_option("--namespace,-n", check_opts.namespace_,
                  "Only this namespace's pods and the jobs that list them (default: all)");
  chk->add_option("--settle", check_opts.settle,
                  "Re-check this long while violations remain (default: jobSweepInterval, at "
                  "least 5s, plus two jobSweepIntervals; 0: one look)");
  chk->add_option("--max-wait", check_opts.max_wait,
                  "Also report a pod that has waited longer than this with no Slurm job (a "
                  "liveness check; default: off)");
  chk->add_flag("--all-jobs", check_opts.all_jobs,
                "Also scan Slurm's whole job list for the bridge's jobs that no pod names (an "
                "orphan whose pods are gone, a duplicate): slow on a busy Slurm. Default: only "
                "the jobs the bridge's pods name (job-id label, PodScheduled message)");

  // The operator's read-only commands (also `kubectl slurm ...` when called as kubectl-slurm).
  explain::ToolOptions tool_opts;
  tool_opts.command = invoked_as_plugin ? "kubectl slurm" : "slurm-bridge";
  std::string explain_pod;
  auto add_tool_flags = [&](CLI::App* cmd, bool namespaced) {
    if (namespaced) {
      cmd->add_option("--namespace,-n", tool_opts.namespace_,
                      "Namespace (default: the kubeconfig context's)");
    }
    cmd->add_option("--output,-o", tool_opts.output, "text, or json")
        ->capture_default_str()
        ->check(CLI::IsMember({"text", "json"}));
    cmd->add_option("--config", tool_opts.config_path,
                    "The bridge's config.yaml: scheduler name, cluster name, slurmRestApi "
                    "(default: none, the defaults)");
    cmd->add_option("--kubeconfig", tool_opts.kubeconfig,
                    "kubeconfig file (default: $KUBECONFIG, else in-cluster)");
    cmd->add_option("--slurm-url", tool_opts.slurm_url,
                    "slurmrestd URL (default: the config's slurmRestApi)");
    cmd->add_option("--slurm-token-file", tool_opts.slurm_token_file,
                    "File holding a Slurm JWT (default: $SLURM_JWT, else the file "
                    "$SLURM_JWT_FILE names)");
  };
  CLI::App* expl = app.add_subcommand(
      "explain",
      "Why a pod waits or runs where it does: its group, its Slurm job (Slurm's reason, "
      "priority, expected start), the nodes the bridge excludes, what it waits for. Read-only");
  expl->add_option("pod", explain_pod, "The pod's name")->required();
  add_tool_flags(expl, true);
  CLI::App* jobs =
      app.add_subcommand("jobs", "The bridge's live Slurm jobs and their pods (read-only)");
  add_tool_flags(jobs, true);
  jobs->add_flag("--all-namespaces,-A", tool_opts.all_namespaces, "Every namespace");
  jobs->add_flag("--all-jobs", tool_opts.all_jobs,
                 "Also the bridge's jobs no pod names (their pods all gone), from a scan of "
                 "Slurm's whole job list: slow on a busy Slurm. Default: the jobs the pods name");
  CLI::App* nodes_cmd = app.add_subcommand(
      "nodes", "Each node's Kubernetes and Slurm state side by side (read-only)");
  add_tool_flags(nodes_cmd, false);

  EpilogOptions epi_opts;
  CLI::App* epi = app.add_subcommand(
      "epilog",
      "Slurm node Epilog: hold the node (job COMPLETING) until the job's pods on it are gone; "
      "reads SLURM_JOB_ID and SLURMD_NODENAME, always exits 0");
  epi->add_option(
      "--config", epi_opts.config_path,
      "Bridge config file (YAML), for maxTerminationGracePeriodSeconds (default: none)");
  epi->add_option("--kubeconfig", epi_opts.kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, else in-cluster)");
  epi->add_option("--max-wait", epi_opts.max_wait,
                  "Give up (and let Slurm free the node) after this long (default: "
                  "maxTerminationGracePeriodSeconds, 300s without --config, plus 30s)");
  epi->add_option("--log-level", epi_opts.log_level,
                  "trace, debug, info, warn, error, critical, off")
      ->capture_default_str()
      ->check(CLI::IsMember(levels));
  epi->add_option("--log-format", epi_opts.log_format, "text, or json (one object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));

  try {
    // Let --version work without a subcommand.
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--version") {
        out << "slurm-bridge " << kVersion << "\n";
        return 0;
      }
    }
    // CLI11 reports a mistyped subcommand only as "a subcommand is required"; name it instead.
    if (argc > 1 && argv[1][0] != '-' && !HasSubcommand(app, argv[1])) {
      err << "slurm-bridge: unknown subcommand '" << argv[1] << "'\n"
          << "Run 'slurm-bridge --help' for usage.\n";
      return 2;
    }
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "slurm-bridge: " << e.what() << "\n"
        << "Run 'slurm-bridge --help' for usage.\n";
    return 2;
  }

  if (version->parsed()) {
    out << "slurm-bridge " << kVersion << "\n";
    return 0;
  }
  if (epi->parsed()) {
    return RunEpilog(epi_opts);  // logs to stderr, its own way
  }
  ConfigureLogging(log_level, log_format);
  if (sched->parsed() || ctrl->parsed() || all->parsed()) {
    run_opts.scheduler = sched->parsed() || all->parsed();
    run_opts.controllers = ctrl->parsed() || all->parsed();
    if (all->parsed() && all_webhook) {
      adm_opts.config_path = run_opts.config_path;
      adm_opts.kubeconfig = run_opts.kubeconfig;
      run_opts.webhook = adm_opts;
    }
    return RunComponents(run_opts);
  }
  if (adm->parsed()) {
    return RunAdmission(adm_opts);
  }
  if (chk->parsed()) {
    return check::RunCheck(check_opts, out, err);
  }
  if (expl->parsed()) return explain::RunExplain(tool_opts, explain_pod, out, err);
  if (jobs->parsed()) return explain::RunJobs(tool_opts, out, err);
  if (nodes_cmd->parsed()) return explain::RunNodes(tool_opts, out, err);
  err << "slurm-bridge: no subcommand\n";
  return 2;
}

}  // namespace sb::app
