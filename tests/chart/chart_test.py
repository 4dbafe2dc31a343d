#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# Chart tests for helm/slurm-bridge: renders the chart with real Helm (`helm template`, the
# pinned Helm 4 of testenv/helm/ensure-helm.sh; no cluster: `lookup` answers nothing, as for
# any `helm template`) and asserts on the rendered objects: names, labels, args, env, mounts,
# probes, RBAC rules, webhooks, certificates, the monitoring objects (ServiceMonitors,
# PrometheusRule, the Grafana dashboard; their metrics against the documented metrics table)
# and values.schema.json (bad values refused by Helm with a message naming the key). No
# snapshots: every assertion names what it checks. What needs a cluster (`lookup` keeping the
# webhook's pair across an upgrade, server-side validation, RBAC) is tested against a real
# apiserver: testenv/helm/apiserver-check.sh and tests/e2e/chart_incluster_test.sh.
#
# Usage: chart_test.py [--helm PATH] [--binary PATH] [-k NAME]
#   --helm       the helm binary (default: what testenv/helm/ensure-helm.sh prints; $SB_HELM)
#   --binary     the slurm-bridge binary: its CLI must take each Deployment's args and the
#                rendered config.yaml (skipped when not given or not built)
#   -k NAME      run only the cases whose name contains NAME
import argparse
import atexit
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "helm", "slurm-bridge")
TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "testdata")
HELM = None
HELM_ENV = None  # HELM_*_HOME in a temporary directory, no kubeconfig: Helm touches nothing here
BINARY = None

with open(os.path.join(CHART, "Chart.yaml")) as f:
    CHART_META = yaml.safe_load(f)
VERSION = CHART_META["version"]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def eq(got, want, what):
    if got != want:
        if isinstance(got, set) and isinstance(want, set):
            raise Failure(f"{what}: extra {sorted(got - want, key=str)}, "
                          f"missing {sorted(want - got, key=str)}")
        raise Failure(f"{what}: got {got!r}, want {want!r}")


def helm(*args):
    return subprocess.run([HELM, *args], capture_output=True, text=True, env=HELM_ENV)


def render(*args, release="slurm-bridge", namespace="slurm", expect_fail=False, tests=False):
    """`helm template RELEASE CHART --namespace NAMESPACE ARGS...` (ARGS: helm template's own
    flags: --set, --set-string, -f, --kube-version, --api-versions, --is-upgrade, ...): the
    rendered objects, or with expect_fail Helm's error message (it must fail). The `helm test`
    hooks only with tests=True (--skip-tests otherwise: what an install applies)."""
    p = helm("template", release, CHART, "--namespace", namespace,
             *([] if tests else ["--skip-tests"]), *args)
    if expect_fail:
        check(p.returncode != 0, f"{' '.join(args)}: rendering should fail")
        return p.stderr
    if p.returncode != 0:
        raise Failure(f"helm template {' '.join(args)} failed: {p.stderr}")
    return Objects([d for d in yaml.safe_load_all(p.stdout) if d])


def notes(*args, release="slurm-bridge", namespace="slurm"):
    """templates/NOTES.txt as `helm install` prints it (--dry-run=client: no cluster)."""
    p = helm("install", release, CHART, "--namespace", namespace, "--dry-run=client",
             "-o", "json", *args)
    eq(p.returncode, 0, f"helm install --dry-run=client {' '.join(args)}: {p.stderr}")
    return json.loads(p.stdout)["info"]["notes"]


class Objects:
    def __init__(self, items):
        self.items = items

    def kinds(self):
        return sorted((o["kind"], o["metadata"]["name"]) for o in self.items)

    def get(self, kind, name):
        found = [o for o in self.items if o["kind"] == kind and o["metadata"]["name"] == name]
        check(len(found) == 1, f"{kind}/{name}: {len(found)} rendered, want 1 (have {self.kinds()})")
        return found[0]

    def has(self, kind, name):
        return any(o["kind"] == kind and o["metadata"]["name"] == name for o in self.items)

    def config(self):
        cm = self.get("ConfigMap", "slurm-bridge-config")
        return yaml.safe_load(cm["data"]["config.yaml"])


def container(deploy):
    cs = deploy["spec"]["template"]["spec"]["containers"]
    eq(len(cs), 1, f"{deploy['metadata']['name']}: containers")
    return cs[0]


def rules(role):
    """A ClusterRole's rules as a set of (group, resource, verb, resourceName) tuples."""
    out = set()
    for r in role["rules"]:
        for g in r.get("apiGroups", []):
            for res in r["resources"]:
                for v in r["verbs"]:
                    for n in r.get("resourceNames", [None]):
                        out.add((g, res, v, n))
    return out


def expand(spec):
    out = set()
    for g, res, verbs in spec:
        for r in res.split(","):
            for v in verbs.split(","):
                out.add((g, r, v, None))
    return out


