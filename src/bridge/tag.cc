// SPDX-License-Identifier: Apache-2.0
#include "bridge/tag.h"

#include <boost/json.hpp>

namespace sb::bridge {
namespace json = boost::json;

std::string EncodeJobTag(const JobTag& tag) {
  json::object root;
  json::array pods;
  for (const std::string& p : tag.pods) pods.emplace_back(p);
  root["pods"] = std::move(pods);
  json::object ours;
  ours["v"] = 1;
  ours["cluster"] = tag.cluster;
  ours["scheduler"] = tag.scheduler;
  ours["group"] = tag.group;
  json::array uids;
  for (const std::string& u : tag.uids) uids.emplace_back(u);
  ours["uids"] = std::move(uids);
  if (!tag.parts.empty()) {
    json::array parts;
    for (const std::string& p : tag.parts) parts.emplace_back(p);
    ours["parts"] = std::move(parts);
  }
  root["slurm-bridge"] = std::move(ours);
  return json::serialize(root);
}

std::optional<JobTag> ParseJobTag(std::string_view admin_comment) {
  if (admin_comment.empty() || admin_comment.front() != '{') return std::nullopt;
  boost::system::error_code ec;
  json::value v = json::parse(admin_comment, ec);
  if (ec || !v.is_object()) return std::nullopt;
  const json::object& root = v.as_object();
  const json::value* pods = root.if_contains("pods");
  if (pods == nullptr || !pods->is_array()) return std::nullopt;
  JobTag tag;
  for (const json::value& p : pods->as_array()) {
    if (!p.is_string()) return std::nullopt;
    tag.pods.emplace_back(p.as_string());
  }
  const json::value* ours = root.if_contains("slurm-bridge");
  if (ours != nullptr && ours->is_object()) {
    const json::object& o = ours->as_object();
    const json::value* ver = o.if_contains("v");
    if (ver != nullptr && ver->is_int64() && ver->as_int64() == 1) {
      auto str = [&](const char* key) {
        const json::value* s = o.if_contains(key);
        return s != nullptr && s->is_string() ? std::string(s->as_string()) : std::string();
      };
      tag.ours = true;
      tag.cluster = str("cluster");
      tag.scheduler = str("scheduler");
      tag.group = str("group");
      if (const json::value* uids = o.if_contains("uids"); uids != nullptr && uids->is_array()) {
        for (const json::value& u : uids->as_array()) {
          tag.uids.push_back(u.is_string() ? std::string(u.as_string()) : std::string());
        }
      }
      if (const json::value* parts = o.if_contains("parts");
          parts != nullptr && parts->is_array()) {
        for (const json::value& p : parts->as_array()) {
          tag.parts.push_back(p.is_string() ? std::string(p.as_string()) : std::string());
        }
      }
    }
  }
  return tag;
}

}  // namespace sb::bridge
