// SPDX-License-Identifier: Apache-2.0
//
// bridge/tag.h
//
// The tag a placeholder job carries in `admin_comment`, so that the bridge finds its jobs again
// (after a restart, in the controllers' sweeps) and knows which pods each one is for:
//
//   {"pods":["ns/a","ns/b"],
//    "slurm-bridge":{"v":1,"cluster":"kubernetes","scheduler":"slurm-bridge-scheduler",
//                    "group":"Job/ns/train","uids":["<uid of ns/a>","<uid of ns/b>"]}}
//
// A heterogeneous job's first component also has "parts":["launcher","worker"] in the
// "slurm-bridge" object (its part names, by component offset).
//
// "pods" is upstream's format, so its tooling still parses our jobs. The "slurm-bridge" object
// makes the tag unambiguous: a job is the bridge's only when it is present with v=1, and this
// bridge's only when cluster and scheduler match. A foreign job, even with JSON in admin_comment,
// is never ours.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sb::bridge {

struct JobTag {
  std::vector<std::string> pods;  // "ns/name", in group order
  std::vector<std::string> uids;  // same order as pods
  std::string group;              // the group key (group.h)
  // A heterogeneous job's part names, by component offset (bridge/parts.h); empty otherwise.
  std::vector<std::string> parts;
  std::string cluster;
  std::string scheduler;
  bool ours = false;  // the "slurm-bridge" object was there (set by ParseJobTag)
  bool operator==(const JobTag&) const = default;

  [[nodiscard]] bool BelongsTo(std::string_view cluster_name,
                               std::string_view scheduler_name) const {
    return ours && cluster == cluster_name && scheduler == scheduler_name;
  }
};

[[nodiscard]] std::string EncodeJobTag(const JobTag& tag);

// nullopt when `admin_comment` is not a JSON object with a "pods" list of strings (a job that is
// no bridge's). An upstream tag parses with ours=false.
[[nodiscard]] std::optional<JobTag> ParseJobTag(std::string_view admin_comment);

}  // namespace sb::bridge
