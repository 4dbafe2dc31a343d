// SPDX-License-Identifier: Apache-2.0
#include "kube/owners.h"

#include <algorithm>
#include <cctype>

namespace sb::kube {

std::string ResourceOfKind(std::string_view kind) {
  std::string r(kind);
  std::ranges::transform(r, r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r + "s";
}

ResourceRef RefOfKind(std::string_view api_version, std::string_view kind, std::string namespace_,
                      std::string name) {
  ResourceRef ref;
  if (auto slash = api_version.find('/'); slash != std::string_view::npos) {
    ref.group = std::string(api_version.substr(0, slash));
    ref.version = std::string(api_version.substr(slash + 1));
  } else {
    ref.version = std::string(api_version);
  }
  ref.resource = ResourceOfKind(kind);
  ref.namespace_ = std::move(namespace_);
  ref.name = std::move(name);
  return ref;
}

boost::asio::awaitable<Result<GenericObject>> DirectOwnerSource::Get(std::string api_version,
                                                                     std::string kind,
                                                                     std::string namespace_,
                                                                     std::string name) {
  ResourceRef ref = RefOfKind(api_version, kind, std::move(namespace_), std::move(name));
  co_return co_await GetAs<GenericObject>(client_, std::move(ref));
}

boost::asio::awaitable<Result<ControllerChain>> ReadControllerChain(const ObjectMeta& meta,
                                                                    OwnerSource& source) {
  ControllerChain chain;
  std::vector<GenericObject>& owners = chain.owners;
  const std::vector<OwnerReference>* refs = &meta.owner_references;
  for (int depth = 0; depth < 32; ++depth) {
    const OwnerReference* controller = nullptr;
    for (const OwnerReference& r : *refs) {
      if (r.controller) controller = &r;
    }
    if (controller == nullptr) break;
    std::string api_version = controller->api_version;
    std::string kind = controller->kind;
    std::string namespace_ = meta.namespace_;
    std::string name = controller->name;
    Result<GenericObject> owner = co_await source.Get(std::move(api_version), std::move(kind),
                                                      std::move(namespace_), std::move(name));
    if (!owner) {
      if (owner.error().code != ErrorCode::kNotFound &&
          owner.error().code != ErrorCode::kPermissionDenied &&
          owner.error().code != ErrorCode::kInvalidArgument) {
        co_return tl::unexpected(owner.error());
      }
      chain.unreadable =
          controller->kind + " " + controller->name + ": " + owner.error().ToString();
      break;
    }
    owners.push_back(std::move(*owner));
    refs = &owners.back().metadata.owner_references;
  }
  co_return chain;
}

}  // namespace sb::kube
