// SPDX-License-Identifier: Apache-2.0
#include "kube/codec.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json.hpp>

#include "testing/testdata.h"

namespace sb::kube {
namespace {

// A pod as the apiserver sends it, with fields the decoder must skip (managedFields, volumes,
// env, containerStatuses) and the status before the spec.
constexpr const char* kPod = R"({
  "kind": "Pod", "apiVersion": "v1",
  "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
             "reason": "Unschedulable", "message": "0/3 nodes", "lastProbeTime": null,
             "lastTransitionTime": "2026-01-01T00:00:00Z"}], "qosClass": "Burstable",
             "containerStatuses": [{"name": "c", "ready": false}]},
  "metadata": {"name": "web-0", "namespace": "team-a", "uid": "u-1", "resourceVersion": "42",
    "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z",
    "deletionTimestamp": "2026-01-02T00:00:00Z", "deletionGracePeriodSeconds": 30,
    "labels": {"app": "web", "tier": "fe"}, "annotations": {"slinky.slurm.net/account": "acct"},
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                         "uid": "o-1", "controller": true, "blockOwnerDeletion": true}],
    "finalizers": ["a/b"],
    "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
  "spec": {
    "volumes": [{"name": "v", "emptyDir": {}}],
    "schedulerName": "slurm-bridge-scheduler", "priority": 1000, "priorityClassName": "high",
    "nodeName": "", "nodeSelector": {"gpu": "a100"},
    "initContainers": [{"name": "init", "image": "busybox",
                        "resources": {"requests": {"cpu": "100m"}}}],
    "containers": [{"name": "c", "image": "nginx", "env": [{"name": "A", "value": "1"}],
      "ports": [{"containerPort": 80}, {"containerPort": 8080, "hostPort": 18080},
                {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}],
      "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "2"},
                    "limits": {"memory": "2Gi"}}}],
    "tolerations": [{"key": "slinky.slurm.net/managed-node", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 300}, {"operator": "Exists"}],
    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]},
      "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}, {}]},
      "nodeAffinity": {
      "preferredDuringSchedulingIgnoredDuringExecution": [],
      "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}}},
    "overhead": {"cpu": "250m"}}
})";

TEST(Codec, DecodesPod) {
  Result<Pod> pod = Decode<Pod>(kPod);
  ASSERT_TRUE(pod) << pod.error().message;
  const ObjectMeta& m = pod->metadata;
  EXPECT_EQ(m.name, "web-0");
  EXPECT_EQ(m.namespace_, "team-a");
  EXPECT_EQ(m.uid, "u-1");
  EXPECT_EQ(m.resource_version, "42");
  EXPECT_EQ(m.generation, 1);
  EXPECT_EQ(m.labels, (StringMap{{"app", "web"}, {"tier", "fe"}}));
  EXPECT_EQ(m.annotations.at("slinky.slurm.net/account"), "acct");
  ASSERT_EQ(m.owner_references.size(), 1u);
  EXPECT_EQ(m.owner_references[0],
            (OwnerReference{"apps/v1", "StatefulSet", "web", "o-1", true, true}));
  EXPECT_EQ(m.finalizers, std::vector<std::string>{"a/b"});
  EXPECT_EQ(m.creation_timestamp, "2026-01-01T00:00:00Z");
  EXPECT_EQ(m.deletion_timestamp, "2026-01-02T00:00:00Z");
  EXPECT_EQ(m.deletion_grace_period_seconds, 30);
  const PodSpec& s = pod->spec;
  EXPECT_EQ(s.scheduler_name, "slurm-bridge-scheduler");
  EXPECT_EQ(s.priority, 1000);
  EXPECT_EQ(s.priority_class_name, "high");
  EXPECT_EQ(s.node_selector.at("gpu"), "a100");
  ASSERT_EQ(s.containers.size(), 1u);
  EXPECT_EQ(s.required_pod_affinity, 2u);
  EXPECT_EQ(s.required_pod_anti_affinity, 0u) << "preferred terms are not counted";
  // Only the ports opened on the node (hostPort > 0); the protocol defaults to TCP.
  EXPECT_EQ(s.containers[0].host_ports,
            (std::vector<HostPort>{
                {.port = 18080, .container_port = 8080, .protocol = "TCP"},
                {.port = 53, .container_port = 53, .protocol = "UDP", .host_ip = "10.0.0.1"}}));
  EXPECT_EQ(s.containers[0].resources.requests,
            (ResourceList{{"cpu", "500m"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "2"}}));
  EXPECT_EQ(s.containers[0].resources.limits, (ResourceList{{"memory", "2Gi"}}));
  ASSERT_EQ(s.init_containers.size(), 1u);
  EXPECT_EQ(s.init_containers[0].resources.requests.at("cpu"), "100m");
  ASSERT_EQ(s.tolerations.size(), 2u);
  EXPECT_EQ(s.tolerations[0].toleration_seconds, 300);
  EXPECT_EQ(s.tolerations[1].operator_, "Exists");
  EXPECT_EQ(s.tolerations[1].key, "");
  ASSERT_EQ(s.required_node_affinity.size(), 2u);
  EXPECT_EQ(s.required_node_affinity[0].match_expressions[0],
            (NodeSelectorRequirement{"zone", "In", {"a", "b"}}));
  EXPECT_EQ(s.required_node_affinity[1].match_fields[0].values, std::vector<std::string>{"n9"});
  EXPECT_EQ(s.overhead.at("cpu"), "250m");
  EXPECT_EQ(pod->status.phase, "Pending");
  ASSERT_EQ(pod->status.conditions.size(), 1u);
  EXPECT_EQ(pod->status.conditions[0].reason, "Unschedulable");
}

