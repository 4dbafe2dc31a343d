// SPDX-License-Identifier: Apache-2.0
#include "bridge/annotations.h"

#include "bridge/names.h"

namespace sb::bridge {

std::map<std::string, std::string> JobAnnotations(const kube::StringMap& annotations) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : annotations) {
    if (k.starts_with(kLegacyJobAnnotationPrefix) && !k.starts_with(kJobAnnotationPrefix)) {
      out.emplace(k.substr(kLegacyJobAnnotationPrefix.size()), v);
    }
  }
  for (const auto& [k, v] : annotations) {
    if (k.starts_with(kJobAnnotationPrefix)) out[k.substr(kJobAnnotationPrefix.size())] = v;
  }
  return out;
}

}  // namespace sb::bridge