# Every rule is a call in the code (helm/slurm-bridge/README.md, "RBAC").
SCHEDULER_RULES = expand([
    ("", "pods", "get,list,watch,patch"),
    ("", "pods/binding", "create"),
    ("", "pods/status", "patch"),
    ("", "nodes", "list,watch"),
    ("", "events", "create,patch"),
    ("", "persistentvolumeclaims,persistentvolumes", "get"),
    ("storage.k8s.io", "storageclasses", "get"),
    ("apps", "deployments,replicasets,statefulsets", "get"),
    ("batch", "jobs", "get"),
    ("jobset.x-k8s.io", "jobsets", "get"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets", "get"),
    ("scheduling.x-k8s.io", "podgroups", "get"),
    ("scheduling.k8s.io", "podgroups", "get"),
    ("scheduling.k8s.io", "podgroups/status", "patch"),
    ("resource.k8s.io", "resourceslices,deviceclasses,resourceclaimtemplates", "get,list,watch"),
    ("resource.k8s.io", "resourceclaims", "get,list,watch,create,patch,update,delete"),
    ("resource.k8s.io", "resourceclaims/status", "patch,update"),
    ("resource.k8s.io", "resourceclaims/binding", "patch,update"),
])
CONTROLLERS_RULES = expand([
    ("", "pods", "get,list,watch,patch,delete"),
    ("", "pods/status", "patch"),
    ("", "nodes", "list,watch,patch"),
    ("", "nodes/status", "patch"),
    ("", "namespaces", "get"),
    ("", "events", "create,patch"),
    ("resource.k8s.io", "resourceslices", "get,list,watch"),
    ("resource.k8s.io", "resourceclaims", "get,delete"),
])
ADMISSION_RULES = expand([
    ("", "namespaces", "get,list,watch"),
    ("resource.k8s.io", "deviceclasses,resourceclaimtemplates", "get"),
])


def lease_rules(name):
    return {("coordination.k8s.io", "leases", "create", None),
            ("coordination.k8s.io", "leases", "get", name),
            ("coordination.k8s.io", "leases", "update", name)}


def selector(name, release="slurm-bridge"):
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": release}


def labels(name, component, release="slurm-bridge"):
    return {**selector(name, release), "app.kubernetes.io/component": component,
            "helm.sh/chart": f"slurm-bridge-{VERSION}", "app.kubernetes.io/version": VERSION,
            "app.kubernetes.io/managed-by": "Helm"}


def default_objects(sched="slurm-bridge-scheduler", name="slurm-bridge", cert_manager=True):
    adm, ctl = f"{name}-admission", f"{name}-controllers"
    objs = [("ConfigMap", "slurm-bridge-config"),
            ("Deployment", sched), ("ServiceAccount", sched), ("ClusterRole", sched),
            ("ClusterRoleBinding", sched),
            ("Deployment", ctl), ("ServiceAccount", ctl), ("ClusterRole", ctl),
            ("ClusterRoleBinding", ctl), ("Service", ctl),
            ("Deployment", adm), ("ServiceAccount", adm), ("ClusterRole", adm),
            ("ClusterRoleBinding", adm), ("Service", adm),
            ("ValidatingWebhookConfiguration", adm), ("MutatingWebhookConfiguration", adm)]
    # (ours) the webhook's PodDisruptionBudget is on by default (2 replicas, N-7).
    objs += [("PodDisruptionBudget", adm)]
    if cert_manager:
        objs += [("Issuer", f"{adm}-self-issuer"), ("Certificate", f"{adm}-root-ca"),
                 ("Issuer", f"{adm}-root-issuer"), ("Certificate", adm)]
    else:
        objs += [("Secret", adm)]
    return sorted(objs)


def check_component(objs, kind_name, component, ns, release="slurm-bridge"):
    d = objs.get("Deployment", kind_name)
    eq(d["metadata"]["namespace"], ns, f"{kind_name} namespace")
    eq(d["spec"]["selector"]["matchLabels"], selector(kind_name, release), f"{kind_name} selector")
    eq(d["metadata"]["labels"], labels(kind_name, component, release), f"{kind_name} labels")
    eq(d["spec"]["template"]["metadata"]["labels"], labels(kind_name, component, release),
       f"{kind_name} pod labels")
    check(re.fullmatch(r"[0-9a-f]{64}",
                       d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]),
          f"{kind_name}: checksum/config is 64 hex characters")
    pod = d["spec"]["template"]["spec"]
    eq(pod["serviceAccountName"], kind_name, f"{kind_name} serviceAccountName")
    c = container(d)
    eq(c["command"], ["slurm-bridge"], f"{kind_name} command")
    eq(c["args"][0], component, f"{kind_name} subcommand")
    eq(c["livenessProbe"], {"httpGet": {"path": "/healthz", "port": 8081},
                            "initialDelaySeconds": 15}, f"{kind_name} liveness")
    eq(c["readinessProbe"], {"httpGet": {"path": "/readyz", "port": 8081}},
       f"{kind_name} readiness")
    eq(c["securityContext"]["runAsNonRoot"], True, f"{kind_name} runAsNonRoot")
    eq(c["securityContext"]["readOnlyRootFilesystem"], True, f"{kind_name} readOnlyRootFilesystem")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    eq(mounts["slurm-bridge-config"]["mountPath"], "/etc/slurm-bridge/", f"{kind_name} config mount")
    check(all(m.get("readOnly") for m in c["volumeMounts"]), f"{kind_name}: every mount read-only")
    vols = {v["name"]: v for v in pod["volumes"]}
    eq(vols["slurm-bridge-config"]["configMap"]["name"], "slurm-bridge-config",
       f"{kind_name} config volume")
    sa = objs.get("ServiceAccount", kind_name)
    eq(sa["metadata"]["namespace"], ns, f"{kind_name} ServiceAccount namespace")
    crb = objs.get("ClusterRoleBinding", kind_name)
    eq(crb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": kind_name}, f"{kind_name} roleRef")
    eq(crb["subjects"], [{"kind": "ServiceAccount", "name": kind_name, "namespace": ns}],
       f"{kind_name} subjects")
    return d, c, vols, mounts


def check_jwt(c, vols, mounts, secret="slurm-bridge-token", key="auth-token"):
    eq(c["env"][0], {"name": "SLURM_JWT_FILE", "value": "/var/run/secrets/slurm/auth-token"},
       "env[0]")
    eq(mounts["slurm-jwt"]["mountPath"], "/var/run/secrets/slurm", "JWT mount")
    check("subPath" not in mounts["slurm-jwt"], "JWT mounted without subPath (rotation)")
    eq(vols["slurm-jwt"]["secret"]["secretName"], secret, "JWT Secret")
    eq(vols["slurm-jwt"]["secret"]["items"], [{"key": key, "path": "auth-token"}], "JWT items")


WORKLOAD_RULES = [
    {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "statefulsets",
                                          "daemonsets"]},
    {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"]},
    {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"]},
    {"apiGroups": ["scheduling.x-k8s.io"], "resources": ["podgroups"]}]


def check_webhooks(objs, adm, ns, ca_bundle, sched="slurm-bridge-scheduler", scoped=True):
    pod_rule = lambda ops, res: {"apiGroups": [""], "apiVersions": ["v1"], "operations": ops,
                                 "resources": res, "scope": "Namespaced"}
    for kind, name, path, rules_want in [
            ("ValidatingWebhookConfiguration", "pods.slinky.slurm.net", "/validate--v1-pod",
             [pod_rule(["CREATE", "UPDATE"],
                       ["pods", "pods/status", "pods/resize", "pods/ephemeralcontainers"])]),
            ("ValidatingWebhookConfiguration", "workloads.slinky.slurm.net", "/validate--v1-pod",
             [dict(r, apiVersions=["*"], operations=["CREATE", "UPDATE"], scope="Namespaced")
              for r in WORKLOAD_RULES]),
            ("MutatingWebhookConfiguration", "pods.slinky.slurm.net", "/mutate--v1-pod",
             [pod_rule(["CREATE"], ["pods"]),
              pod_rule(["UPDATE"], ["pods/ephemeralcontainers"])])]:
        w = objs.get(kind, adm)
        hooks = {h["name"]: h for h in w["webhooks"]}
        eq(len(w["webhooks"]), 2 if kind.startswith("Validating") else 1, f"{kind} webhooks")
        check(name in hooks, f"{kind} has webhook {name}")
        h = hooks[name]
        eq(h["clientConfig"]["service"], {"name": adm, "namespace": ns, "path": path},
           f"{kind} {name} service")
        eq(h["clientConfig"].get("caBundle"), ca_bundle, f"{kind} {name} caBundle")
        eq(h["rules"], rules_want, f"{kind} {name} rules")
        eq(h["namespaceSelector"], {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": ["kube-system", ns]}]}, f"{kind} namespaceSelector")
        eq(h["sideEffects"], "None", f"{kind} sideEffects")
        eq(h["admissionReviewVersions"], ["v1"], f"{kind} admissionReviewVersions")
        eq(h["failurePolicy"], "Fail", f"{kind} failurePolicy")
        conds = h.get("matchConditions", [])
        if scoped:
            eq(len(conds), 1, f"{kind} {name}: one matchCondition")
            expr = conds[0]["expression"] if conds else ""
            check(name == "workloads.slinky.slurm.net" or f"object.spec.schedulerName == '{sched}'" in expr,
                  f"{kind} {name}: scoped to the bridge's pods: {expr}")
        else:
            eq(conds, [], f"{kind} {name}: no matchConditions")
        ann = w["metadata"].get("annotations", {})
        if ca_bundle is None:
            eq(ann.get("cert-manager.io/inject-ca-from"), f"{ns}/{adm}", f"{kind} inject-ca-from")
            eq(ann.get("certmanager.k8s.io/inject-ca-from"), f"{ns}/{adm}",
               f"{kind} legacy inject-ca-from")
        else:
            check("cert-manager.io/inject-ca-from" not in ann, f"{kind}: no cert-manager annotation")


def args_of(c):
    return c["args"]


# ---- cases -------------------------------------------------------------------------------------

def case_default_values():
    objs = render()
    eq(objs.kinds(), default_objects(), "objects")
    ns = "slurm"
    d, c, vols, mounts = check_component(objs, "slurm-bridge-scheduler", "scheduler", ns)
    eq(c["name"], "scheduler", "scheduler container name")
    eq(c["image"], f"ghcr.io/slurm-bridge-cpp/slurm-bridge-scheduler:{VERSION}", "scheduler image")
    eq(c["imagePullPolicy"], "IfNotPresent", "scheduler pullPolicy")
    eq(d["spec"]["replicas"], 1, "scheduler replicas")
    eq(args_of(c), ["scheduler", "--config=/etc/slurm-bridge/config.yaml", "--log-level=info",
                    "--log-format=text", "--metrics-bind-address=:8080",
                    "--health-probe-bind-address=:8081"], "scheduler args")
    check_jwt(c, vols, mounts)
    eq(d["spec"]["template"]["spec"]["hostNetwork"], False, "hostNetwork")
    for k in ("priorityClassName", "nodeSelector", "affinity", "tolerations"):
        check(k not in d["spec"]["template"]["spec"], f"scheduler: no {k} by default")
    # (ours) a memory limit by default: a leak cannot take the node down.
    eq(c["resources"], {"requests": {"cpu": "100m", "memory": "128Mi"},
                        "limits": {"memory": "1Gi"}}, "scheduler: default resources")
    eq(d["spec"]["strategy"], {"type": "Recreate"}, "scheduler: Recreate without leaderElect")

    d, c, vols, mounts = check_component(objs, "slurm-bridge-controllers", "controllers", ns)
    eq(c["name"], "slurm-bridge-controllers", "controllers container name")
    eq(c["image"], f"ghcr.io/slurm-bridge-cpp/slurm-bridge-controllers:{VERSION}",
       "controllers image")
    eq(args_of(c)[:3], ["controllers", "--config=/etc/slurm-bridge/config.yaml",
                        "--log-level=info"], "controllers args")
    check("--leader-elect" not in args_of(c), "controllers: no leader election by default")
    check_jwt(c, vols, mounts)
    svc = objs.get("Service", "slurm-bridge-controllers")
    eq(svc["spec"]["clusterIP"], "None", "controllers Service headless")
    eq([(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
       [("metrics", 8080, 8080), ("health", 8081, 8081)], "controllers Service ports")
    eq(svc["spec"]["selector"], selector("slurm-bridge-controllers"), "controllers Service selector")

    d, c, vols, mounts = check_component(objs, "slurm-bridge-admission", "admission", ns)
    eq(c["name"], "slurm-bridge-admission", "admission container name")
    eq(c["image"], f"ghcr.io/slurm-bridge-cpp/slurm-bridge-admission:{VERSION}", "admission image")
    check("env" not in c, "admission gets no env (no JWT)")
    check("slurm-jwt" not in vols, "admission gets no JWT volume")
    eq(mounts["certificates"]["mountPath"], "/tmp/k8s-webhook-server/serving-certs/", "cert mount")
    eq(vols["certificates"]["secret"], {"secretName": "slurm-bridge-admission", "defaultMode": 420},
       "cert volume")
    a = args_of(c)
    for want in ["--bind-address=:9443",
                 "--cert-file=/tmp/k8s-webhook-server/serving-certs/tls.crt",
                 "--key-file=/tmp/k8s-webhook-server/serving-certs/tls.key",
                 "--health-probe-bind-address=:8081",
                 f"--privileged-user=system:serviceaccount:{ns}:slurm-bridge-scheduler",
                 f"--privileged-user=system:serviceaccount:{ns}:slurm-bridge-controllers"]:
        check(want in a, f"admission args have {want}: {a}")
    svc = objs.get("Service", "slurm-bridge-admission")
    eq(svc["spec"]["type"], "ClusterIP", "admission Service type")
    eq([(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
       [("https", 443, 9443), ("health", 8081, 8081)], "admission Service ports")
    check_webhooks(objs, "slurm-bridge-admission", ns, None)

    cert = objs.get("Certificate", "slurm-bridge-admission")
    eq(cert["spec"]["secretName"], "slurm-bridge-admission", "serving Certificate Secret")
    eq(cert["spec"]["dnsNames"], ["slurm-bridge-admission", f"slurm-bridge-admission.{ns}.svc"],
       "serving Certificate dnsNames")
    eq(cert["spec"]["duration"], "43800h0m0s", "Certificate duration")
    eq(cert["spec"]["issuerRef"], {"name": "slurm-bridge-admission-root-issuer"}, "issuerRef")
    eq(objs.get("Certificate", "slurm-bridge-admission-root-ca")["spec"]["isCA"], True, "root CA")

    eq(rules(objs.get("ClusterRole", "slurm-bridge-scheduler")), SCHEDULER_RULES, "scheduler rules")
    eq(rules(objs.get("ClusterRole", "slurm-bridge-controllers")), CONTROLLERS_RULES,
       "controllers rules")
    eq(rules(objs.get("ClusterRole", "slurm-bridge-admission")), ADMISSION_RULES, "admission rules")

    eq(objs.config(), {
        "schedulerName": "slurm-bridge-scheduler", "slurmRestApi": "http://slurm-restapi.slurm:6820",
        "managedNamespaces": ["slurm-bridge"], "mcsLabel": "kubernetes", "partition": "slurm-bridge",
        "clusterName": "kubernetes", "jobMode": "external", "jobPollInterval": "500ms",
        "boundJobPollInterval": "5s", "pendingJobPollInterval": "2s",
        "jobListInterval": "30s", "nodeListInterval": "30s", "jobSweepInterval": "30s",
        "maxConcurrentSubmits": 16, "jobGoneBrake": 10, "slurmInsecureSkipVerify": False,
        "podSlurmEnv": True, "podNvidiaVisibleDevices": False, "nodeSharing": "exclusive",
        "mcsSharing": True, "maxTerminationGracePeriodSeconds": 300, "clientQPS": 0, "clientBurst": 0,
        "strictConfig": False, "slurmRequestTimeout": "30s"}, "config.yaml")
    # Upstream 1.3's keys with their names: placeholder (set) wins over jobMode, as the binary
    # reads the later key and the rendering sorts jobMode first.
    up13 = render("--set", "config.placeholder=batch", "--set", "config.nodeSharing=coResident",
                  "--set", "config.maxTerminationGracePeriodSeconds=120",
                  "--set", "config.clientQPS=50", "--set", "config.clientBurst=100",
                  "--set", "config.strictConfig=true").config()
    for k, v in {"placeholder": "batch", "nodeSharing": "coResident",
                 "maxTerminationGracePeriodSeconds": 120, "clientQPS": 50, "clientBurst": 100,
                 "strictConfig": True}.items():
        eq(up13[k], v, f"config.{k}")
    text = render("--set", "config.placeholder=batch").get(
        "ConfigMap", "slurm-bridge-config")["data"]["config.yaml"]
    check(text.index("jobMode:") < text.index("placeholder:"), "placeholder comes after jobMode")
    # The checksum is the ConfigMap's: all three pods roll together when it changes.
    sums = {objs.get("Deployment", n)["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            for n in ("slurm-bridge-scheduler", "slurm-bridge-controllers", "slurm-bridge-admission")}
    eq(len(sums), 1, "one checksum/config for all three")
    changed = render("--set", "config.jobPollInterval=1s")
    eq(changed.config()["jobPollInterval"], "1s", "config.jobPollInterval")
    check(changed.get("Deployment", "slurm-bridge-scheduler")["spec"]["template"]["metadata"]
          ["annotations"]["checksum/config"] not in sums, "a config change changes the checksum")


def case_seed_set_line():
    ns = "slinky"
    objs = render("--set", "config.slurmRestApi=http://slurm-restapi.slurm:6820",
                  "--set", "config.partition=slurm-bridge", namespace=ns)
    eq(objs.kinds(), default_objects(), "objects")
    cfg = objs.config()
    eq(cfg["slurmRestApi"], "http://slurm-restapi.slurm:6820", "slurmRestApi")
    eq(cfg["partition"], "slurm-bridge", "partition")
    for name, comp in [("slurm-bridge-scheduler", "scheduler"),
                       ("slurm-bridge-controllers", "controllers"),
                       ("slurm-bridge-admission", "admission")]:
        check_component(objs, name, comp, ns)
    check_webhooks(objs, "slurm-bridge-admission", ns, None)
    # The aliases win over upstream's keys, each on its own.
    objs = render("--set", "config.slurmRestApi=http://other:1,config.partition=p2",
                  "--set", "sharedConfig.slurmRestApi=http://upstream:2",
                  "--set", "schedulerConfig.partition=p3", "--set", "config.mcsLabel=m",
                  "--set", "config.schedulerName=alias-sched",
                  "--set", "config.managedNamespaces={a,b}", namespace=ns)
    cfg = objs.config()
    eq((cfg["slurmRestApi"], cfg["partition"], cfg["mcsLabel"], cfg["schedulerName"],
        cfg["managedNamespaces"]), ("http://other:1", "p2", "m", "alias-sched", ["a", "b"]),
       "config.* aliases")
    check(objs.has("Deployment", "alias-sched"), "config.schedulerName names the scheduler")
    objs = render("--set", "sharedConfig.slurmRestApi=http://upstream:2",
                  "--set", "schedulerConfig.partition=p3", namespace=ns)
    eq((objs.config()["slurmRestApi"], objs.config()["partition"]), ("http://upstream:2", "p3"),
       "upstream keys without aliases")


def case_cert_manager_off():
    ns = "slinky"
    adm = "slurm-bridge-admission"
    objs = render("--set", "admission.certManager.enabled=false", namespace=ns)
    eq(objs.kinds(), default_objects(cert_manager=False), "objects")
    secret = objs.get("Secret", adm)
    eq(secret["type"], "kubernetes.io/tls", "Secret type")
    eq(sorted(secret["data"]), ["ca.crt", "tls.crt", "tls.key"], "Secret keys")
    pem = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    check(pem["tls.crt"].startswith("-----BEGIN CERTIFICATE-----"), "tls.crt is PEM")
    check("PRIVATE KEY-----" in pem["tls.key"], "tls.key is a PEM key")
    check_webhooks(objs, adm, ns, secret["data"]["ca.crt"])
    with tempfile.TemporaryDirectory() as d:
        for k, v in pem.items():
            with open(os.path.join(d, k), "w") as f:
                f.write(v)
        p = subprocess.run(["openssl", "verify", "-CAfile", os.path.join(d, "ca.crt"),
                            os.path.join(d, "tls.crt")], capture_output=True, text=True)
        eq(p.returncode, 0, f"openssl verify of the serving certificate: {p.stdout}{p.stderr}")
        p = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", os.path.join(d, "tls.crt")],
                           capture_output=True, text=True)
        check(f"DNS:{adm}.{ns}.svc" in p.stdout, f"SAN {adm}.{ns}.svc in {p.stdout}")
    # An upgrade keeps the pair that is there (lookup): `helm template` has no cluster to look
    # it up in, so that is checked against a real apiserver (testenv/helm/apiserver-check.sh)
    # and by the real `helm upgrade` of e2e.chart.incluster.
    fresh = render("--set", "admission.certManager.enabled=false", namespace=ns)
    check(fresh.get("Secret", adm)["data"]["ca.crt"] != secret["data"]["ca.crt"],
          "without a Secret to look up, a new CA is minted")
    # An existing Secret of the user's: no Secret of ours, its caBundle.
    objs = render("--set", "admission.certManager.enabled=false",
                  "--set", "admission.tls.existingSecret=mine,admission.tls.caBundle=Q0E=",
                  namespace=ns)
    check(not objs.has("Secret", adm), "no chart Secret with tls.existingSecret")
    check_webhooks(objs, adm, ns, "Q0E=")
    vols = {v["name"]: v for v in objs.get("Deployment", adm)["spec"]["template"]["spec"]["volumes"]}
    eq(vols["certificates"]["secret"]["secretName"], "mine", "existing Secret mounted")
    # cert-manager on, admission off: nothing of the admission at all.
    objs = render("--set", "admission.enabled=false")
    check(not any(o["metadata"]["name"].startswith(adm) for o in objs.items),
          f"admission.enabled=false renders no admission object: {objs.kinds()}")


def case_name_override():
    objs = render("--set", "nameOverride=acme", namespace="slinky")
    eq(objs.kinds(), default_objects(name="acme"), "objects")
    check_component(objs, "acme-controllers", "controllers", "slinky")
    check_component(objs, "acme-admission", "admission", "slinky")
    check_component(objs, "slurm-bridge-scheduler", "scheduler", "slinky")
    check_webhooks(objs, "acme-admission", "slinky", None)
    a = container(objs.get("Deployment", "acme-admission"))["args"]
    check("--privileged-user=system:serviceaccount:slinky:acme-controllers" in a,
          f"privileged controllers account follows nameOverride: {a}")
    objs = render("--set", "nameOverride=acme", "--set", "scheduler.pdb.enabled=true",
                  "--set", "controllers.pdb.enabled=true", "--set", "admission.pdb.enabled=true")
    for n in ("acme-scheduler", "acme-controllers", "acme-admission"):
        objs.get("PodDisruptionBudget", n)


def case_leader_election():
    ns = "slinky"
    objs = render("--set", "scheduler.replicaCount=2", "--set", "scheduler.leaderElect=true",
                  "--set", "controllers.replicas=2", "--set", "controllers.leaderElect=true",
                  namespace=ns)
    for name, lease in [("slurm-bridge-scheduler", "slurm-bridge-scheduler"),
                        ("slurm-bridge-controllers", "69d5fe47.my.slinky.slurm.net")]:
        d = objs.get("Deployment", name)
        eq(d["spec"]["replicas"], 2, f"{name} replicas")
        a = container(d)["args"]
        for want in ["--leader-elect", f"--leader-election-namespace={ns}",
                     f"--leader-election-id={lease}"]:
            check(want in a, f"{name} args have {want}: {a}")
        role = objs.get("Role", f"{name}-leader-election")
        eq(role["metadata"]["namespace"], ns, f"{name} lease Role namespace")
        eq(rules(role), lease_rules(lease), f"{name} lease Role rules")
        rb = objs.get("RoleBinding", f"{name}-leader-election")
        eq(rb["subjects"], [{"kind": "ServiceAccount", "name": name, "namespace": ns}],
           f"{name} lease RoleBinding subjects")
        eq(rb["roleRef"]["name"], f"{name}-leader-election", f"{name} lease roleRef")
    # Leases are never granted cluster-wide.
    for n in ("slurm-bridge-scheduler", "slurm-bridge-controllers"):
        check(not any(r[1] == "leases" for r in rules(objs.get("ClusterRole", n))),
              f"{n}: no cluster-wide lease rule")
    objs = render()
    check(not any(o["kind"] in ("Role", "RoleBinding") for o in objs.items),
          "no lease Roles without leader election")


def case_upstream_1_2_values_file():
    objs = render("-f", os.path.join(TESTDATA, "upstream-1.2-values.yaml"), namespace="slurm")
    ns = "bridge-system"  # namespaceOverride
    sched = "slurm-sched"
    eq(objs.kinds(), sorted(default_objects(sched=sched, cert_manager=False) +
                            [("Role", f"{sched}-leader-election"),
                             ("RoleBinding", f"{sched}-leader-election")]), "objects")
    for o in objs.items:
        if o["kind"] not in ("ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                             "MutatingWebhookConfiguration"):
            eq(o["metadata"]["namespace"], ns, f"{o['kind']}/{o['metadata']['name']} namespace")
    d, c, vols, mounts = check_component(objs, sched, "scheduler", ns)
    eq(d["spec"]["replicas"], 2, "scheduler.replicaCount")
    eq(c["image"], "registry.example.com/slurm-bridge:9.9.9", "scheduler image")
    eq(c["imagePullPolicy"], "Always", "scheduler pullPolicy")
    eq(c["resources"], {"requests": {"cpu": "100m", "memory": "128Mi"}}, "scheduler resources")
    pod = d["spec"]["template"]["spec"]
    eq(pod["priorityClassName"], "system-cluster-critical", "scheduler priorityClassName")
    eq(pod["nodeSelector"], {"node-role.kubernetes.io/control-plane": ""}, "scheduler nodeSelector")
    check("nodeAffinity" in pod["affinity"], "scheduler affinity")
    eq(pod["tolerations"][0]["key"], "node-role.kubernetes.io/control-plane", "scheduler tolerations")
    check("--log-level=debug" in c["args"], f"scheduler verbosity 3 -> debug: {c['args']}")
    check(f"--leader-election-id={sched}" in c["args"], "scheduler lease name = schedulerName")
    check_jwt(c, vols, mounts, secret="my-slurm-token")
    eq(rules(objs.get("ClusterRole", sched)), SCHEDULER_RULES, "scheduler rules")

    d, c, vols, mounts = check_component(objs, "slurm-bridge-controllers", "controllers", ns)
    check("--log-level=debug" in c["args"], "controllers verbosity debug")
    eq(c["resources"], {"limits": {"memory": "256Mi"}},
       "controllers fall back to admission.resources (upstream's behaviour)")
    eq(d["spec"]["template"]["spec"]["tolerations"], [{"operator": "Exists"}], "controllers tolerations")
    check_jwt(c, vols, mounts, secret="my-slurm-token")

    d, c, vols, mounts = check_component(objs, "slurm-bridge-admission", "admission", ns)
    eq(d["spec"]["replicas"], 2, "admission.replicas")
    eq(c["imagePullPolicy"], "Never", "admission pullPolicy")
    eq(d["spec"]["template"]["spec"]["nodeSelector"], {"kubernetes.io/os": "linux"},
       "admission nodeSelector")
    check(f"--privileged-user=system:serviceaccount:{ns}:{sched}" in c["args"],
          "privileged scheduler account follows schedulerName")
    secret = objs.get("Secret", "slurm-bridge-admission")
    check_webhooks(objs, "slurm-bridge-admission", ns, secret["data"]["ca.crt"], sched=sched)

    cfg = objs.config()
    eq(cfg["schedulerName"], sched, "config schedulerName")
    eq(cfg["slurmRestApi"], "https://slurmrestd.hpc.example.com:6820", "config slurmRestApi")
    eq((cfg["mcsLabel"], cfg["partition"]), ("k8s", "kube"), "config mcsLabel, partition")
    eq(cfg["managedNamespaceSelector"], {"matchLabels": {"slinky.slurm.net/managed": "true"}},
       "config managedNamespaceSelector")
    check("managedNamespaces" not in cfg, "the selector replaces the list")


def case_upstream_keys_and_defaults():
    """Every values key of upstream's chart (1.3.0-rc1, 52 leaves) with upstream's default, but
    the image repositories: this project's registry (upstream's images cannot run this chart)."""
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)
    want = {
        "nameOverride": "", "fullnameOverride": "", "namespaceOverride": "",
        "scheduler.image.repository": "ghcr.io/slurm-bridge-cpp/slurm-bridge-scheduler",
        "scheduler.image.tag": "", "scheduler.image.pullPolicy": "IfNotPresent",
        "scheduler.replicaCount": 1, "scheduler.pdb.enabled": False, "scheduler.leaderElect": False,
        "scheduler.priorityClassName": "", "scheduler.resources": {}, "scheduler.nodeSelector": {},
        "scheduler.affinity": {}, "scheduler.tolerations": [], "scheduler.verbosity": None,
        "schedulerConfig.schedulerName": "slurm-bridge-scheduler",
        "schedulerConfig.mcsLabel": "kubernetes", "schedulerConfig.partition": "slurm-bridge",
        "admission.enabled": True,
        "admission.image.repository": "ghcr.io/slurm-bridge-cpp/slurm-bridge-admission",
        "admission.image.tag": "", "admission.image.pullPolicy": "IfNotPresent",
        "admission.certManager.enabled": True, "admission.certManager.duration": "43800h0m0s",
        "admission.certManager.renewBefore": "8760h0m0s",
        # (ours, N-7) 2 replicas and a PodDisruptionBudget: the webhook fails closed.
        "admission.replicas": 2,
        "admission.pdb.enabled": True, "admission.pdb.minAvailable": 1,
        "admission.pdb.maxUnavailable": None, "admission.priorityClassName": "",
        "admission.resources": {}, "admission.nodeSelector": {}, "admission.affinity": {},
        "admission.tolerations": [], "admission.managedNamespaces": ["slurm-bridge"],
        "admission.managedNamespaceSelector": {},
        "controllers.image.repository": "ghcr.io/slurm-bridge-cpp/slurm-bridge-controllers",
        "controllers.image.tag": "", "controllers.image.pullPolicy": "IfNotPresent",
        "controllers.replicas": 1, "controllers.leaderElect": False,
        "controllers.pdb.enabled": False, "controllers.pdb.minAvailable": 1,
        "controllers.pdb.maxUnavailable": None, "controllers.priorityClassName": "",
        "controllers.resources": {}, "controllers.nodeSelector": {}, "controllers.affinity": {},
        "controllers.tolerations": [], "controllers.verbosity": None,
        "sharedConfig.slurmRestApi": "http://slurm-restapi.slurm:6820",
        "sharedConfig.slurmJwtSecret": "slurm-bridge-token",
    }
    eq(len(want), 52, "upstream's leaf count")
    for path, default in want.items():
        node = values
        for part in path.split("."):
            check(isinstance(node, dict) and part in node, f"values.yaml lacks {path}")
            node = node[part]
        eq(node, default, f"default of {path}")


def case_trust_at_the_edges():
    """(ours, issue #25) identityPolicy, system namespaces, matchConditions, webhook
    availability (2 replicas, PDB, spread), memory limits, Recreate without leader election."""
    objs = render()
    adm = objs.get("Deployment", "slurm-bridge-admission")
    eq(adm["spec"]["replicas"], 2, "admission: 2 replicas by default")
    spread = adm["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    eq(spread["topologyKey"], "kubernetes.io/hostname", "admission replicas spread over nodes")
    eq(spread["labelSelector"]["matchLabels"], selector("slurm-bridge-admission"),
       "anti-affinity selects the admission pods")
    pdb = objs.get("PodDisruptionBudget", "slurm-bridge-admission")
    eq(pdb["spec"]["minAvailable"], 1, "admission PDB minAvailable 1")
    eq(container(adm)["resources"], {"requests": {"cpu": "50m", "memory": "32Mi"},
                                     "limits": {"memory": "256Mi"}}, "admission resources")
    eq(container(objs.get("Deployment", "slurm-bridge-controllers"))["resources"],
       {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "512Mi"}},
       "controllers resources")
    check("--system-namespace=kube-system" in container(adm)["args"], "system namespaces passed")
    mut = objs.get("MutatingWebhookConfiguration", "slurm-bridge-admission")["webhooks"][0]
    eq(mut["matchConditions"][0]["expression"],
       "(has(object.spec.schedulerName) && object.spec.schedulerName == 'slurm-bridge-scheduler')"
       " || (request.operation == 'CREATE' && request.namespace in ['slurm-bridge'])",
       "mutating webhook: the managed namespaces and the bridge's pods")
    val = {h["name"]: h for h in objs.get("ValidatingWebhookConfiguration",
                                          "slurm-bridge-admission")["webhooks"]}
    # (ours, reviews R-3/R-4/R-7) pods of any scheduler that carry a key only the bridge writes
    # are sent too (bridge::kBridgeKeyPrefix, kBridgePodAnnotations in src/bridge/names.h).
    pods = val["pods.slinky.slurm.net"]["matchConditions"][0]["expression"]
    for part in ("object.metadata.labels.exists(k, k.startsWith('scheduler.slinky.slurm.net/')",
                 "object.metadata.annotations.exists(k, k.startsWith('scheduler.slinky.slurm.net/')",
                 "'slinky.slurm.net/slurm-node'", "'slinky.slurm.net/slurm-job-gpus'",
                 "'slinky.slurm.net/resource-claim'", "'slinky.slurm.net/kubelet-nudged'",
                 "object.spec.tolerations"):
        check(part in pods, f"pods matchCondition has {part}: {pods}")
    check("k.startsWith('slinky.slurm.net/')" not in pods,
          f"pods matchCondition leaves slurm-operator's slinky.slurm.net/ keys alone: {pods}")
    wl = val["workloads.slinky.slurm.net"]["matchConditions"][0]["expression"]
    for part in ("k.startsWith('slurmjob.slinky.slurm.net/')", "k.startsWith('slinky.slurm.net/')",
                 "request.kind.kind == 'DaemonSet'", "object.spec.template.spec.tolerations"):
        check(part in wl, f"workloads matchCondition has {part}: {wl}")
    # With a namespace selector CEL cannot see the namespace's labels: every CREATE is sent.
    sel = render("--set", "admission.managedNamespaceSelector.matchLabels.team=ml")
    eq(sel.get("MutatingWebhookConfiguration", "slurm-bridge-admission")["webhooks"][0]
       ["matchConditions"][0]["expression"],
       "(has(object.spec.schedulerName) && object.spec.schedulerName == 'slurm-bridge-scheduler')"
       " || request.operation == 'CREATE'", "selector: every pod CREATE")
    # Turned off: no matchConditions (the chart needs >= 1.34, where they are served).
    for args in (["--set", "admission.matchConditions=false"],):
        old = render(*args)
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
            for h in old.get(kind, "slurm-bridge-admission")["webhooks"]:
                check("matchConditions" not in h, f"{args}: {kind} {h['name']} unscoped")
    # Leader election: the API's rolling update again.
    le = render("--set", "scheduler.leaderElect=true,controllers.leaderElect=true")
    for d in ("slurm-bridge-scheduler", "slurm-bridge-controllers"):
        check("strategy" not in le.get("Deployment", d)["spec"], f"{d}: rolling update with election")
    # One replica: no spread; own resources replace the default.
    one = render("--set", "admission.replicas=1,admission.resources.limits.memory=1Gi")
    check("affinity" not in one.get("Deployment", "slurm-bridge-admission")["spec"]["template"]["spec"],
          "one replica: no anti-affinity")
    eq(container(one.get("Deployment", "slurm-bridge-admission"))["resources"],
       {"limits": {"memory": "1Gi"}}, "admission.resources replaces the default")
    # identityPolicy reaches config.yaml as a list; systemNamespaces as flags.
    with tempfile.TemporaryDirectory() as tmp:
        vals = os.path.join(tmp, "identity-values.yaml")
        with open(vals, "w") as f:
            yaml.safe_dump({"config": {"identityPolicy": [
                {"namespaces": ["team-a"], "user": "alice", "accounts": ["physics"],
                 "maxPriority": 100}]},
                "admission": {"systemNamespaces": ["kube-system", "gpu-operator"]}}, f)
        ip = render("-f", vals)
    eq(ip.config()["identityPolicy"], [{"namespaces": ["team-a"], "user": "alice",
                                         "accounts": ["physics"], "maxPriority": 100}],
       "config identityPolicy")
    a = container(ip.get("Deployment", "slurm-bridge-admission"))["args"]
    for want in ("--system-namespace=kube-system", "--system-namespace=gpu-operator"):
        check(want in a, f"admission args have {want}")
    check("identityPolicy" not in objs.config(), "no identityPolicy key by default")


def case_delete_grace_cap():
    """(ours, review R-5) with batch placeholders a third validating webhook takes DELETEs of
    the bridge's pods that ask for a grace period above maxTerminationGracePeriodSeconds."""
    def deletes(*args):
        hooks = {h["name"]: h for h in render(*args).get(
            "ValidatingWebhookConfiguration", "slurm-bridge-admission")["webhooks"]}
        return hooks.get("pod-deletes.slinky.slurm.net")
    check(deletes() is None, "jobMode external (default): no DELETE webhook")
    check(deletes("--set", "config.maxTerminationGracePeriodSeconds=0",
                  "--set", "config.jobMode=batch") is None, "batch without a cap: none")
    for args, cap in [(["--set", "config.jobMode=batch"], 300),
                      (["--set", "config.placeholder=batch"], 300),
                      (["--set", "config.jobMode=batch",
                        "--set", "config.maxTerminationGracePeriodSeconds=60"], 60),
                      (["--set", "config.jobMode=batch",
                        "--set", "config.maxTerminationGracePeriodSeconds=null"], 300)]:
        h = deletes(*args)
        check(h is not None, f"{args}: DELETE webhook")
        eq(h["rules"], [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"],
                         "resources": ["pods"], "scope": "Namespaced"}], f"{args}: rules")
        eq(h["clientConfig"]["service"]["path"], "/validate--v1-pod", f"{args}: path")
        eq(h["failurePolicy"], "Fail", f"{args}: failurePolicy")
        eq(h["namespaceSelector"]["matchExpressions"][0]["values"], ["kube-system", "slurm"],
           f"{args}: namespaceSelector")
        eq(h["matchConditions"][0]["expression"],
           "has(oldObject.spec.schedulerName) && oldObject.spec.schedulerName == "
           "'slurm-bridge-scheduler' && has(request.options) && "
           f"has(request.options.gracePeriodSeconds) && request.options.gracePeriodSeconds > {cap}",
           f"{args}: only deletes of the bridge's pods above the cap")
    # The placeholder wins over jobMode, as in the binary.
    check(deletes("--set", "config.jobMode=batch", "--set", "config.placeholder=external") is None,
          "placeholder external wins")
    h = deletes("--set", "config.jobMode=batch", "--set", "admission.matchConditions=false")
    check("matchConditions" not in h, "unscoped: every DELETE of a pod")


def case_epilog_identity():
    """(ours, issue #44) epilog.rbac.create: a ServiceAccount whose ClusterRole is exactly the
    epilog's calls; off by default."""
    check(not render().has("ClusterRole", "slurm-bridge-epilog"), "no epilog identity by default")
    objs = render("--set", "epilog.rbac.create=true")
    eq(rules(objs.get("ClusterRole", "slurm-bridge-epilog")),
       {("", "pods", "list", None), ("", "nodes", "get", None)}, "epilog rules")
    b = objs.get("ClusterRoleBinding", "slurm-bridge-epilog")
    eq(b["subjects"], [{"kind": "ServiceAccount", "name": "slurm-bridge-epilog",
                        "namespace": "slurm"}], "epilog binding")
    check(objs.get("ServiceAccount", "slurm-bridge-epilog") is not None, "epilog ServiceAccount")


def case_upstream_bugs_fixed():
    # controllers.resources is honoured (upstream used admission.resources).
    objs = render("--set", "controllers.resources.limits.cpu=2",
                  "--set", "admission.resources.limits.cpu=1")
    eq(container(objs.get("Deployment", "slurm-bridge-controllers"))["resources"],
       {"limits": {"cpu": 2}}, "controllers.resources")
    # PDB: maxUnavailable instead of minAvailable (upstream rendered both; the API refuses that).
    objs = render("--set", "controllers.pdb.enabled=true,controllers.pdb.maxUnavailable=1",
                  "--set", "admission.pdb.enabled=true", "--set", "scheduler.pdb.enabled=true")
    eq({k: v for k, v in objs.get("PodDisruptionBudget", "slurm-bridge-controllers")["spec"].items()
        if k != "selector"}, {"maxUnavailable": 1}, "controllers PDB")
    eq({k: v for k, v in objs.get("PodDisruptionBudget", "slurm-bridge-admission")["spec"].items()
        if k != "selector"}, {"minAvailable": 1}, "admission PDB")
    pdb = objs.get("PodDisruptionBudget", "slurm-bridge-scheduler")
    eq(pdb["spec"]["maxUnavailable"], 0, "scheduler PDB keeps upstream's budget by default")
    eq(pdb["spec"]["selector"]["matchLabels"], selector("slurm-bridge-scheduler"), "PDB selector")
    eq(pdb["apiVersion"], "policy/v1", "PDB apiVersion")
    objs = render("--set", "scheduler.pdb.enabled=true,scheduler.pdb.minAvailable=1")
    eq(objs.get("PodDisruptionBudget", "slurm-bridge-scheduler")["spec"].get("minAvailable"), 1,
       "scheduler PDB minAvailable (ours)")
    # An empty schedulerName falls back to the default (upstream printed a broken name).
    objs = render("--set", "schedulerConfig.schedulerName=")
    objs.get("Deployment", "slurm-bridge-scheduler")
    eq(objs.config()["schedulerName"], "slurm-bridge-scheduler", "empty schedulerName")
    # replicas 0 is 0 (upstream made it 1), except the fail-closed webhook's.
    objs = render("--set", "controllers.replicas=0,scheduler.replicaCount=0,admission.replicas=0")
    eq(objs.get("Deployment", "slurm-bridge-controllers")["spec"]["replicas"], 0, "controllers 0")
    eq(objs.get("Deployment", "slurm-bridge-scheduler")["spec"]["replicas"], 0, "scheduler 0")
    eq(objs.get("Deployment", "slurm-bridge-admission")["spec"]["replicas"], 1, "admission >= 1")
    # The scheduler repository fallback names the scheduler image.
    objs = render("--set", "scheduler.image.repository=")
    eq(container(objs.get("Deployment", "slurm-bridge-scheduler"))["image"],
       f"ghcr.io/slurm-bridge-cpp/slurm-bridge-scheduler:{VERSION}", "scheduler repository fallback")


def case_values_edge_cases():
    # Later upstream's SecretKeySelector form of the JWT Secret.
    objs = render("--set", "sharedConfig.slurmJwtSecret.name=tok,sharedConfig.slurmJwtSecret.key=SLURM_JWT")
    d = objs.get("Deployment", "slurm-bridge-controllers")
    c = container(d)
    check_jwt(c, {v["name"]: v for v in d["spec"]["template"]["spec"]["volumes"]},
              {m["name"]: m for m in c["volumeMounts"]}, secret="tok", key="SLURM_JWT")
    # zap and klog verbosities.
    for v, want in [("error", "error"), ("panic", "critical"), ("0", "info"), ("7", "trace")]:
        objs = render("--set", f"controllers.verbosity={v}", "--set", f"scheduler.verbosity={v}")
        for n in ("slurm-bridge-controllers", "slurm-bridge-scheduler"):
            check(f"--log-level={want}" in container(objs.get("Deployment", n))["args"],
                  f"{n} verbosity {v} -> {want}")
    render("--set", "controllers.verbosity=loud", expect_fail=True)
    # Our own config keys reach config.yaml, typed.
    objs = render("--set", "config.clusterName=east,config.jobMode=batch",
                  "--set", "config.maxConcurrentSubmits=4",
                  "--set", "config.resourceTres.example\\.com/fpga=gres/fpga",
                  "--set", "config.slurmApiVersion=v0.0.44")
    cfg = objs.config()
    eq((cfg["clusterName"], cfg["jobMode"], cfg["maxConcurrentSubmits"], cfg["slurmApiVersion"],
        cfg["resourceTres"]), ("east", "batch", 4, "v0.0.44", {"example.com/fpga": "gres/fpga"}),
       "own config keys")
    # A partition that YAML would type stays a string.
    eq(render("--set", "schedulerConfig.partition=on").config()["partition"], "on", "quoted partition")
    # Empty managedNamespaces.
    eq(render("--set", "admission.managedNamespaces=null").config()["managedNamespaces"], [],
       "no managed namespaces")
    # The kubeVersion constraint is checked as helm install does.
    render("--kube-version", "1.19.0", expect_fail=True)


def case_host_network_ports_env_strategy():
    """(ours) hostNetwork, ports, extraEnv and strategy per component; defaults keep upstream's."""
    objs = render(namespace="slinky")
    for d in ("slurm-bridge-scheduler", "slurm-bridge-controllers", "slurm-bridge-admission"):
        dep = objs.get("Deployment", d)
        pod = dep["spec"]["template"]["spec"]
        if d == "slurm-bridge-admission":
            check("strategy" not in dep["spec"], f"{d}: no strategy by default")
        else:
            # N-11: without leader election two replicas would act at once in a rolling update.
            eq(dep["spec"]["strategy"], {"type": "Recreate"},
               f"{d}: Recreate by default (leaderElect false)")
        check("dnsPolicy" not in pod, f"{d}: no dnsPolicy by default")
        eq(pod.get("hostNetwork", False), False, f"{d}: no hostNetwork by default")
    eq(objs.get("Deployment", "slurm-bridge-scheduler")["spec"]["template"]["spec"]["hostNetwork"],
       False, "scheduler: upstream's explicit hostNetwork: false")
    check("env" not in container(objs.get("Deployment", "slurm-bridge-admission")),
          "admission: no env by default")
    env = [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
           {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}]
    sets = []
    for comp in ("scheduler", "controllers", "admission"):
        sets += ["--set", f"{comp}.hostNetwork=true", "--set", f"{comp}.strategy.type=Recreate",
                 "--set", f"{comp}.extraEnv[0].name=KUBERNETES_SERVICE_HOST",
                 "--set-string", f"{comp}.extraEnv[0].value=127.0.0.1",
                 "--set", f"{comp}.extraEnv[1].name=KUBERNETES_SERVICE_PORT",
                 "--set-string", f"{comp}.extraEnv[1].value=6443"]
    objs = render(*sets, "--set", "scheduler.ports.health=20081,scheduler.ports.metrics=0",
                  "--set", "controllers.ports.health=20082,controllers.ports.metrics=20080",
                  "--set", "admission.ports.webhook=20443,admission.ports.health=20083",
                  namespace="slinky")
    for d, health, metrics, webhook in [("slurm-bridge-scheduler", 20081, 0, None),
                                        ("slurm-bridge-controllers", 20082, 20080, None),
                                        ("slurm-bridge-admission", 20083, None, 20443)]:
        dep = objs.get("Deployment", d)
        pod = dep["spec"]["template"]["spec"]
        c = container(dep)
        eq(dep["spec"]["strategy"], {"type": "Recreate"}, f"{d} strategy")
        eq((pod["hostNetwork"], pod["dnsPolicy"]), (True, "ClusterFirstWithHostNet"), f"{d} network")
        check(f"--health-probe-bind-address=:{health}" in c["args"], f"{d}: health address {c['args']}")
        eq(c["livenessProbe"]["httpGet"]["port"], health, f"{d} liveness port")
        eq(c["readinessProbe"]["httpGet"]["port"], health, f"{d} readiness port")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        want = {"health": health}
        if metrics is not None:
            want_arg = f":{metrics}" if metrics else "0"
            check(f"--metrics-bind-address={want_arg}" in c["args"], f"{d}: metrics address {c['args']}")
            if metrics:
                want["metrics"] = metrics
        if webhook is not None:
            check(f"--bind-address=:{webhook}" in c["args"], f"{d}: webhook address {c['args']}")
            want["https"] = webhook
        eq(ports, want, f"{d} container ports")
        if d == "slurm-bridge-admission":
            eq(c["env"], env, f"{d} env: extraEnv only")
        else:
            eq(c["env"][0]["name"], "SLURM_JWT_FILE", f"{d} env[0] stays the JWT")
            eq(c["env"][1:], env, f"{d} extraEnv after the chart's env")
    # The Services keep upstream's port numbers and target the container's ports.
    svc = objs.get("Service", "slurm-bridge-admission")
    eq([(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
       [("https", 443, 20443), ("health", 8081, 20083)], "admission Service ports")
    svc = objs.get("Service", "slurm-bridge-controllers")
    eq([(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]],
       [("metrics", 8080, 20080), ("health", 8081, 20082)], "controllers Service ports")
    # Port 0: that listener off; with the health port off there are no probes.
    objs = render("--set", "controllers.ports.health=0,controllers.ports.metrics=0",
                  "--set", "scheduler.ports.health=0", namespace="slinky")
    for d in ("slurm-bridge-scheduler", "slurm-bridge-controllers"):
        c = container(objs.get("Deployment", d))
        check("--health-probe-bind-address=0" in c["args"], f"{d}: health off {c['args']}")
        check("livenessProbe" not in c and "readinessProbe" not in c, f"{d}: no probes")
        check("health" not in {p["name"] for p in c.get("ports", [])}, f"{d}: no health port")
    check("ports" not in container(objs.get("Deployment", "slurm-bridge-controllers")),
          "controllers: no container ports when both are off")
    check("ports" not in objs.get("Service", "slurm-bridge-controllers")["spec"],
          "controllers Service: no ports when both are off")
    render("--set", "scheduler.ports.health=70000", expect_fail=True)
    render("--set", "admission.ports.webhook=-1", expect_fail=True)


def case_notes():
    text = notes("--set", "nameOverride=acme", namespace="slinky")
    for want in ["namespace slinky", "Deployment slurm-bridge-scheduler", "Deployment acme-controllers",
                 "Deployment acme-admission", "create secret generic slurm-bridge-token",
                 "--from-literal=auth-token="]:
        check(want in text, f"NOTES.txt has {want!r}:\n{text}")


def case_helm_test_hook():
    """The `helm test` hook (templates/tests/): a pod for the bridge's scheduler, the chart's own
    image, restricted securityContext, deleted when it succeeds; no other object is a hook."""
    objs = render("--set", "nameOverride=acme,schedulerConfig.schedulerName=sched-x",
                  "--set", "scheduler.image.repository=reg.example/sb,scheduler.image.tag=7",
                  "--set", "scheduler.image.pullPolicy=Never", namespace="slinky", tests=True)
    hooks = [o for o in objs.items if "helm.sh/hook" in o["metadata"].get("annotations", {})]
    eq([(o["kind"], o["metadata"]["name"]) for o in hooks], [("Pod", "acme-test")], "hooks")
    pod = hooks[0]
    eq(pod["metadata"]["namespace"], "slinky", "test pod namespace")
    eq(pod["metadata"]["annotations"]["helm.sh/hook"], "test", "a test hook")
    eq(set(pod["metadata"]["annotations"]["helm.sh/hook-delete-policy"].split(",")),
       {"before-hook-creation", "hook-succeeded"}, "delete policy")
    eq(pod["metadata"]["labels"]["app.kubernetes.io/instance"], "slurm-bridge", "instance label")
    spec = pod["spec"]
    eq(spec["schedulerName"], "sched-x", "placed by the bridge's scheduler")
    eq(spec["restartPolicy"], "Never", "restartPolicy")
    check("nodeName" not in spec and "tolerations" not in spec,
          "nothing but the bridge places it (no nodeName, no toleration of its own)")
    eq(len(spec["containers"]), 1, "one container")
    c = spec["containers"][0]
    eq((c["image"], c["imagePullPolicy"], c["command"]),
       ("reg.example/sb:7", "Never", ["slurm-bridge", "version"]), "the chart's own image")
    eq(spec["securityContext"], {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
       "pod securityContext")
    check(c["securityContext"]["runAsNonRoot"] and not c["securityContext"]["allowPrivilegeEscalation"]
          and c["securityContext"]["capabilities"]["drop"] == ["ALL"], "restricted container")
    check(not render().has("Pod", "slurm-bridge-test"), "an install's objects do not hold the hook")
    off = render("--set", "tests.enabled=false", tests=True)
    check(not any("helm.sh/hook" in o["metadata"].get("annotations", {}) for o in off.items),
          "tests.enabled=false: no test pod")


def case_binary_takes_the_rendered_args():
    """The binary parses each Deployment's args and the rendered config.yaml (skipped without it)."""
    if not BINARY or not os.access(BINARY, os.X_OK):
        print(f"skip binary_takes_the_rendered_args: no binary ({BINARY or 'no --binary'})")
        return
    objs = render("--set", "scheduler.leaderElect=true,controllers.leaderElect=true",
                  "--set", "admission.managedNamespaces={a,b}", "--set", "config.jobPollInterval=2s",
                  # strict: the binary knows every key the chart renders
                  "--set", "config.strictConfig=true", "--set", "config.placeholder=external",
                  namespace="slinky")
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "config.yaml")
        with open(cfg, "w") as f:
            f.write(objs.get("ConfigMap", "slurm-bridge-config")["data"]["config.yaml"])
        jwt = os.path.join(d, "jwt")
        with open(jwt, "w") as f:
            f.write("token")
        crt, key = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=test", "-keyout", key, "-out", crt],
                       check=True, capture_output=True)
        local = {"--config": cfg, "--cert-file": crt, "--key-file": key,
                 "--bind-address": "127.0.0.1:0", "--health-probe-bind-address": "127.0.0.1:0",
                 "--metrics-bind-address": "127.0.0.1:0"}

        def argv(deploy):
            c = container(objs.get("Deployment", deploy))
            out = [BINARY]
            for a in c["args"]:
                k = a.split("=", 1)[0]
                out.append(f"{k}={local[k]}" if k in local else a)
            return out

        env = {**os.environ, "SLURM_JWT_FILE": jwt}
        for deploy in ("slurm-bridge-scheduler", "slurm-bridge-controllers"):
            # Everything parses; it stops at the Kubernetes credentials, which a pod would have.
            p = subprocess.run(argv(deploy) + ["--kubeconfig=/nonexistent/kubeconfig"], env=env,
                               capture_output=True, text=True, timeout=30)
            out = p.stdout + p.stderr
            eq(p.returncode, 1, f"{deploy} exit status ({out})")
            check("Kubernetes config" in out and "config key" not in out,
                  f"{deploy}: args and config.yaml accepted, stopped at the credentials: {out}")
        log_path = os.path.join(d, "admission.log")
        with open(log_path, "w") as log:
            p = subprocess.Popen(argv("slurm-bridge-admission"), env=env, stdout=log,
                                 stderr=subprocess.STDOUT)
        try:
            time.sleep(1.5)
            alive = p.poll() is None
            p.terminate()
            p.wait(timeout=20)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        with open(log_path) as f:
            out = f.read()
        check(alive, f"admission runs with the chart's args: {out}")
        eq(p.returncode, 0, f"admission stops cleanly on SIGTERM ({out})")
        check("privileged user system:serviceaccount:slinky:slurm-bridge-scheduler" in out,
              f"admission took the privileged users: {out}")
        check("2 managed namespace(s)" in out, f"admission read config.yaml: {out}")


# ---- monitoring (ours): ServiceMonitors, PrometheusRule, Grafana dashboard, values.schema.json ----

DASHBOARD = os.path.join(CHART, "dashboards", "slurm-bridge.json")
SCHEMA = os.path.join(CHART, "values.schema.json")
MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")
ALERTS = {"SlurmBridgeLeaderAbsent", "SlurmBridgeTwoLeaders", "SlurmBridgeGoneBrakeEngaged",
          "SlurmBridgeForeignLookingJobs", "SlurmBridgeEventsDropped", "SlurmBridgeReconcileErrors",
          "SlurmBridgeClientErrors", "SlurmBridgeJobStatePollErrors", "SlurmBridgeBindErrors",
          "SlurmBridgePodsWaitingOnBridge", "SlurmBridgeStrayPodsDeleted", "SlurmBridgeDuplicateJobs",
          "SlurmBridgeOrphanSweepsSkipped"}
# Prometheus' duration syntax (the operator's Duration pattern).
DURATION_RE = re.compile(r"(0|([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?)")


def documented_metrics():
    """The metric names of the "| metric | what |" table, wherever it is (README.md or any
    docs/*.md), read by src/app/readme_metrics.h's rules: a row names metrics in backticks, "{a,b}"
    are label keys, a name starting with '_' shares the row's first name's stem (that name less
    its last two '_' parts: `slurm_bridge_jobs_submitted_total`, `_adopted_total`)."""
    import glob
    names = set()
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        in_table = False
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("| metric | what |"):
                    in_table = True
                    continue
                if not in_table:
                    continue
                if not line.startswith("|"):
                    in_table = False
                    continue
                if line.startswith("|---"):
                    continue
                first = line[1:line.index("|", 1)]
                stem = ""
                for text in re.findall(r"`([^`]+)`", first):
                    text = text.split("{")[0]
                    if text.startswith("_"):
                        names.add(stem + text)
                    else:
                        names.add(text)
                        stem = text[:text.rfind("_")]
                        stem = stem[:stem.rfind("_")]
    return names


def promql_metrics(expr):
    """The metric names a PromQL expression reads (bridge metrics: slurm_bridge_*), and the
    selectors of any other metric (a name followed by `{`)."""
    ours = set(re.findall(r"\bslurm_bridge_[a-z0-9_]+", expr))
    others = {m for m in re.findall(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{", expr)
              if not m.startswith("slurm_bridge_")}
    return ours, others


def check_documented(exprs, what):
    table = documented_metrics()
    check("slurm_bridge_leader" in table and len(table) > 20,
          f"the metrics table (| metric | what |) found in README.md or docs/*.md: {sorted(table)}")
    missing = set()
    for e in exprs:
        ours, others = promql_metrics(e)
        eq(others, set(), f"{what}: only bridge metrics in {e!r}")
        for m in ours:
            base = re.sub(r"_(bucket|sum|count)$", "", m)
            if m not in table and base not in table:
                missing.add(m)
    check(not missing, f"{what} reads metrics that the metrics table (README.md or docs/*.md) "
                       f"does not list: {sorted(missing)}")


def monitoring_on(*extra, **kw):
    return render("--set", "metrics.serviceMonitor.enabled=true",
                  "--set", "metrics.prometheusRule.enabled=true",
                  "--set", "metrics.dashboard.enabled=true", *extra, **kw)


def case_monitoring_off_by_default():
    """Defaults render no ServiceMonitor, PrometheusRule, dashboard ConfigMap or scheduler
    Service; values.yaml has them all disabled."""
    objs = render()
    eq(objs.kinds(), default_objects(), "default objects")
    check(not any(o["kind"] in MONITORING_KINDS for o in objs.items), "no monitoring objects by default")
    check(not objs.has("ConfigMap", "slurm-bridge-dashboard"), "no dashboard ConfigMap by default")
    check(not objs.has("Service", "slurm-bridge-scheduler"), "no scheduler Service by default")
    with open(os.path.join(CHART, "values.yaml")) as f:
        m = yaml.safe_load(f)["metrics"]
    for k in ("serviceMonitor", "prometheusRule", "dashboard"):
        eq(m[k]["enabled"], False, f"metrics.{k}.enabled default")
    eq(m["dashboard"]["labels"], {"grafana_dashboard": "1"}, "the Grafana sidecar's label by default")


def case_service_monitors():
    """metrics.serviceMonitor: one ServiceMonitor per component that serves /metrics (scheduler,
    controllers; the admission serves none), each selecting exactly its component's Service in
    the release namespace by labels and the `metrics` port name; the scheduler gets a metrics
    Service; interval, scrapeTimeout, labels, namespace and relabelings are passed on."""
    ns = "slinky"
    objs = render("--set", "metrics.serviceMonitor.enabled=true",
                  "--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
                  "--set", "metrics.serviceMonitor.interval=15s,metrics.serviceMonitor.scrapeTimeout=5s",
                  "--set", "metrics.serviceMonitor.metricRelabelings[0].action=labeldrop",
                  "--set", "metrics.serviceMonitor.metricRelabelings[0].regex=pod_template_hash",
                  "--set", "scheduler.ports.metrics=9090", namespace=ns)
    sms = {o["metadata"]["name"]: o for o in objs.items if o["kind"] == "ServiceMonitor"}
    eq(set(sms), {"slurm-bridge-scheduler", "slurm-bridge-controllers"}, "ServiceMonitors")
    eq(sorted(k for k in objs.kinds() if k not in default_objects()),
       sorted([("Service", "slurm-bridge-scheduler"), ("ServiceMonitor", "slurm-bridge-scheduler"),
               ("ServiceMonitor", "slurm-bridge-controllers")]), "objects added")
    services = [o for o in objs.items if o["kind"] == "Service"]
    for name, sm in sms.items():
        eq(sm["apiVersion"], "monitoring.coreos.com/v1", f"{name} apiVersion")
        eq(sm["metadata"]["namespace"], ns, f"{name} namespace")
        eq(sm["metadata"]["labels"].get("release"), "kube-prometheus-stack", f"{name}: extra label")
        eq(sm["spec"]["namespaceSelector"], {"matchNames": [ns]}, f"{name} namespaceSelector")
        sel = sm["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if s["metadata"]["namespace"] == ns
                   and all(s["metadata"]["labels"].get(k) == v for k, v in sel.items())]
        eq([s["metadata"]["name"] for s in matched], [name], f"{name}: the Services its selector matches")
        ports = {p["name"]: p for p in matched[0]["spec"]["ports"]}
        eq(len(sm["spec"]["endpoints"]), 1, f"{name}: one endpoint")
        ep = sm["spec"]["endpoints"][0]
        check(ep["port"] in ports, f"{name}: endpoint port {ep['port']!r} is a port name of the Service ({sorted(ports)})")
        eq((ep["path"], ep["interval"], ep["scrapeTimeout"]), ("/metrics", "15s", "5s"),
           f"{name}: path, interval, scrapeTimeout")
        eq(ep["metricRelabelings"], [{"action": "labeldrop", "regex": "pod_template_hash"}],
           f"{name}: metricRelabelings")
        # The Service's selector picks the component's pods, whose container listens there.
        d = objs.get("Deployment", name)
        eq(matched[0]["spec"]["selector"], d["spec"]["selector"]["matchLabels"], f"{name}: Service selects its pods")
        cports = {p["name"]: p["containerPort"] for p in container(d)["ports"]}
        eq(ports["metrics"]["targetPort"], cports["metrics"], f"{name}: targetPort is the container's metrics port")
    eq(objs.get("Service", "slurm-bridge-scheduler")["spec"]["ports"],
       [{"name": "metrics", "port": 8080, "targetPort": 9090, "protocol": "TCP"}], "scheduler Service ports")
    eq(objs.get("Service", "slurm-bridge-scheduler")["spec"].get("clusterIP"), "None",
       "scheduler Service headless (every replica scraped, the standby too)")

    # A ServiceMonitor in the operator's namespace still selects the release namespace.
    objs = render("--set", "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.namespace=monitoring",
                  "--set", "metrics.serviceMonitor.interval=,metrics.serviceMonitor.scrapeTimeout=",
                  namespace=ns)
    for o in objs.items:
        if o["kind"] == "ServiceMonitor":
            eq(o["metadata"]["namespace"], "monitoring", "namespace override")
            eq(o["spec"]["namespaceSelector"], {"matchNames": [ns]}, "still the release namespace's Services")
            check("interval" not in o["spec"]["endpoints"][0] and "scrapeTimeout" not in o["spec"]["endpoints"][0],
                  "\"\" interval and scrapeTimeout: the Prometheus' own")
    # A component with its metrics listener off is not scraped (and gets no Service).
    objs = render("--set", "metrics.serviceMonitor.enabled=true", "--set", "scheduler.ports.metrics=0")
    eq([o["metadata"]["name"] for o in objs.items if o["kind"] == "ServiceMonitor"],
       ["slurm-bridge-controllers"], "scheduler metrics off: only the controllers' ServiceMonitor")
    check(not objs.has("Service", "slurm-bridge-scheduler"), "scheduler metrics off: no scheduler Service")
    # Custom names follow schedulerName and nameOverride.
    objs = render("--set", "metrics.serviceMonitor.enabled=true,nameOverride=acme",
                  "--set", "schedulerConfig.schedulerName=acme-sched")
    eq(sorted(o["metadata"]["name"] for o in objs.items if o["kind"] == "ServiceMonitor"),
       ["acme-controllers", "acme-sched"], "ServiceMonitor names follow the components' names")


def prometheus_rules(objs):
    prs = [o for o in objs.items if o["kind"] == "PrometheusRule"]
    eq(len(prs), 1, "one PrometheusRule")
    groups = prs[0]["spec"]["groups"]
    eq([g["name"] for g in groups], ["slurm-bridge"], "rule groups")
    return prs[0], {r.get("alert", r.get("record")): r for r in groups[0]["rules"]}


def case_prometheus_rule():
    """metrics.prometheusRule: the chart's alerts in one group, each with a severity, a `for:`,
    summary and description, on the release namespace's series and the components' jobs (the
    Services' names); labels, alertLabels, per-rule overrides, disabling, extra rules."""
    ns = "slinky"
    objs = render("--set", "metrics.prometheusRule.enabled=true", namespace=ns)
    pr, rules = prometheus_rules(objs)
    eq(pr["apiVersion"], "monitoring.coreos.com/v1", "apiVersion")
    eq((pr["metadata"]["name"], pr["metadata"]["namespace"]), ("slurm-bridge", ns), "name, namespace")
    eq(set(rules), ALERTS, "alerts")
    for name, r in rules.items():
        check(r["labels"].get("severity") in ("critical", "warning", "info"), f"{name}: severity {r['labels']}")
        check(DURATION_RE.fullmatch(r["for"]) and r["for"] != "0", f"{name}: for {r['for']!r}")
        for a in ("summary", "description"):
            check(len(r["annotations"].get(a, "")) > 10, f"{name}: {a} annotation")
        check("{{" not in r["expr"], f"{name}: expr free of template text: {r['expr']}")
        check(f'namespace="{ns}"' in r["expr"], f"{name}: expr scoped to the release namespace: {r['expr']}")
    for job in ("slurm-bridge-scheduler", "slurm-bridge-controllers"):
        check(f'job="{job}"' in rules["SlurmBridgeLeaderAbsent"]["expr"], f"LeaderAbsent watches {job}")
        check(f"absent(slurm_bridge_leader{{namespace=\"{ns}\", job=\"{job}\"}})" in
              rules["SlurmBridgeLeaderAbsent"]["expr"], f"LeaderAbsent also fires when {job} is not scraped")
    check("> 1" in rules["SlurmBridgeTwoLeaders"]["expr"], "TwoLeaders: more than one leader")
    check("gone_brake_engaged" in rules["SlurmBridgeGoneBrakeEngaged"]["expr"], "the gone brake")
    for reason in ("gang_incomplete", "not_described", "submitting"):
        check(reason in rules["SlurmBridgePodsWaitingOnBridge"]["expr"], f"PodsWaitingOnBridge: {reason}")
    eq(rules["SlurmBridgeLeaderAbsent"]["labels"]["severity"], "critical", "LeaderAbsent is critical")
    eq(rules["SlurmBridgeGoneBrakeEngaged"]["labels"]["severity"], "critical", "GoneBrake is critical")

    # Overrides, labels, extra rules, namespace.
    objs = render("--set", "metrics.prometheusRule.enabled=true",
                  "--set", "metrics.prometheusRule.namespace=monitoring",
                  "--set", "metrics.prometheusRule.labels.release=kube-prometheus-stack",
                  "--set", "metrics.prometheusRule.alertLabels.team=hpc",
                  "--set", "metrics.prometheusRule.rules.SlurmBridgeEventsDropped.enabled=false",
                  "--set", "metrics.prometheusRule.rules.SlurmBridgeClientErrors.for=30m",
                  "--set", "metrics.prometheusRule.rules.SlurmBridgeClientErrors.severity=critical",
                  "--set", "metrics.prometheusRule.rules.SlurmBridgeBindErrors.annotations.runbook_url=https://example.com/rb",
                  "--set", "metrics.prometheusRule.rules.SlurmBridgeReconcileErrors.expr=vector(1)",
                  "--set", "metrics.prometheusRule.extraRules[0].alert=Mine",
                  "--set", "metrics.prometheusRule.extraRules[0].expr=vector(1)", namespace=ns)
    pr, rules = prometheus_rules(objs)
    eq(pr["metadata"]["namespace"], "monitoring", "namespace override")
    eq(pr["metadata"]["labels"].get("release"), "kube-prometheus-stack", "PrometheusRule labels")
    eq(set(rules), ALERTS - {"SlurmBridgeEventsDropped"} | {"Mine"}, "disabled rule dropped, extra rule added")
    eq((rules["SlurmBridgeClientErrors"]["for"], rules["SlurmBridgeClientErrors"]["labels"]["severity"]),
       ("30m", "critical"), "for and severity overridden")
    eq(rules["SlurmBridgeBindErrors"]["annotations"]["runbook_url"], "https://example.com/rb", "annotation added")
    check("summary" in rules["SlurmBridgeBindErrors"]["annotations"], "the chart's annotations kept")
    eq(rules["SlurmBridgeReconcileErrors"]["expr"], "vector(1)", "expr overridden")
    for name in ALERTS - {"SlurmBridgeEventsDropped"}:
        eq(rules[name]["labels"].get("team"), "hpc", f"{name}: alertLabels")
    check(f'namespace="{ns}"' in rules["SlurmBridgeTwoLeaders"]["expr"], "series of the release namespace")

    # No leader alert for a component scaled to 0 or not scraped.
    objs = render("--set", "metrics.prometheusRule.enabled=true", "--set", "scheduler.replicaCount=0")
    expr = prometheus_rules(objs)[1]["SlurmBridgeLeaderAbsent"]["expr"]
    check("slurm-bridge-scheduler" not in expr and "slurm-bridge-controllers" in expr,
          f"LeaderAbsent without the scheduler at 0 replicas: {expr}")
    objs = render("--set", "metrics.prometheusRule.enabled=true", "--set", "controllers.ports.metrics=0")
    rules = prometheus_rules(objs)[1]
    check("slurm-bridge-controllers" not in rules["SlurmBridgeLeaderAbsent"]["expr"] + rules["SlurmBridgeTwoLeaders"]["expr"],
          "controllers not scraped: not in the leader alerts")


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def dashboard_exprs(d):
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        q = v.get("query")
        if v.get("type") == "query":
            exprs.append(q["query"] if isinstance(q, dict) else q)
    return exprs


def case_dashboard_json():
    """dashboards/slurm-bridge.json: a Grafana dashboard model (valid JSON, recent schemaVersion,
    a `${datasource}` Prometheus variable), unique panel ids, every panel placed (gridPos) with
    targets that have an expr, and a panel for each thing operators watch."""
    d = load_dashboard()
    check(d["schemaVersion"] >= 36, f"schemaVersion {d['schemaVersion']}")
    eq(d["uid"], "slurm-bridge", "uid")
    variables = {v["name"]: v for v in d["templating"]["list"]}
    check("datasource" in variables, "the datasource variable")
    eq((variables["datasource"]["type"], variables["datasource"]["query"]), ("datasource", "prometheus"),
       "datasource variable: type datasource, Prometheus")
    ids = [p["id"] for p in d["panels"]]
    eq(len(ids), len(set(ids)), f"unique panel ids {ids}")
    cells = set()
    for p in d["panels"]:
        what = f"panel {p['id']} {p.get('title')!r}"
        g = p.get("gridPos", {})
        check(all(isinstance(g.get(k), int) for k in "hwxy"), f"{what}: gridPos {g}")
        check(g["x"] >= 0 and g["x"] + g["w"] <= 24, f"{what}: within the 24 columns")
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                check((x, y) not in cells, f"{what}: overlaps another panel at {(x, y)}")
                cells.add((x, y))
        check(p.get("targets"), f"{what}: has targets")
        for t in p["targets"]:
            check(t.get("expr", "").strip(), f"{what}: target {t.get('refId')} has an expr")
        for ds in [p.get("datasource")] + [t.get("datasource") for t in p["targets"]]:
            check(ds is None or ds == {"type": "prometheus", "uid": "${datasource}"},
                  f"{what}: datasource is the variable, not a fixed one: {ds}")
    text = "\n".join(dashboard_exprs(d))
    for want in ["slurm_bridge_pods_waiting", "by (reason)",
                 "histogram_quantile(0.5, sum by (le) (rate(slurm_bridge_submit_latency_seconds_bucket",
                 "histogram_quantile(0.99, sum by (le) (rate(slurm_bridge_submit_latency_seconds_bucket",
                 "histogram_quantile(0.5, sum by (le) (rate(slurm_bridge_bind_latency_seconds_bucket",
                 "histogram_quantile(0.99, sum by (le) (rate(slurm_bridge_bind_latency_seconds_bucket",
                 "slurm_bridge_jobs_submitted_total", "slurm_bridge_jobs_adopted_total",
                 "slurm_bridge_jobs_cancelled_total", "slurm_bridge_pods_bound_total",
                 "slurm_bridge_client_requests_total", "slurm_bridge_client_errors_total",
                 "slurm_bridge_client_request_duration_seconds_bucket", "slurm_bridge_events_dropped_total",
                 "slurm_bridge_queue_depth", "slurm_bridge_leader", "slurm_bridge_gone_brake_engaged",
                 "slurm_bridge_foreign_looking_jobs", "slurm_bridge_reconcile_errors_total"]:
        check(want in text, f"the dashboard queries {want}")


def case_dashboard_configmap():
    """metrics.dashboard: a ConfigMap holding dashboards/slurm-bridge.json as is, with the
    Grafana sidecar's label (grafana_dashboard: "1"), labels, annotations and namespace."""
    objs = render("--set", "metrics.dashboard.enabled=true", namespace="slinky")
    cm = objs.get("ConfigMap", "slurm-bridge-dashboard")
    eq(cm["metadata"]["namespace"], "slinky", "namespace")
    eq(cm["metadata"]["labels"].get("grafana_dashboard"), "1", "the sidecar's label")
    eq(list(cm["data"]), ["slurm-bridge.json"], "data keys")
    eq(json.loads(cm["data"]["slurm-bridge.json"]), load_dashboard(), "the dashboard JSON, unchanged")
    objs = render("--set", "metrics.dashboard.enabled=true,metrics.dashboard.namespace=grafana",
                  "--set", "metrics.dashboard.labels.grafana_dashboard=null",
                  "--set-string", "metrics.dashboard.labels.my_dashboards=yes",
                  "--set", "metrics.dashboard.annotations.grafana_folder=HPC", namespace="slinky")
    cm = objs.get("ConfigMap", "slurm-bridge-dashboard")
    eq(cm["metadata"]["namespace"], "grafana", "namespace override")
    check("grafana_dashboard" not in cm["metadata"]["labels"], "the default label can be removed")
    eq(cm["metadata"]["labels"].get("my_dashboards"), "yes", "another sidecar label")
    eq(cm["metadata"].get("annotations"), {"grafana_folder": "HPC"}, "annotations")


def case_monitoring_metrics_documented():
    """Every metric the dashboard and the alert rules read is in the documented metrics table
    (README.md or docs/*.md; histograms by their name less _bucket/_sum/_count); they read no
    metric that is not the bridge's."""
    check_documented(dashboard_exprs(load_dashboard()), "dashboard")
    objs = monitoring_on()
    check_documented([r["expr"] for r in prometheus_rules(objs)[1].values()], "alert rules")


def schema_props(schema, path):
    node = schema
    for part in path:
        props = node.get("properties", {})
        if part not in props:
            return None
        node = props[part]
    return node


def case_values_schema():
    """values.schema.json (draft-07) covers every key of values.yaml, leaves free-form maps
    open, and Helm refuses bad values naming the key."""
    with open(SCHEMA) as f:
        schema = json.load(f)
    eq(schema["$schema"], "http://json-schema.org/draft-07/schema#", "draft-07")
    eq(schema.get("additionalProperties"), False, "unknown top-level keys refused")
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)

    def walk(node, path):
        for k, v in node.items():
            p = path + [k]
            s = schema_props(schema, p)
            check(s is not None, f"values.schema.json covers {'.'.join(p)}")
            check("type" in s or "anyOf" in s or "oneOf" in s or "enum" in s, f"{'.'.join(p)} has a type")
            if isinstance(v, dict) and "properties" in s:
                walk(v, p)
    walk(values, [])
    try:
        import jsonschema  # optional: a second validator's opinion
    except ImportError:
        jsonschema = None
    if jsonschema:
        jsonschema.Draft7Validator.check_schema(schema)
        jsonschema.Draft7Validator(schema).validate(values)

    # Free-form maps stay open; config passes unknown keys through.
    objs = render("--set", "scheduler.nodeSelector.pool=infra,scheduler.resources.limits.cpu=2",
                  "--set", "controllers.affinity.nodeAffinity.x=y,admission.tolerations[0].operator=Exists",
                  "--set", "config.someNewKey=v,metrics.serviceMonitor.labels.release=kps")
    eq(objs.config()["someNewKey"], "v", "an unknown config key is copied")

    header = "values don't meet the specifications of the schema(s) in the following chart(s):"
    # Helm 4's wording (its JSON-schema library): "- at '/a/b': what is wrong"; a property name
    # refused by propertyNames is reported at '' with the name.
    bad = [
        (["--set", "scheduler.replicaCount=two"], "/scheduler/replicaCount", "got string, want integer"),
        (["--set", "metrics.serviceMonitor.interval=30"], "/metrics/serviceMonitor/interval", "got number, want string"),
        (["--set", "config.jobGoneBrake=many"], "/config/jobGoneBrake", "want integer"),
        (["--set", "controllers.verbosity=loud"], "/controllers/verbosity", "value must be one of"),
        (["--set", "sharedConfig.logFormat=xml"], "/sharedConfig/logFormat", "value must be one of"),
        (["--set", "scheduler.image.pullPolicy=Sometimes"], "/scheduler/image/pullPolicy", "value must be one of"),
        (["--set", "config.jobMode=interactive"], "/config/jobMode", "value must be one of"),
        (["--set", "admission.failurePolicy=Maybe"], "/admission/failurePolicy", "value must be one of"),
        (["--set", "replicas=3"], "", "additional properties 'replicas' not allowed"),
        (["--set", "scheduler.replicas=3"], "/scheduler", "additional properties 'replicas' not allowed"),
        (["--set", "metrics.serviceMonitor.enable=true"], "/metrics/serviceMonitor", "additional properties 'enable' not allowed"),
        (["--set", "metrics.prometheusRule.rules.SlurmBridgeNoSuchAlert.enabled=false"],
         "", "invalid propertyName 'SlurmBridgeNoSuchAlert'"),
        (["--set", "metrics.dashboard.labels.grafana_dashboard=1"], "/metrics/dashboard/labels/grafana_dashboard",
         "got number, want string"),
        (["--set", "scheduler.ports.health=70000"], "/scheduler/ports/health", "maximum: got 70,000, want 65,535"),
    ]
    for args, key, msg in bad:
        err = render(*args, expect_fail=True)
        check(header in err and "slurm-bridge:" in err, f"{args}: Helm's schema message: {err}")
        check(f"- at '{key}': " in err and msg in err, f"{args}: the error names '{key}' ({msg}): {err}")


# ---- the values a real install needs (issue #43): each lands where it should ------------------

COMPONENTS = [("scheduler", "slurm-bridge-scheduler"), ("controllers", "slurm-bridge-controllers"),
              ("admission", "slurm-bridge-admission")]


def pod_spec(objs, deploy):
    return objs.get("Deployment", deploy)["spec"]["template"]["spec"]


def values_file(tmp, values):
    path = os.path.join(tmp, "values.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(values, f)
    return path


def refused_by_schema(args, path, msg):
    """Helm 4 refuses ARGS by values.schema.json, naming the key's JSON pointer PATH and MSG."""
    err = render(*args, expect_fail=True)
    check("values don't meet the specifications of the schema(s)" in err,
          f"{args}: refused by the schema: {err}")
    check(f"at '{path}'" in err and msg in err, f"{args}: the error names {path} ({msg}): {err}")


def refused_by_template(args, msg):
    err = render(*args, expect_fail=True)
    check(msg in err, f"{args}: the error says {msg!r}: {err}")


def case_chart_metadata():
    """Chart.yaml: this project's version (above upstream's 1.3.0: switching is an upgrade),
    home and sources; the Kubernetes versions that are tested; the version CMake builds."""
    eq(CHART_META["version"], "1.4.0", "chart version")
    eq(CHART_META["appVersion"], CHART_META["version"], "appVersion is the chart version")
    check(tuple(int(x) for x in VERSION.split(".")) > (1, 3, 0), "above upstream's 1.3.0")
    eq(CHART_META["kubeVersion"], ">= 1.34.0-0", "kubeVersion: what is tested")
    eq(CHART_META["home"], "https://github.com/slurm-bridge-cpp/slurm-bridge", "home")
    eq(CHART_META["sources"], ["https://github.com/slurm-bridge-cpp/slurm-bridge"], "sources")
    check(CHART_META.get("keywords"), "keywords")
    eq(CHART_META["annotations"]["license"], "Apache-2.0", "license annotation")
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(slurm-bridge VERSION ([0-9.]+)", f.read(), re.M)
    check(m, "CMakeLists.txt has project(slurm-bridge VERSION ...)")
    # The images' default tag is the chart version; scripts/build-image.sh tags CMake's.
    eq(m.group(1), VERSION, "CMakeLists.txt's version is the chart's (the images' default tag)")
    for kv in ("v1.34.2", "v1.36.2"):
        render("--kube-version", kv)
    err = render("--kube-version", "v1.33.9", expect_fail=True)
    check(">= 1.34.0-0" in err, f"1.33 refused with the constraint: {err}")


def case_default_images_this_project():
    """The images default to this project's registry, tag = the chart version."""
    objs = render()
    for comp, deploy in COMPONENTS:
        eq(container(objs.get("Deployment", deploy))["image"],
           f"ghcr.io/slurm-bridge-cpp/slurm-bridge-{comp}:{VERSION}", f"{comp} default image")
    objs = render("--set", "scheduler.image.repository=reg.example/sb,scheduler.image.tag=7",
                  "--set", "admission.image.repository=,controllers.image.repository=",
                  "--set", "nameOverride=acme")
    eq(container(objs.get("Deployment", "slurm-bridge-scheduler"))["image"], "reg.example/sb:7",
       "scheduler image as given")
    eq(container(objs.get("Deployment", "acme-admission"))["image"],
       f"ghcr.io/slurm-bridge-cpp/acme-admission:{VERSION}", "empty repository: the fallback")


def case_image_pull_secrets():
    objs = render()
    for _, deploy in COMPONENTS:
        check("imagePullSecrets" not in pod_spec(objs, deploy), f"{deploy}: none by default")
    with tempfile.TemporaryDirectory() as tmp:
        objs = render("-f", values_file(tmp, {
            "imagePullSecrets": [{"name": "regcred"}, "mirror"],
            "global": {"imagePullSecrets": ["umbrella", {"name": "regcred"}]}}))
    for _, deploy in COMPONENTS:
        eq(pod_spec(objs, deploy)["imagePullSecrets"],
           [{"name": "umbrella"}, {"name": "regcred"}, {"name": "mirror"}],
           f"{deploy}: global's then the chart's, each once")
    objs = render("--set", "imagePullSecrets[0].name=only", "--set", "admission.enabled=false")
    for _, deploy in COMPONENTS[:2]:
        eq(pod_spec(objs, deploy)["imagePullSecrets"], [{"name": "only"}], f"{deploy}: --set")
    refused_by_schema(["--set", "imagePullSecrets=regcred"], "/imagePullSecrets", "want array")
    refused_by_schema(["--set", "imagePullSecrets[0].secret=x"], "/imagePullSecrets/0",
                      "missing property 'name'")
    refused_by_schema(["--set", "imagePullSecrets[0]=5"], "/imagePullSecrets/0", "got number")
    refused_by_schema(["--set", "global.imagePullSecrets=regcred"], "/global/imagePullSecrets",
                      "want array")


def case_extra_volumes_mounts_env():
    """extraVolumes, extraVolumeMounts and extraEnv per component, on that component only and
    after the chart's own (upstream's positional volumes and env[0] kept); the CA of
    config.slurmCaFile mounted as values.yaml documents it."""
    vals = {"config": {"slurmCaFile": "/etc/slurm-bridge-ca/ca.crt"}}
    for comp, _ in COMPONENTS:
        vals[comp] = {
            "extraVolumes": [{"name": f"{comp}-vol", "configMap": {"name": f"{comp}-cm"}}],
            "extraVolumeMounts": [{"name": f"{comp}-vol", "mountPath": f"/etc/{comp}",
                                   "readOnly": True}],
            "extraEnv": [{"name": f"{comp.upper()}_EXTRA", "value": "1"}]}
    for comp in ("scheduler", "controllers"):
        vals[comp]["extraVolumes"].append({"name": "slurm-ca", "secret": {"secretName": "slurm-ca"}})
        vals[comp]["extraVolumeMounts"].append({"name": "slurm-ca", "readOnly": True,
                                                "mountPath": "/etc/slurm-bridge-ca"})
    with tempfile.TemporaryDirectory() as tmp:
        objs = render("-f", values_file(tmp, vals))
    eq(objs.config()["slurmCaFile"], "/etc/slurm-bridge-ca/ca.crt", "config slurmCaFile")
    for comp, deploy in COMPONENTS:
        spec = pod_spec(objs, deploy)
        c = container(objs.get("Deployment", deploy))
        own_vols = 2  # the chart's own: config and JWT, or certificates and config
        eq(spec["volumes"][own_vols:], vals[comp]["extraVolumes"], f"{deploy}: extra volumes last")
        eq(c["volumeMounts"][own_vols:], vals[comp]["extraVolumeMounts"],
           f"{deploy}: extra mounts on its container, last")
        env = c["env"]
        eq(env[-1], {"name": f"{comp.upper()}_EXTRA", "value": "1"}, f"{deploy}: extraEnv")
        if comp != "admission":
            eq(env[0]["name"], "SLURM_JWT_FILE", f"{deploy}: env[0] stays the JWT file")
            eq(spec["volumes"][1]["name"], "slurm-jwt", f"{deploy}: volumes[1] stays the JWT")
        others = {v["name"] for _, d in COMPONENTS if d != deploy for v in pod_spec(objs, d)["volumes"]}
        check(f"{comp}-vol" not in others, f"{comp}-vol only on {deploy}")
    check(not any(m["name"] == "slurm-ca" for m in
                  container(objs.get("Deployment", "slurm-bridge-admission"))["volumeMounts"]),
          "the CA only where Slurm is called")
    objs = render()
    for comp, deploy in COMPONENTS:
        eq(len(pod_spec(objs, deploy)["volumes"]), 2, f"{deploy}: no extra volume by default")
    refused_by_schema(["--set", "scheduler.extraVolumes=x"], "/scheduler/extraVolumes", "want array")
    refused_by_schema(["--set", "controllers.extraVolumeMounts[0].name=x"],
                      "/controllers/extraVolumeMounts/0", "missing property 'mountPath'")
    refused_by_schema(["--set", "admission.extraVolumes[0].secret.secretName=x"],
                      "/admission/extraVolumes/0", "missing property 'name'")
    refused_by_schema(["--set", "admission.extraEnv=x"], "/admission/extraEnv", "want array")


def case_pod_annotations_labels():
    """podAnnotations and podLabels on the pod template; the selector and the chart's labels and
    checksum stay, and a value that would replace one of them is refused."""
    args = []
    for comp, _ in COMPONENTS:
        args += ["--set", f"{comp}.podLabels.team=hpc,{comp}.podLabels.tier={comp}",
                 "--set-string", f"{comp}.podAnnotations.example\\.com/owner={comp}"]
    objs = render(*args)
    for comp, deploy in COMPONENTS:
        d = objs.get("Deployment", deploy)
        meta = d["spec"]["template"]["metadata"]
        eq(meta["labels"], {**labels(deploy, comp), "team": "hpc", "tier": comp}, f"{deploy}: pod labels")
        eq(d["spec"]["selector"]["matchLabels"], selector(deploy), f"{deploy}: selector unchanged")
        eq(d["metadata"]["labels"], labels(deploy, comp), f"{deploy}: Deployment labels unchanged")
        eq(set(meta["annotations"]), {"checksum/config", "example.com/owner"}, f"{deploy}: annotations")
        eq(meta["annotations"]["example.com/owner"], comp, f"{deploy}: annotation value")
    base = render()
    for _, deploy in COMPONENTS:
        eq(set(base.get("Deployment", deploy)["spec"]["template"]["metadata"]["annotations"]),
           {"checksum/config"}, f"{deploy}: only the checksum by default")
    for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"):
        esc = key.replace(".", "\\.")
        refused_by_template(["--set", f"controllers.podLabels.{esc}=x"],
                            f"controllers.podLabels.{key}: the chart sets this key itself")
    refused_by_template(["--set", "admission.podAnnotations.checksum/config=x"],
                        "admission.podAnnotations.checksum/config: the chart sets this key itself")
    refused_by_schema(["--set", "scheduler.podLabels.team=1"], "/scheduler/podLabels/team",
                      "got number, want string")
    refused_by_schema(["--set", "admission.podAnnotations=x"], "/admission/podAnnotations",
                      "want object")


def case_placement_per_component():
    """nodeSelector, tolerations, affinity, topologySpreadConstraints and priorityClassName land on
    their own component's pod spec only."""
    placement = {}
    for i, (comp, deploy) in enumerate(COMPONENTS):
        placement[comp] = {
            "nodeSelector": {"pool": f"infra-{comp}"},
            "tolerations": [{"key": f"dedicated-{comp}", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": [f"z{i}"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                           "whenUnsatisfiable": "ScheduleAnyway",
                                           "labelSelector": {"matchLabels": selector(deploy)}}],
            "priorityClassName": f"prio-{comp}"}
    with tempfile.TemporaryDirectory() as tmp:
        objs = render("-f", values_file(tmp, placement))
    for comp, deploy in COMPONENTS:
        spec = pod_spec(objs, deploy)
        for k, v in placement[comp].items():
            eq(spec[k], v, f"{deploy}: {k}")
    objs = render()
    for comp, deploy in COMPONENTS:
        spec = pod_spec(objs, deploy)
        for k in ("nodeSelector", "tolerations", "topologySpreadConstraints", "priorityClassName"):
            check(k not in spec, f"{deploy}: no {k} by default")
    refused_by_schema(["--set", "controllers.topologySpreadConstraints=x"],
                      "/controllers/topologySpreadConstraints", "want array")
    refused_by_schema(["--set", "scheduler.tolerations=x"], "/scheduler/tolerations", "want array")
    refused_by_schema(["--set", "admission.nodeSelector.pool=1"], "/admission/nodeSelector/pool",
                      "got number, want string")
    refused_by_schema(["--set", "controllers.affinity=x"], "/controllers/affinity", "want object")
    refused_by_schema(["--set", "scheduler.priorityClassName=5"], "/scheduler/priorityClassName",
                      "got number, want string")


def case_service_account_annotations():
    args = []
    for comp, _ in COMPONENTS:
        args += ["--set-string", f"{comp}.serviceAccount.annotations.iam\\.gke\\.io/gcp-service-account={comp}@p.iam"]
    objs = render(*args)
    for comp, deploy in COMPONENTS:
        sa = objs.get("ServiceAccount", deploy)
        eq(sa["metadata"]["annotations"], {"iam.gke.io/gcp-service-account": f"{comp}@p.iam"},
           f"{deploy}: ServiceAccount annotations")
        eq(sa["metadata"]["labels"], labels(deploy, comp), f"{deploy}: ServiceAccount labels")
    objs = render()
    for _, deploy in COMPONENTS:
        check("annotations" not in objs.get("ServiceAccount", deploy)["metadata"],
              f"{deploy}: no ServiceAccount annotations by default")
    refused_by_schema(["--set", "admission.serviceAccount.annotations=x"],
                      "/admission/serviceAccount/annotations", "want object")
    refused_by_schema(["--set", "scheduler.serviceAccount.create=false"], "/scheduler/serviceAccount",
                      "additional properties 'create' not allowed")


def case_network_policy():
    """admission.networkPolicy: off by default; on, only the given apiserver sources reach the
    webhook's container port, the health port stays open, egress is left alone."""
    check(not any(o["kind"] == "NetworkPolicy" for o in render().items), "none by default")
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}}}
    with tempfile.TemporaryDirectory() as tmp:
        objs = render("-f", values_file(tmp, {"admission": {"networkPolicy": {
            "enabled": True, "apiserverCIDRs": ["10.0.0.5/32", "fd00::5/128"],
            "apiserverPeers": [peer]}}}))
        np = objs.get("NetworkPolicy", "slurm-bridge-admission")
        eq(np["apiVersion"], "networking.k8s.io/v1", "apiVersion")
        eq(np["metadata"]["namespace"], "slurm", "namespace")
        eq(np["metadata"]["labels"], labels("slurm-bridge-admission", "admission"), "labels")
        eq(np["spec"]["podSelector"], {"matchLabels": selector("slurm-bridge-admission")},
           "selects the admission pods (their selector labels)")
        eq(np["spec"]["policyTypes"], ["Ingress"], "ingress only")
        eq(np["spec"]["ingress"], [
            {"ports": [{"protocol": "TCP", "port": 9443}],
             "from": [{"ipBlock": {"cidr": "10.0.0.5/32"}}, {"ipBlock": {"cidr": "fd00::5/128"}}, peer]},
            {"ports": [{"protocol": "TCP", "port": 8081}]}], "ingress rules")
        # The ports follow admission.ports; no health rule when the health port is off.
        objs = render("--set", "admission.networkPolicy.enabled=true",
                      "--set", "admission.networkPolicy.apiserverCIDRs={192.168.1.0/24}",
                      "--set", "admission.ports.webhook=10250,admission.ports.health=0")
        eq(objs.get("NetworkPolicy", "slurm-bridge-admission")["spec"]["ingress"],
           [{"ports": [{"protocol": "TCP", "port": 10250}],
             "from": [{"ipBlock": {"cidr": "192.168.1.0/24"}}]}], "custom ports")
        objs = render("-f", values_file(tmp, {"admission": {"networkPolicy": {
            "enabled": True, "apiserverPeers": [peer]}}}))
        eq(objs.get("NetworkPolicy", "slurm-bridge-admission")["spec"]["ingress"][0]["from"],
           [peer], "peers alone")
    objs = render("--set", "admission.enabled=false,admission.networkPolicy.enabled=true")
    check(not any(o["kind"] == "NetworkPolicy" for o in objs.items), "none without admission")
    refused_by_template(["--set", "admission.networkPolicy.enabled=true"],
                        "admission.networkPolicy.enabled needs admission.networkPolicy.apiserverCIDRs")
    refused_by_template(["--set", "admission.networkPolicy.enabled=true,admission.hostNetwork=true",
                         "--set", "admission.networkPolicy.apiserverCIDRs={10.0.0.5/32}"],
                        "a NetworkPolicy does not apply to hostNetwork pods")
    refused_by_schema(["--set", "admission.networkPolicy.enabled=yes"],
                      "/admission/networkPolicy/enabled", "want boolean")
    refused_by_schema(["--set", "admission.networkPolicy.apiserverCIDRs={10.0.0.5}"],
                      "/admission/networkPolicy/apiserverCIDRs/0", "does not match pattern")
    refused_by_schema(["--set", "admission.networkPolicy.apiserverPeers[0].ports=x"],
                      "/admission/networkPolicy/apiserverPeers/0", "additional properties 'ports'")


def case_pdbs_per_component():
    """A PodDisruptionBudget per component, each opt-in (the admission's on by default), valid:
    one of minAvailable and maxUnavailable, never both (upstream rendered both)."""
    objs = render()
    eq(sorted(o["metadata"]["name"] for o in objs.items if o["kind"] == "PodDisruptionBudget"),
       ["slurm-bridge-admission"], "default: the webhook's only")
    objs = render("--set", "admission.pdb.enabled=false")
    check(not any(o["kind"] == "PodDisruptionBudget" for o in objs.items), "all off")
    budgets = [({"minAvailable": 1, "maxUnavailable": 1}, {"maxUnavailable": 1}),
               ({"minAvailable": "50%"}, {"minAvailable": "50%"}),
               ({"maxUnavailable": "25%"}, {"maxUnavailable": "25%"})]
    for given, want in budgets:
        vals = {c: {"pdb": {"enabled": True, **given}} for c, _ in COMPONENTS}
        with tempfile.TemporaryDirectory() as tmp:
            objs = render("-f", values_file(tmp, vals))
        for comp, deploy in COMPONENTS:
            pdb = objs.get("PodDisruptionBudget", deploy)
            eq(pdb["apiVersion"], "policy/v1", f"{deploy} PDB apiVersion")
            eq(pdb["spec"]["selector"], {"matchLabels": selector(deploy)}, f"{deploy} PDB selector")
            eq({k: v for k, v in pdb["spec"].items() if k != "selector"}, want,
               f"{deploy} PDB budget for {given}")
    # Upstream's scheduler PDB (enabled only): maxUnavailable 0.
    objs = render("--set", "scheduler.pdb.enabled=true")
    eq({k: v for k, v in objs.get("PodDisruptionBudget", "slurm-bridge-scheduler")["spec"].items()
        if k != "selector"}, {"maxUnavailable": 0}, "scheduler: upstream's budget")
    refused_by_schema(["--set", "controllers.pdb.minAvailable=half"],
                      "/controllers/pdb/minAvailable", "does not match pattern")


def case_every_new_value_file():
    """testdata/every-new-value.yaml (every value of this kind set at once, for the server-side
    check too) renders, each value where it belongs."""
    with open(os.path.join(TESTDATA, "every-new-value.yaml")) as f:
        vals = yaml.safe_load(f)
    objs = render("-f", os.path.join(TESTDATA, "every-new-value.yaml"))
    for comp, deploy in COMPONENTS:
        spec = pod_spec(objs, deploy)
        c = container(objs.get("Deployment", deploy))
        eq(spec["imagePullSecrets"], [{"name": "umbrella"}, {"name": "regcred"}, {"name": "mirror"}],
           f"{deploy}: imagePullSecrets")
        eq(spec["volumes"][2:], vals[comp]["extraVolumes"], f"{deploy}: extraVolumes")
        eq(c["volumeMounts"][2:], vals[comp]["extraVolumeMounts"], f"{deploy}: extraVolumeMounts")
        eq(c["env"][-1], {"name": "TZ", "value": "UTC"}, f"{deploy}: extraEnv")
        meta = objs.get("Deployment", deploy)["spec"]["template"]["metadata"]
        eq(meta["labels"]["team"], "hpc", f"{deploy}: podLabels")
        eq(meta["annotations"]["example.com/owner"], "hpc", f"{deploy}: podAnnotations")
        for k in ("nodeSelector", "tolerations", "topologySpreadConstraints", "priorityClassName"):
            eq(spec[k], vals[comp][k], f"{deploy}: {k}")
        eq(objs.get("ServiceAccount", deploy)["metadata"]["annotations"],
           vals[comp]["serviceAccount"]["annotations"], f"{deploy}: ServiceAccount annotations")
        pdb = objs.get("PodDisruptionBudget", deploy)["spec"]
        check(("minAvailable" in pdb) != ("maxUnavailable" in pdb), f"{deploy}: one budget: {pdb}")
    eq(pod_spec(objs, "slurm-bridge-scheduler")["affinity"], vals["scheduler"]["affinity"], "affinity")
    eq(objs.config()["slurmCaFile"], "/etc/slurm-bridge-ca/ca.crt", "slurmCaFile")
    objs.get("NetworkPolicy", "slurm-bridge-admission")


def case_notes_prerequisites():
    """NOTES.txt names the managed namespaces to create and, with cert-manager on, that
    prerequisite and the alternatives."""
    text = notes(namespace="slinky")
    for want in ["kubectl create namespace slurm-bridge", "cert-manager",
                 "crds.enabled=true", "admission.certManager.enabled=false",
                 "admission.tls.existingSecret"]:
        check(want in text, f"NOTES.txt has {want!r}:\n{text}")
    text = notes("--set", "admission.certManager.enabled=false",
                         "--set", "admission.managedNamespaces={team-a,team-b}")
    for want in ["kubectl create namespace team-a", "kubectl create namespace team-b"]:
        check(want in text, f"NOTES.txt has {want!r}:\n{text}")
    check("cert-manager" not in text, f"no cert-manager without it:\n{text}")
    text = notes("--set", "admission.managedNamespaceSelector.matchLabels.team=ml")
    check('{"matchLabels":{"team":"ml"}}' in text and "create namespace" not in text,
          f"the selector instead of namespaces:\n{text}")
    text = notes("--set", "admission.enabled=false")
    check("managed namespaces" not in text and "cert-manager" not in text,
          f"neither without the webhook:\n{text}")
    # An upstream user's values file naming upstream's images (no slurm-bridge binary): a warning.
    check("WARNING" not in notes(), "no warning with this project's images")
    text = notes("-f", os.path.join(TESTDATA, "upstream-1.3-values.yaml"),
                 "--set", "controllers.image.repository=reg.example/slurm-bridge-controllers")
    for comp, want in (("scheduler", True), ("controllers", False), ("admission", True)):
        eq(f"WARNING: {comp}.image.repository names upstream's image" in text, want,
           f"NOTES.txt warns about {comp}'s upstream image:\n{text}")


CASES = [(n[len("case_"):], f) for n, f in sorted(globals().items()) if n.startswith("case_")]


def main():
    global HELM, HELM_ENV, BINARY
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", default="", help="helm binary (default: testenv/helm/ensure-helm.sh)")
    ap.add_argument("-k", default="")
    ap.add_argument("--binary", default="", help="slurm-bridge binary (its case is skipped without)")
    opts = ap.parse_args()
    BINARY = opts.binary
    HELM = opts.helm
    if not HELM:
        p = subprocess.run([os.path.join(ROOT, "testenv", "helm", "ensure-helm.sh")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"no helm: testenv/helm/ensure-helm.sh failed ({p.stderr.strip()}); "
                     "run scripts/prepare-testenv.sh, or pass --helm PATH")
        HELM = p.stdout.strip().splitlines()[-1]
    home = tempfile.mkdtemp(prefix="sb-chart-helm.")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    HELM_ENV = {**os.environ, "HELM_CONFIG_HOME": os.path.join(home, "config"),
                "HELM_CACHE_HOME": os.path.join(home, "cache"),
                "HELM_DATA_HOME": os.path.join(home, "data"),
                "KUBECONFIG": os.path.join(home, "no-kubeconfig")}
    version = subprocess.run([HELM, "version", "--short"], capture_output=True, text=True, env=HELM_ENV)
    print(f"helm {version.stdout.strip()} ({HELM})")
    failed = 0
    ran = 0
    for name, fn in CASES:
        if opts.k not in name:
            continue
        ran += 1
        try:
            fn()
            print(f"ok   {name}")
        except Failure as e:
            failed += 1
            print(f"FAIL {name}: {e}")
        except Exception:  # a bug in the test or an unexpected shape: show where
            failed += 1
            print(f"FAIL {name}:\n{traceback.format_exc()}")
    print(f"{ran - failed}/{ran} chart cases passed")
    return 1 if failed or ran == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
