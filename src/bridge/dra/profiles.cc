// SPDX-License-Identifier: Apache-2.0
#include "bridge/dra/profiles.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/json.hpp>

#include "bridge/dra/internal.h"
#include "bridge/dra/selector.h"
#include "bridge/json_path.h"

namespace sb::bridge {
namespace json = boost::json;
namespace {

using dra_internal::Invalid;
using dra_internal::IsDnsLabel;
using dra_internal::IsDnsSubdomain;
using dra_internal::IsIdentifier;
using dra_internal::ParseJson;
using dra_internal::Quote;

constexpr std::size_t kMaxSelectorBytes = 10 * 1024;  // resourcev1.CELSelectorExpressionMaxLength
constexpr std::size_t kMaxDriverLength = 63;          // resourcev1.DriverNameMaxLength
// A gresName is also a claim request name (a DNS label), with room for a "-NN" suffix.
constexpr std::size_t kMaxGresNameLength = 60;

bool IsProfileName(std::string_view s) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty() || !alnum(s.front()) || !alnum(s.back())) return false;
  return std::ranges::all_of(s,
                             [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

std::vector<std::string> CoveredClasses(const std::vector<DeviceProfile>& profiles) {
  std::set<std::string> drivers;
  for (const DeviceProfile& p : profiles) drivers.insert(p.driver);
  return {drivers.begin(), drivers.end()};
}

std::string NotCoveredSuffix(const std::vector<DeviceProfile>& profiles) {
  if (profiles.empty()) {
    return "DRA is off: config deviceProfiles is empty";
  }
  return fmt::format("covered: {}", fmt::join(CoveredClasses(profiles), ", "));
}

}  // namespace

Result<void> ValidateDeviceProfiles(const std::vector<DeviceProfile>& profiles) {
  std::map<std::string, std::string> names_by_selector;
  std::set<std::string> names;
  std::string core_bitmap;
  for (std::size_t i = 0; i < profiles.size(); ++i) {
    const DeviceProfile& p = profiles[i];
    auto fail = [&](const std::string& what) {
      return tl::unexpected(Invalid(fmt::format(
          "profile {}: {}", p.name.empty() ? fmt::format("#{}", i) : Quote(p.name), what)));
    };
    if (p.name.empty()) return fail("has no name");
    if (!IsProfileName(p.name)) {
      return fail(
          "the name must start and end with a letter or digit and hold only letters, "
          "digits, '.', '_' and '-'");
    }
    if (!names.insert(p.name).second) return fail("the name is used twice");
    if (p.driver.empty()) return fail("has no driver");
    if (!IsDnsSubdomain(p.driver, kMaxDriverLength)) {
      return fail(fmt::format("driver {} is not a DNS subdomain of at most {} characters",
                              Quote(p.driver), kMaxDriverLength));
    }
    if (p.selector.empty()) return fail("has no selector");
    if (p.selector.size() > kMaxSelectorBytes) {
      return fail(fmt::format("the selector is longer than {} bytes", kMaxSelectorBytes));
    }
    Result<std::vector<SelectorTerm>> terms = ParseDeviceSelector(p.selector);
    if (!terms) return fail(terms.error().message);
    for (const SelectorTerm& t : *terms) {
      if (t.kind == SelectorTerm::Kind::kDriver && !t.negated && t.string_value != p.driver) {
        return fail(fmt::format("the selector asks for device.driver {} but the driver is {}",
                                Quote(t.string_value), Quote(p.driver)));
      }
    }
    if (auto [it, fresh] = names_by_selector.emplace(p.selector, p.name); !fresh) {
      return fail(fmt::format("has the selector of profile {}", Quote(it->second)));
    }
    if (p.backend == DeviceBackend::kCoreBitmap) {
      if (!core_bitmap.empty()) {
        return fail(fmt::format("profile {} uses the core-bitmap backend already; one may",
                                Quote(core_bitmap)));
      }
      core_bitmap = p.name;
      if (!p.gres_name.empty() || !p.gres_type.empty() || !p.index_from.empty()) {
        return fail("gresName, gresType and indexFrom are for the indexed-gres backend");
      }
      continue;
    }
    if (p.gres_name.empty()) return fail("the indexed-gres backend needs a gresName");
    if (!IsDnsLabel(p.gres_name, kMaxGresNameLength)) {
      return fail(fmt::format(
          "gresName {} must be a DNS label of at most {} characters (lower-case letters, digits, "
          "'-'): it also names the claim's request",
          Quote(p.gres_name), kMaxGresNameLength));
    }
    if (!p.gres_type.empty() && !std::ranges::all_of(p.gres_type, [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' ||
                 c == '.';
        })) {
      return fail(fmt::format("gresType {} is not a Slurm GRES type", Quote(p.gres_type)));
    }
    if (!p.index_from.empty() && p.index_from != "name") {
      std::string_view attr = p.index_from;
      const bool prefixed = attr.starts_with("attribute:");
      if (prefixed) attr.remove_prefix(std::string_view("attribute:").size());
      const std::size_t slash = attr.rfind('/');
      const std::string_view id = slash == std::string_view::npos ? attr : attr.substr(slash + 1);
      if (!prefixed || !IsIdentifier(id) ||
          (slash != std::string_view::npos && !IsDnsSubdomain(attr.substr(0, slash), 63))) {
        return fail(fmt::format(
            "indexFrom {} is not \"name\" or \"attribute:<name>\" (an int attribute such as "
            "index or gpu.example.com/index)",
            Quote(p.index_from)));
      }
    }
  }
  return {};
}

const DeviceProfile* FindProfile(const std::vector<DeviceProfile>& profiles,
                                 std::string_view name) {
  auto it = std::ranges::find(profiles, name, &DeviceProfile::name);
  return it == profiles.end() ? nullptr : &*it;
}

Result<const DeviceProfile*> ProfileForClass(std::string_view class_name,
                                             const kube::GenericObject* device_class,
                                             const std::vector<DeviceProfile>& profiles) {
  if (device_class == nullptr) {
    std::vector<const DeviceProfile*> found;
    for (const DeviceProfile& p : profiles) {
      if (p.driver == class_name) found.push_back(&p);
    }
    if (found.size() == 1) return found.front();
    if (found.empty()) {
      return tl::unexpected(
          Invalid(fmt::format("device class {} is covered by no device profile ({})",
                              Quote(class_name), NotCoveredSuffix(profiles))));
    }
    std::vector<std::string> names;
    for (const DeviceProfile* p : found) names.push_back(p->name);
    return tl::unexpected(Invalid(fmt::format(
        "device class {} is the driver of several device profiles ({}): its DeviceClass is "
        "needed to tell them apart",
        Quote(class_name), fmt::join(names, ", "))));
  }
  Result<json::value> spec =
      ParseJson(device_class->spec_json, fmt::format("DeviceClass {} spec", Quote(class_name)));
  if (!spec) return tl::unexpected(spec.error());
  const json::array* config = ArrayAt(&*spec, {"config"});
  if (config != nullptr && !config->empty()) {
    return tl::unexpected(Invalid(fmt::format(
        "DeviceClass {} has spec.config, which the bridge does not pass on", Quote(class_name))));
  }
  const json::array* selectors = ArrayAt(&*spec, {"selectors"});
  std::string expression;
  if (selectors != nullptr && selectors->size() == 1) {
    expression = StringAt(&(*selectors)[0], {"cel", "expression"});
  }
  if (expression.empty()) {
    return tl::unexpected(Invalid(
        fmt::format("DeviceClass {} must have exactly one CEL selector to match a device profile",
                    Quote(class_name))));
  }
  for (const DeviceProfile& p : profiles) {
    // Byte for byte, as upstream's registry: a selector that merely means the same is another.
    if (p.selector == expression) return &p;
  }
  return tl::unexpected(
      Invalid(fmt::format("DeviceClass {}: its selector {} is no device profile's selector ({})",
                          Quote(class_name), Quote(expression), NotCoveredSuffix(profiles))));
}

std::string DraTres(const DeviceProfile& profile) {
  if (profile.backend == DeviceBackend::kCoreBitmap) return "";
  return profile.gres_type.empty()
             ? "gres/" + profile.gres_name
             : fmt::format("gres/{}:{}", profile.gres_name, profile.gres_type);
}

}  // namespace sb::bridge
