// SPDX-License-Identifier: Apache-2.0
//
// kube/codec.h
//
// JSON <-> types.h. Decoding uses simdjson On Demand and reads only the fields types.h holds;
// unknown fields are skipped and field order does not matter. Encoding (request bodies:
// create, update, Binding, Eviction) uses Boost.JSON and writes only non-empty fields.
//
// Decode<T> is defined for Pod, Node, Namespace, Event, Lease, Job, GenericObject and Status;
// DecodeList<T> and DecodeWatchEvent<T> for the same types except Status.
//
// Thread model: pure functions; each thread uses its own (thread_local) parser.
//
// Example:
//   Result<List<Pod>> page = DecodeList<Pod>(response.body);
//   Result<WatchEvent<Pod>> ev = DecodeWatchEvent<Pod>(line);
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "kube/types.h"

namespace sb::kube {

// One object. kInvalidArgument (with simdjson's reason) on malformed JSON or a wrong field type.
template <typename T>
[[nodiscard]] Result<T> Decode(std::string_view json);

// One LIST page ({"metadata":{"resourceVersion","continue"},"items":[...]}).
template <typename T>
[[nodiscard]] Result<List<T>> DecodeList(std::string_view json);

// One watch event line ({"type":"ADDED","object":{...}}). For ERROR the object is decoded as a
// Status; for BOOKMARK only object.metadata.resourceVersion is meaningful.
template <typename T>
[[nodiscard]] Result<WatchEvent<T>> DecodeWatchEvent(std::string_view json);

// Reads one value of a JSON document by JSON pointer (RFC 6901, "/spec/replicas"), for typed
// accessors over GenericObject::spec_json. kNotFound when absent, kInvalidArgument when it has
// another type or the pointer is "" (the whole document).
[[nodiscard]] Result<std::string> JsonStringAt(std::string_view json, std::string_view pointer);
[[nodiscard]] Result<std::int64_t> JsonIntAt(std::string_view json, std::string_view pointer);
[[nodiscard]] Result<bool> JsonBoolAt(std::string_view json, std::string_view pointer);
// The raw JSON text of the value (object, array or scalar) at `pointer`.
[[nodiscard]] Result<std::string> JsonRawAt(std::string_view json, std::string_view pointer);
// The NodeSelectorTerms list at `pointer`, read as a pod's required node affinity is (a
// PersistentVolume's "/nodeAffinity/required/nodeSelectorTerms"); null reads as none.
[[nodiscard]] Result<std::vector<NodeSelectorTerm>> JsonNodeSelectorTermsAt(
    std::string_view json, std::string_view pointer);

// Request bodies. Each writes apiVersion and kind. A pod's required pod (anti-)affinity is only
// counted when read (PodSpec), so it is not written.
[[nodiscard]] std::string Encode(const Pod& pod);
[[nodiscard]] std::string Encode(const Node& node);
[[nodiscard]] std::string Encode(const Namespace& ns);
[[nodiscard]] std::string Encode(const Event& event);
[[nodiscard]] std::string Encode(const Lease& lease);
[[nodiscard]] std::string Encode(const Job& job);
// spec_json / status_json are embedded as JSON; kInvalidArgument when they do not parse.
[[nodiscard]] Result<std::string> Encode(const GenericObject& object);

// v1 Binding of pod `ns/name` to `node` (POST pods/{name}/binding). A non-empty `uid` becomes
// metadata.uid, which the apiserver checks against the pod's; `annotations` become
// metadata.annotations, which the apiserver merges into the pod's as it binds it (every version
// since 1.1: BindingREST.setPodHostAndAnnotations); `labels` become metadata.labels, which
// the apiserver copies onto the pod's in the same write since 1.35 (feature
// PodTopologyLabelsAdmission, beta and on by default; earlier versions ignore them).
[[nodiscard]] std::string EncodeBinding(std::string_view ns, std::string_view name,
                                        std::string_view uid, std::string_view node,
                                        const std::map<std::string, std::string>& annotations = {},
                                        const std::map<std::string, std::string>& labels = {});

// metav1.DeleteOptions; fields unset stay out.
struct DeleteOptions {
  std::optional<std::int64_t> grace_period_seconds;
  std::optional<std::string> uid;                 // preconditions.uid
  std::optional<std::string> resource_version;    // preconditions.resourceVersion
  std::optional<std::string> propagation_policy;  // Orphan, Background, Foreground
  bool operator==(const DeleteOptions&) const = default;
};
[[nodiscard]] std::string EncodeDeleteOptions(const DeleteOptions& options);

// An Eviction of `ns/name` (POST pods/{name}/eviction) as `api_version` ("policy/v1", or
// "policy/v1beta1" for servers before 1.22).
[[nodiscard]] std::string EncodeEviction(std::string_view ns, std::string_view name,
                                         const DeleteOptions& options,
                                         std::string_view api_version = "policy/v1beta1");

// A JSON merge patch that sets (or, with nullopt, removes) labels and annotations:
// {"metadata":{"labels":{"a":"1","b":null}}}.
[[nodiscard]] std::string EncodeMetadataMergePatch(
    const std::map<std::string, std::optional<std::string>>& labels,
    const std::map<std::string, std::optional<std::string>>& annotations);

// Quotes `s` as a JSON string literal, with the quotes.
[[nodiscard]] std::string JsonQuote(std::string_view s);

}  // namespace sb::kube