TEST(Codec, RoundTripsPodThroughEncode) {
  Result<Pod> pod = Decode<Pod>(kPod);
  ASSERT_TRUE(pod);
  std::string json = Encode(*pod);
  Result<Pod> again = Decode<Pod>(json);
  ASSERT_TRUE(again) << again.error().message;
  Pod want = *pod;
  want.spec.required_pod_affinity = 0;  // counted when read, not written (codec.h)
  EXPECT_EQ(*again, want);
  EXPECT_NE(json.find("\"kind\":\"Pod\""), std::string::npos);
}

// A pod of Kubernetes 1.36 that names a Workload API PodGroup (spec.schedulingGroup), as the
// 1.36.2 apiserver of the test environment returned it.
TEST(Codec, DecodesTheSchedulingGroupOfA136Pod) {
  Result<Pod> pod = Decode<Pod>(sb::testing::ReadTestData("kube/pod_scheduling_group_1.36.json"));
  ASSERT_TRUE(pod) << pod.error().message;
  EXPECT_EQ(pod->spec.scheduling_group, "train");
  Result<Pod> again = Decode<Pod>(Encode(*pod));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->spec.scheduling_group, "train");
  EXPECT_EQ(Decode<Pod>(kPod)->spec.scheduling_group, "");
}

TEST(Codec, DecodesNodeLeaseEventJobNamespace) {
  Result<Node> node = Decode<Node>(R"({"metadata":{"name":"n1","labels":{"a":"b"}},
    "spec":{"unschedulable":true,"taints":[{"key":"k","value":"v","effect":"NoSchedule"},
      {"key":"u","effect":"NoExecute","timeAdded":"2026-01-01T00:00:00Z"}]},
    "status":{"capacity":{"cpu":"8","memory":"16000Mi"},"allocatable":{"cpu":"7500m"},
              "conditions":[{"type":"Ready","status":"True"}],"nodeInfo":{"x":1},
              "addresses":[{"type":"InternalIP","address":"10.0.0.7"},
                           {"type":"Hostname","address":"n1"}]}})");
  ASSERT_TRUE(node) << node.error().message;
  EXPECT_TRUE(node->unschedulable);
  EXPECT_EQ(node->taints[0], (Taint{"k", "v", "NoSchedule"}));
  EXPECT_EQ(node->taints[1], (Taint{"u", "", "NoExecute", "2026-01-01T00:00:00Z"}));
  EXPECT_NE(Encode(*node).find(R"("timeAdded":"2026-01-01T00:00:00Z")"), std::string::npos);
  EXPECT_EQ(node->capacity.at("memory"), "16000Mi");
  EXPECT_EQ(node->allocatable.at("cpu"), "7500m");
  EXPECT_EQ(node->conditions[0].type, "Ready");
  ASSERT_EQ(node->addresses.size(), 2u);
  EXPECT_EQ(node->addresses[0], (NodeAddress{"InternalIP", "10.0.0.7"}));
  EXPECT_EQ(node->addresses[1], (NodeAddress{"Hostname", "n1"}));
  EXPECT_EQ(*Decode<Node>(Encode(*node)), *node);
  EXPECT_EQ(ObjectKey(node->metadata), "n1");

  Result<Lease> lease = Decode<Lease>(R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",
    "metadata":{"name":"l","namespace":"kube-system","resourceVersion":"7"},
    "spec":{"holderIdentity":"me","leaseDurationSeconds":15,
            "acquireTime":"2026-01-01T00:00:00.000000Z","renewTime":"2026-01-01T00:00:05.000000Z",
            "leaseTransitions":3}})");
  ASSERT_TRUE(lease) << lease.error().message;
  EXPECT_EQ(lease->holder_identity, "me");
  EXPECT_EQ(lease->lease_duration_seconds, 15);
  EXPECT_EQ(lease->lease_transitions, 3);
  EXPECT_EQ(lease->renew_time, "2026-01-01T00:00:05.000000Z");
  Result<Lease> lease2 = Decode<Lease>(Encode(*lease));
  ASSERT_TRUE(lease2);
  EXPECT_EQ(*lease2, *lease);

  Result<Event> ev = Decode<Event>(R"({"metadata":{"name":"e","namespace":"ns"},
    "involvedObject":{"kind":"Pod","namespace":"ns","name":"p","uid":"u"},
    "reason":"Scheduled","message":"ok","type":"Normal","count":2,
    "source":{"component":"slurm-bridge"}})");
  ASSERT_TRUE(ev) << ev.error().message;
  EXPECT_EQ(ev->involved_object.name, "p");
  EXPECT_EQ(ev->count, 2);
  EXPECT_EQ(ev->source_component, "slurm-bridge");
  EXPECT_EQ(*Decode<Event>(Encode(*ev)), *ev);

  Result<Job> job = Decode<Job>(R"({"metadata":{"name":"j","namespace":"ns"},
    "spec":{"parallelism":4,"completions":8,"suspend":false,"template":{
      "metadata":{"labels":{"a":"b"}},
      "spec":{"schedulerName":"s","containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}},
    "status":{"active":2,"succeeded":1,"conditions":[{"type":"Complete","status":"False"}]}})");
  ASSERT_TRUE(job) << job.error().message;
  EXPECT_EQ(job->parallelism, 4);
  EXPECT_EQ(job->completions, 8);
  EXPECT_EQ(job->suspend, false);
  EXPECT_EQ(job->template_labels.at("a"), "b");
  EXPECT_EQ(job->template_spec.scheduler_name, "s");
  EXPECT_EQ(job->template_spec.containers[0].resources.requests.at("cpu"), "1");
  EXPECT_EQ(job->active, 2);

  Result<Namespace> ns =
      Decode<Namespace>(R"({"metadata":{"name":"x"},"status":{"phase":"Active"}})");
  ASSERT_TRUE(ns);
  EXPECT_EQ(ns->phase, "Active");
}

TEST(Codec, GenericObjectKeepsSpecAndStatus) {
  Result<GenericObject> g = Decode<GenericObject>(R"({"status":{"ready":3},
    "apiVersion":"jobset.x-k8s.io/v1alpha2","kind":"JobSet",
    "metadata":{"name":"js","namespace":"ns"},
    "spec":{"replicatedJobs":[{"name":"w","replicas":2}],"suspend":true}})");
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_EQ(g->kind, "JobSet");
  EXPECT_EQ(g->api_version, "jobset.x-k8s.io/v1alpha2");
  EXPECT_EQ(JsonIntAt(g->spec_json, "/replicatedJobs/0/replicas").value(), 2);
  EXPECT_EQ(JsonStringAt(g->spec_json, "/replicatedJobs/0/name").value(), "w");
  EXPECT_EQ(JsonBoolAt(g->spec_json, "/suspend").value(), true);
  EXPECT_EQ(JsonIntAt(g->status_json, "/ready").value(), 3);
  EXPECT_EQ(JsonIntAt(g->spec_json, "/nope").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(JsonStringAt(g->spec_json, "/suspend").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(JsonRawAt(g->spec_json, "/replicatedJobs/0").value(), R"({"name":"w","replicas":2})");
  Result<std::string> enc = Encode(*g);
  ASSERT_TRUE(enc);
  EXPECT_EQ(*Decode<GenericObject>(*enc), *g);
}

// Found by fuzz/kube_codec_fuzz (UBSan: simdjson's "unreachable" assumption): the empty
// pointer named the root, whose value getters simdjson does not support.
TEST(Codec, EmptyJsonPointerIsAnError) {
  const std::string json = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})";
  EXPECT_EQ(JsonIntAt(json, "").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(JsonStringAt("\"s\"", "").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(JsonBoolAt("true", "").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(JsonRawAt(json, "").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(JsonStringAt(json, "/object/metadata/name").value(), "a");
}

TEST(Codec, DecodesListPage) {
  Result<List<Pod>> list = DecodeList<Pod>(R"({"kind":"PodList",
    "items":[{"metadata":{"name":"a","namespace":"n"}},{"metadata":{"name":"b","namespace":"n"}}],
    "metadata":{"resourceVersion":"100","continue":"tok","remainingItemCount":5}})");
  ASSERT_TRUE(list) << list.error().message;
  EXPECT_EQ(list->resource_version, "100");
  EXPECT_EQ(list->continue_token, "tok");
  EXPECT_EQ(list->remaining_item_count, 5);
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1].metadata.name, "b");
  Result<List<Pod>> empty = DecodeList<Pod>(R"({"metadata":{"resourceVersion":"1"},"items":null})");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->items.empty());
}

