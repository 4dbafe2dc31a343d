// SPDX-License-Identifier: Apache-2.0
//
// fuzz/annotations_fuzz.cc
//
// The bridge's reading of what users write on their objects: a pod's resources and the job
// annotations (bridge/translate.h), the group an owner makes (bridge/group.h: the owners' specs
// and the gang annotation) and the update sent for a changed job (bridge/job_update.h).
//
// Two input forms:
//   - a pod as JSON (starts with '{'): the pod is translated as a group of its own, then with the
//     same JSON as its owner, once for each owner kind (Job, JobSet, LeaderWorkerSet, PodGroup);
//   - otherwise "key=value" lines: the annotations of a fixed one-container pod.
// Seeds: testing/testdata/kube/ and fuzz/seeds/annotations/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bridge/config.h"
#include "bridge/group.h"
#include "bridge/job_update.h"
#include "bridge/names.h"
#include "bridge/translate.h"
#include "fuzz/fuzz_input.h"
#include "kube/codec.h"

namespace {

using namespace sb;

const bridge::TranslateOptions& Options() {
  static const bridge::TranslateOptions options = [] {
    bridge::TranslateOptions o;
    o.partition = "batch";
    o.cluster_name = "kubernetes";
    o.scheduler_name = std::string(bridge::kDefaultSchedulerName);
    o.resource_tres = bridge::Config{}.resource_tres;
    return o;
  }();
  return options;
}

// Translates `pods` as `group` and diffs the job against an empty and against itself.
void TranslateGroup(const bridge::GroupSpec& group, const std::vector<const kube::Pod*>& pods) {
  Result<slurm::JobDescription> job = bridge::Translate(group, pods, Options());
  if (!job) {
    return;
  }
  (void)bridge::PendingJobUpdate(slurm::JobDescription{}, *job);
  (void)bridge::PendingJobUpdate(*job, *job);
  (void)bridge::PendingJobUpdate(*job, slurm::JobDescription{});
}

void FuzzPod(const kube::Pod& pod) {
  (void)bridge::PodResources(pod);
  (void)bridge::PodRequests(pod);
  if (Result<bridge::GroupSpec> alone = bridge::ResolveGroup(pod, {}, nullptr)) {
    TranslateGroup(*alone, {&pod});
  }
}

void FuzzJson(std::string_view json) {
  Result<kube::Pod> pod = kube::Decode<kube::Pod>(json);
  if (!pod) {
    return;
  }
  FuzzPod(*pod);
  Result<kube::GenericObject> owner = kube::Decode<kube::GenericObject>(json);
  if (!owner) {
    return;
  }
  for (const char* kind : {"Job", "JobSet", "LeaderWorkerSet", "PodGroup"}) {
    kube::GenericObject o = *owner;
    o.kind = kind;
    o.metadata.annotations.emplace(std::string(bridge::kGangAnnotation), "true");
    kube::Pod member = *pod;
    member.metadata.labels.emplace(std::string(bridge::kPodGroupLabel), "pg");
    member.metadata.labels.emplace(std::string(bridge::kLwsGroupHashLabel), "hash");
    const kube::GenericObject* pod_group = o.kind == "PodGroup" ? &o : nullptr;
    if (Result<bridge::GroupSpec> g = bridge::ResolveGroup(member, {o}, pod_group)) {
      (void)bridge::InGroup(member, *g);
      TranslateGroup(*g, {&member, &member});
    }
  }
}

void FuzzAnnotationLines(std::string_view text) {
  kube::Pod pod;
  pod.metadata.namespace_ = "default";
  pod.metadata.name = "p";
  pod.spec.containers.push_back(
      kube::Container{.name = "c", .resources = {.requests = {{"cpu", "1"}, {"memory", "1Gi"}}}});
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      continue;
    }
    pod.metadata.annotations[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  FuzzPod(pod);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = sb::fuzz::AsText(data, size);
  if (text.starts_with('{')) {
    FuzzJson(text);
  } else {
    FuzzAnnotationLines(text);
  }
  return 0;
}
