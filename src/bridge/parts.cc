// SPDX-License-Identifier: Apache-2.0
#include "bridge/parts.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include "bridge/names.h"
#include "bridge/tag.h"
#include "slurm/codec.h"

namespace sb::bridge {
namespace {

std::string Label(const kube::Pod& pod, std::string_view key) {
  auto it = pod.metadata.labels.find(std::string(key));
  return it == pod.metadata.labels.end() ? std::string() : it->second;
}

// FNV-1a, 64 bits: the same in every build, as the part names live on in job tags.
std::uint64_t Fnv1a(std::string_view s) {
  std::uint64_t h = 14695981039346656037ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

std::string ShapeKey(const kube::Pod& pod) {
  // Without the bridge's own toleration, which the pod gets after the submit.
  kube::Pod bare = pod;
  std::erase_if(bare.spec.tolerations,
                [](const kube::Toleration& t) { return t.key == kManagedNodeTaint; });
  std::string key = ExclusionKey({&bare});
  if (Result<std::map<std::string, std::int64_t>> res = PodResources(pod)) {
    for (const auto& [name, value] : *res) key += fmt::format("|{}={}", name, value);
  }
  return key;
}

// A description with what differs between parts of one shape set alike: the node count, and
// the tag (it lists the part's pods).
std::string Comparable(slurm::JobDescription job) {
  job.nodes.clear();
  job.minimum_nodes.reset();
  job.maximum_nodes.reset();
  job.admin_comment.clear();
  return slurm::EncodeJobDescription(job);
}

std::string UpstreamTag(const std::vector<const kube::Pod*>& pods) {
  boost::json::array names;
  for (const kube::Pod* p : pods)
    names.emplace_back(p->metadata.namespace_ + "/" + p->metadata.name);
  return boost::json::serialize(boost::json::object{{"pods", std::move(names)}});
}

}  // namespace

std::string PartName(const GroupSpec& group, const kube::Pod& pod) {
  if (group.kind == "JobSet") return Label(pod, kJobSetReplicatedJobLabel);
  if (group.kind == "LeaderWorkerSet") {
    const std::string index = Label(pod, kLwsWorkerIndexLabel);
    return index.empty() || index == "0" ? "leader" : "worker";
  }
  if (group.kind == "PodGroup") return fmt::format("shape-{:016x}", Fnv1a(ShapeKey(pod)));
  return "";
}

std::vector<Part> SplitParts(const GroupSpec& group, const std::vector<const kube::Pod*>& pods) {
  std::map<std::string, std::vector<const kube::Pod*>> by_name;
  for (const kube::Pod* p : pods) by_name[PartName(group, *p)].push_back(p);
  std::vector<Part> out;
  for (auto& [name, members] : by_name) out.push_back({name, std::move(members)});
  return out;
}

Result<GroupJob> TranslateGroup(const GroupSpec& group, const std::vector<const kube::Pod*>& pods,
                                const TranslateOptions& options) {
  Result<slurm::JobDescription> whole = Translate(group, pods, options);
  if (!whole) return tl::unexpected(whole.error());
  GroupJob one{.components = {std::move(*whole)}, .parts = {}, .pods = {pods}};
  const std::vector<Part> parts = SplitParts(group, pods);
  // A gang cut short (fewer pods than its size) is never split: its parts are not known yet.
  if (parts.size() < 2 || static_cast<int>(pods.size()) < group.size) return one;

  GroupJob het;
  std::set<std::string> shapes;      // the parts' descriptions, less the node count
  std::set<std::string> exclusions;  // the parts' pods' node constraints
  for (const Part& part : parts) {
    GroupSpec spec = group;
    spec.size = static_cast<int>(part.pods.size());
    Result<slurm::JobDescription> job = Translate(spec, part.pods, options);
    if (!job) return tl::unexpected(job.error());
    shapes.insert(Comparable(*job));
    std::set<std::string> keys;
    for (const kube::Pod* p : part.pods) keys.insert(ExclusionKey({p}));
    exclusions.insert(fmt::format("{}", fmt::join(keys, "\n")));
    het.components.push_back(std::move(*job));
    het.parts.push_back(part.name);
    het.pods.push_back(part.pods);
  }
  if (shapes.size() < 2 && exclusions.size() < 2) return one;

  // The group's tag on the first component, every pod in component order; upstream's list of
  // its own pods on the others (no bridge takes them for a job of a group).
  JobTag tag{.group = group.key,
             .parts = het.parts,
             .cluster = options.cluster_name,
             .scheduler = options.scheduler_name,
             .ours = true};
  for (std::size_t k = 0; k < het.components.size(); ++k) {
    for (const kube::Pod* p : het.pods[k]) {
      tag.pods.push_back(p->metadata.namespace_ + "/" + p->metadata.name);
      tag.uids.push_back(p->metadata.uid);
    }
    if (k > 0) het.components[k].admin_comment = UpstreamTag(het.pods[k]);
  }
  het.components[0].admin_comment = EncodeJobTag(tag);
  return het;
}

int PartOffset(const std::vector<std::string>& parts, const std::string& part) {
  if (parts.empty()) return 0;
  auto it = std::ranges::find(parts, part);
  return it == parts.end() ? -1 : static_cast<int>(it - parts.begin());
}

}  // namespace sb::bridge