TEST(Codec, DecodesWatchEventsInAnyOrder) {
  struct Case {
    std::string name;
    std::string json;
    WatchEventType type;
    std::string rv;
    std::int32_t code;
  };
  const std::vector<Case> cases = {
      {"added", R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}})",
       WatchEventType::kAdded, "5", 0},
      {"object first",
       R"({"object":{"metadata":{"name":"a","resourceVersion":"6"}},"type":"MODIFIED"})",
       WatchEventType::kModified, "6", 0},
      {"deleted", R"({"type":"DELETED","object":{"metadata":{"name":"a","resourceVersion":"7"}}})",
       WatchEventType::kDeleted, "7", 0},
      {"bookmark",
       R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"8"}}})",
       WatchEventType::kBookmark, "8", 0},
      {"error 410",
       R"j({"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}})j",
       WatchEventType::kError, "", 410},
      {"error object first",
       R"({"object":{"kind":"Status","code":500,"message":"boom"},"type":"ERROR"})",
       WatchEventType::kError, "", 500},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Result<WatchEvent<Pod>> ev = DecodeWatchEvent<Pod>(c.json);
    ASSERT_TRUE(ev) << ev.error().message;
    EXPECT_EQ(ev->type, c.type);
    EXPECT_EQ(ev->object.metadata.resource_version, c.rv);
    EXPECT_EQ(ev->status.code, c.code);
  }
}

