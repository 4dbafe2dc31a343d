// SPDX-License-Identifier: Apache-2.0
#include "bridge/identity.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bridge/names.h"
#include "common/strings.h"

namespace sb::bridge {
namespace {

bool NamespaceMatches(std::string_view pattern, std::string_view ns) {
  if (pattern == "*") return true;
  if (pattern.ends_with('*')) return ns.starts_with(pattern.substr(0, pattern.size() - 1));
  return pattern == ns;
}

bool Allowed(const std::vector<std::string>& list, std::string_view value) {
  return std::ranges::any_of(list, [&](const std::string& v) { return v == "*" || v == value; });
}

std::string Describe(const std::vector<std::string>& list) {
  if (list.empty()) return "none";
  return fmt::format("{}", fmt::join(list, ", "));
}

const std::string* Find(const std::map<std::string, std::string>& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? nullptr : &it->second;
}

// The rule for `ns`, or the default rule (no identity of its own, nothing allowed) when none
// names it.
const IdentityRule& RuleOrDefault(const IdentityPolicy& policy, std::string_view ns) {
  static const IdentityRule kDefault;
  const IdentityRule* found = policy.RuleFor(ns);
  return found != nullptr ? *found : kDefault;
}

}  // namespace

const IdentityRule* IdentityPolicy::RuleFor(std::string_view ns) const {
  for (const IdentityRule& r : rules) {
    if (std::ranges::any_of(r.namespaces,
                            [&](const std::string& p) { return NamespaceMatches(p, ns); })) {
      return &r;
    }
  }
  return nullptr;
}

std::vector<std::string> IdentityViolations(
    const std::map<std::string, std::string>& job_annotations, std::string_view ns,
    const IdentityPolicy& policy) {
  const IdentityRule* found = policy.RuleFor(ns);
  const IdentityRule& rule = RuleOrDefault(policy, ns);
  std::string which;
  if (found != nullptr) {
    which = fmt::format("identityPolicy rule {} (namespaces {})", found - policy.rules.data() + 1,
                        Describe(found->namespaces));
  } else {
    which =
        fmt::format("identityPolicy: no rule names namespace {}, so the default rule applies", ns);
  }
  std::vector<std::string> out;
  auto refuse = [&](std::string_view key, std::string_view value, std::string_view allows) {
    out.push_back(
        fmt::format("annotation {}{}: \"{}\" is not allowed in namespace {} ({}; it allows {})",
                    kJobAnnotationPrefix, key, value, ns, which, allows));
  };
  // user-id and group-id: only the rule's own identity, unless the rule lets the pod choose.
  for (auto [key, fixed] : {std::pair<std::string_view, const std::string*>{"user-id", &rule.user},
                            {"group-id", &rule.group}}) {
    const std::string* v = Find(job_annotations, key);
    if (v == nullptr || *fixed == "*") continue;
    const std::string value = TrimWhitespace(*v);
    if (!fixed->empty() && value == *fixed) continue;
    refuse(key, value,
           fixed->empty() ? std::string("none: jobs run as the token's user")
                          : fmt::format("only {}", *fixed));
  }
  struct Listed {
    std::string_view key;
    const std::vector<std::string>* allowed;
  };
  for (const Listed& l :
       {Listed{"account", &rule.accounts}, Listed{"qos", &rule.qos},
        Listed{"partition", &rule.partitions}, Listed{"reservation", &rule.reservations},
        Listed{"wckey", &rule.wckeys}}) {
    const std::string* v = Find(job_annotations, l.key);
    if (v == nullptr) continue;
    const std::string value = TrimWhitespace(*v);
    if (Allowed(*l.allowed, value)) continue;
    if (l.key == "partition" && !policy.default_partition.empty() &&
        value == policy.default_partition) {
      continue;
    }
    std::vector<std::string> allows = *l.allowed;
    if (l.key == "partition" && !policy.default_partition.empty()) {
      allows.push_back(policy.default_partition);
    }
    refuse(l.key, value, Describe(allows));
  }
  if (const std::string* v = Find(job_annotations, "priority")) {
    const std::string value = TrimWhitespace(*v);
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    const bool number = !value.empty() && ec == std::errc() && p == value.data() + value.size();
    // A value that is not a number is Translate's to refuse, with its own message.
    if (number && (!rule.max_priority || n > *rule.max_priority)) {
      refuse("priority", value,
             rule.max_priority ? fmt::format("0..{}", *rule.max_priority)
                               : std::string("none: Slurm's priority policy decides"));
    }
  }
  return out;
}

Identity IdentityFor(const std::map<std::string, std::string>& job_annotations, std::string_view ns,
                     const IdentityPolicy& policy) {
  const IdentityRule& rule = RuleOrDefault(policy, ns);
  Identity out;
  auto pick = [&](const std::string& fixed, std::string_view key) -> std::string {
    if (fixed != "*") return fixed;
    const std::string* v = Find(job_annotations, key);
    return v == nullptr ? std::string() : TrimWhitespace(*v);
  };
  out.user_id = pick(rule.user, "user-id");
  out.group_id = pick(rule.group, "group-id");
  return out;
}

}  // namespace sb::bridge
