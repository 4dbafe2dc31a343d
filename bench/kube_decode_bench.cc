// SPDX-License-Identifier: Apache-2.0
//
// Decode cost of the Kubernetes client's hot paths: a LIST of 10,000 pods (as generated here, in
// the shape a kube-apiserver sends: managedFields, env, volumes, containerStatuses, ~3 KB a pod;
// modelled on 1.20's pods, without the small status fields later versions add, such as 1.36's
// hostIPs) and watch events one per line. Counters: per_pod (seconds per pod: "3.1u" is 3.1 us),
// events_per_s for watch events. With SB_KUBE_PODLIST=<file> it also decodes that file (e.g.
// `kubectl get pods -A -o json` of a real cluster) as BM_DecodePodListFile. With $KUBECONFIG
// set, BM_ListPodsLive lists every pod of that cluster in pages of 500 and decodes them, the
// client's equivalent of `kubectl get pods -A -o json`.
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include "kube/client.h"
#include "kube/codec.h"
#include "kube/config.h"

namespace {
namespace bj = boost::json;

bj::object MakePod(int i) {
  std::string name = "pod-" + std::to_string(i);
  bj::object meta{
      {"name", name},
      {"namespace", "team-" + std::to_string(i % 20)},
      {"uid", "6f1c1d2e-0000-4000-8000-" + std::to_string(100000000000 + i)},
      {"resourceVersion", std::to_string(100000 + i)},
      {"creationTimestamp", "2026-11-30T00:00:00Z"},
      {"labels",
       {{"app", "web-" + std::to_string(i % 50)},
        {"tier", "backend"},
        {"controller-uid", "c-" + std::to_string(i / 4)}}},
      {"annotations",
       {{"slinky.slurm.net/job-name", name},
        {"kubectl.kubernetes.io/restartedAt", "2026-11-29T12:00:00Z"}}},
      {"ownerReferences", bj::array{{{"apiVersion", "batch/v1"},
                                     {"kind", "Job"},
                                     {"name", "job-" + std::to_string(i / 4)},
                                     {"uid", "j-" + std::to_string(i / 4)},
                                     {"controller", true},
                                     {"blockOwnerDeletion", true}}}},
      {"managedFields",
       bj::array{{{"manager", "kube-controller-manager"},
                  {"operation", "Update"},
                  {"apiVersion", "v1"},
                  {"time", "2026-11-30T00:00:00Z"},
                  {"fieldsType", "FieldsV1"},
                  {"fieldsV1",
                   {{"f:metadata", {{"f:labels", {{".", bj::object{}}, {"f:app", bj::object{}}}}}},
                    {"f:spec", {{"f:containers", {{"k:{\"name\":\"main\"}", bj::object{}}}}}}}}}}}};
  bj::array env;
  for (int e = 0; e < 6; ++e) {
    env.push_back({{"name", "ENV_" + std::to_string(e)}, {"value", "value-" + std::to_string(e)}});
  }
  bj::object container{
      {"name", "main"},
      {"image", "registry.example/app:1.2.3"},
      {"command", bj::array{"/bin/app", "--serve"}},
      {"env", env},
      {"resources",
       {{"requests", {{"cpu", "500m"}, {"memory", "1Gi"}, {"nvidia.com/gpu", "1"}}},
        {"limits", {{"memory", "2Gi"}, {"nvidia.com/gpu", "1"}}}}},
      {"volumeMounts", bj::array{{{"name", "kube-api-access"},
                                  {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                                  {"readOnly", true}}}},
      {"terminationMessagePath", "/dev/termination-log"},
      {"imagePullPolicy", "IfNotPresent"}};
  bj::object spec{
      {"schedulerName", "slurm-bridge-scheduler"},
      {"nodeName", i % 3 == 0 ? "" : "node-" + std::to_string(i % 100)},
      {"priority", 0},
      {"restartPolicy", "Never"},
      {"containers", bj::array{container}},
      {"tolerations", bj::array{{{"key", "node.kubernetes.io/not-ready"},
                                 {"operator", "Exists"},
                                 {"effect", "NoExecute"},
                                 {"tolerationSeconds", 300}},
                                {{"key", "slinky.slurm.net/managed-node"},
                                 {"operator", "Exists"},
                                 {"effect", "NoExecute"}}}},
      {"affinity",
       {{"nodeAffinity",
         {{"requiredDuringSchedulingIgnoredDuringExecution",
           {{"nodeSelectorTerms",
             bj::array{{{"matchExpressions", bj::array{{{"key", "topology.kubernetes.io/zone"},
                                                        {"operator", "In"},
                                                        {"values", bj::array{"a", "b"}}}}}}}}}}}}}},
      {"volumes",
       bj::array{
           {{"name", "kube-api-access"},
            {"projected",
             {{"defaultMode", 420},
              {"sources", bj::array{{{"serviceAccountToken",
                                      {{"expirationSeconds", 3607}, {"path", "token"}}}}}}}}}}},
      {"dnsPolicy", "ClusterFirst"},
      {"serviceAccountName", "default"}};
  bj::object status{
      {"phase", i % 3 == 0 ? "Pending" : "Running"},
      {"qosClass", "Burstable"},
      {"conditions", bj::array{{{"type", "PodScheduled"},
                                {"status", "True"},
                                {"lastProbeTime", nullptr},
                                {"lastTransitionTime", "2026-11-30T00:00:01Z"}},
                               {{"type", "Ready"},
                                {"status", "True"},
                                {"lastProbeTime", nullptr},
                                {"lastTransitionTime", "2026-11-30T00:00:05Z"}}}},
      {"containerStatuses",
       bj::array{{{"name", "main"},
                  {"ready", true},
                  {"restartCount", 0},
                  {"image", "registry.example/app:1.2.3"},
                  {"imageID", "registry.example/app@sha256:0123456789abcdef"},
                  {"containerID", "containerd://" + std::to_string(i)},
                  {"state", {{"running", {{"startedAt", "2026-11-30T00:00:04Z"}}}}}}}},
      {"hostIP", "10.0.0.1"},
      {"podIP", "10.1.0." + std::to_string(i % 250)}};
  return {{"kind", "Pod"},
          {"apiVersion", "v1"},
          {"metadata", meta},
          {"spec", spec},
          {"status", status}};
}

constexpr int kPods = 10000;

const std::string& PodList() {
  static const std::string json = [] {
    bj::array items;
    for (int i = 0; i < kPods; ++i) items.push_back(MakePod(i));
    bj::object list{{"kind", "PodList"},
                    {"apiVersion", "v1"},
                    {"metadata", {{"resourceVersion", "123456"}}},
                    {"items", std::move(items)}};
    return bj::serialize(list);
  }();
  return json;
}

const std::vector<std::string>& WatchLines() {
  static const std::vector<std::string> lines = [] {
    std::vector<std::string> out;
    for (int i = 0; i < kPods; ++i) {
      out.push_back(bj::serialize(
          bj::object{{"type", i % 5 == 0 ? "ADDED" : "MODIFIED"}, {"object", MakePod(i)}}));
    }
    return out;
  }();
  return lines;
}

void BM_DecodePodList(benchmark::State& state) {
  const std::string& json = PodList();
  std::size_t pods = 0;
  for (auto _ : state) {
    auto list = sb::kube::DecodeList<sb::kube::Pod>(json);
    if (!list) {
      state.SkipWithError(list.error().message.c_str());
      return;
    }
    pods += list->items.size();
    benchmark::DoNotOptimize(list);
  }
  state.counters["per_pod"] = benchmark::Counter(
      static_cast<double>(pods), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["bytes_per_pod"] = static_cast<double>(json.size()) / kPods;
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(json.size()));
}
BENCHMARK(BM_DecodePodList)->Unit(benchmark::kMillisecond);

void BM_DecodeWatchEvents(benchmark::State& state) {
  const std::vector<std::string>& lines = WatchLines();
  std::size_t events = 0;
  for (auto _ : state) {
    for (const std::string& line : lines) {
      auto ev = sb::kube::DecodeWatchEvent<sb::kube::Pod>(line);
      if (!ev) {
        state.SkipWithError(ev.error().message.c_str());
        return;
      }
      benchmark::DoNotOptimize(ev);
      ++events;
    }
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeWatchEvents)->Unit(benchmark::kMillisecond);

// A real `kubectl get pods -A -o json` (or any PodList) named by $SB_KUBE_PODLIST.
void BM_DecodePodListFile(benchmark::State& state) {
  const char* path = std::getenv("SB_KUBE_PODLIST");
  if (path == nullptr) {
    state.SkipWithError("set SB_KUBE_PODLIST to a PodList JSON file");
    return;
  }
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string json = ss.str();
  std::size_t pods = 0;
  for (auto _ : state) {
    auto list = sb::kube::DecodeList<sb::kube::Pod>(json);
    if (!list) {
      state.SkipWithError(list.error().message.c_str());
      return;
    }
    pods += list->items.size();
    benchmark::DoNotOptimize(list);
  }
  state.counters["per_pod"] = benchmark::Counter(
      static_cast<double>(pods), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["pods"] = static_cast<double>(pods) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_DecodePodListFile)->Unit(benchmark::kMillisecond);

void BM_ListPodsLive(benchmark::State& state) {
  if (std::getenv("KUBECONFIG") == nullptr) {
    state.SkipWithError("set KUBECONFIG to list a live apiserver");
    return;
  }
  auto cfg = sb::kube::LoadConfig({});
  if (!cfg) {
    state.SkipWithError(cfg.error().message.c_str());
    return;
  }
  boost::asio::io_context io;
  auto http = sb::kube::MakeHttpClient(io.get_executor(), *cfg);
  if (!http) {
    state.SkipWithError(http.error().message.c_str());
    return;
  }
  auto client = sb::kube::MakeClient(**http, cfg->token);
  std::size_t pods = 0;
  for (auto _ : state) {
    std::optional<sb::Result<sb::kube::List<sb::kube::Pod>>> out;
    sb::kube::ListOptions options;
    options.limit = 500;
    boost::asio::co_spawn(io,
                          sb::kube::ListAllAs<sb::kube::Pod>(*client, sb::kube::PodsRef(), options),
                          [&](std::exception_ptr, sb::Result<sb::kube::List<sb::kube::Pod>> r) {
                            out = std::move(r);
                          });
    io.restart();
    io.run();
    if (!out || !*out) {
      state.SkipWithError(out ? (*out).error().message.c_str() : "no result");
      return;
    }
    pods += (*out)->items.size();
  }
  state.counters["pods"] = static_cast<double>(pods) / static_cast<double>(state.iterations());
  state.counters["per_pod"] = benchmark::Counter(
      static_cast<double>(pods), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ListPodsLive)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