TEST(Codec, RejectsMalformed) {
  const std::vector<std::string> bad = {
      "",
      "{",
      "[]",
      R"({"metadata":{"name":5}})",
      R"({"metadata":{"labels":{"a":1}}})",
      R"({"metadata":{"name":"x"},"spec":{"containers":{}}})",
      "{\"metadata\":{\"name\":\"x\"}} junk",
  };
  for (const std::string& b : bad) {
    SCOPED_TRACE(b);
    Result<Pod> p = Decode<Pod>(b);
    EXPECT_FALSE(p);
    if (!p) {
      EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
    }
  }
  EXPECT_FALSE(DecodeWatchEvent<Pod>(R"({"type":"WHAT","object":{}})"));
  EXPECT_FALSE(DecodeWatchEvent<Pod>(R"({"type":"ADDED"})"));
}

TEST(Codec, EncodesRequestBodies) {
  namespace bj = boost::json;
  bj::value b = bj::parse(EncodeBinding("ns", "p", "uid-1", "n3"));
  EXPECT_EQ(b.at("kind"), "Binding");
  EXPECT_EQ(b.at("metadata").at("uid"), "uid-1");
  EXPECT_EQ(b.at("target").at("name"), "n3");
  EXPECT_FALSE(b.at("metadata").as_object().contains("labels"));
  bj::value bl = bj::parse(EncodeBinding("ns", "p", "", "n3", {{"a", "1"}}, {{"l", "2"}}));
  EXPECT_EQ(bl.at("metadata").at("annotations").at("a"), "1");
  EXPECT_EQ(bl.at("metadata").at("labels").at("l"), "2");
  EXPECT_FALSE(bl.at("metadata").as_object().contains("uid"));
  bj::value d = bj::parse(EncodeDeleteOptions({.grace_period_seconds = 0, .uid = "u"}));
  EXPECT_EQ(d.at("gracePeriodSeconds"), 0);
  EXPECT_EQ(d.at("preconditions").at("uid"), "u");
  bj::value e = bj::parse(EncodeEviction("ns", "p", {}));
  EXPECT_EQ(e.at("apiVersion"), "policy/v1beta1");
  EXPECT_EQ(e.at("metadata").at("name"), "p");
  bj::value m = bj::parse(EncodeMetadataMergePatch({{"a", "1"}, {"b", std::nullopt}}, {}));
  EXPECT_EQ(m.at("metadata").at("labels").at("a"), "1");
  EXPECT_TRUE(m.at("metadata").at("labels").at("b").is_null());
  EXPECT_EQ(JsonQuote("a\"b"), R"("a\"b")");
}

}  // namespace
}  // namespace sb::kube
