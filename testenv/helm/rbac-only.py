#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
#
# Keeps the RBAC of a rendered chart: the ServiceAccounts, (Cluster)Roles and (Cluster)RoleBindings
# of the YAML stream on stdin, written to stdout. Used by testenv/kube/chart-identities.sh (every
# e2e bridge runs under them) and testenv/helm/apiserver-check.sh (the authorizer is asked as them).
import sys

import yaml

KEEP = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
docs = [d for d in yaml.safe_load_all(sys.stdin) if d and d.get("kind") in KEEP]
yaml.safe_dump_all(docs, sys.stdout)
