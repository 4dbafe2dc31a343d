// SPDX-License-Identifier: Apache-2.0
//
// kube/cache.h
//
// The informer's store: immutable snapshots (shared_ptr<const T>) keyed "ns/name" (or "name"),
// with secondary indexes and add/update/delete handlers, like client-go's thread-safe store +
// indexer + shared-informer handlers, minus the threads.
//
// Objects are never mutated in place: an update replaces the pointer, so a reader may keep an
// old snapshot as long as it likes. Handlers run synchronously inside Upsert/Remove/Replace/
// Resync and must only record work (enqueue a key), not do it.
//
// Replace(items) is client-go's Replace: it delivers the difference between the cache and a
// fresh LIST as adds, updates (only where the resourceVersion changed) and synthesized deletes
// for keys that vanished. A synthesized delete carries the last object the cache knew.
//
// Thread model: loop-confined.
//
// Example:
//   Cache<Pod> pods;
//   pods.AddIndex(kIndexNodeName, PodNodeNameIndex());
//   pods.AddHandlers({.on_add = [&](const auto& p) { queue.Add(ObjectKey(p->metadata)); }});
//   for (const auto& p : pods.ByIndex(kIndexNodeName, "n1")) { ... }
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kube/types.h"

namespace sb::kube {

inline constexpr std::string_view kIndexNamespace = "namespace";
inline constexpr std::string_view kIndexNodeName = "spec.nodeName";

template <typename T>
class Cache {
 public:
  using Ptr = std::shared_ptr<const T>;
  // The index values of one object (none, one or several).
  using IndexFn = std::function<std::vector<std::string>(const T&)>;
  struct Handlers {
    std::function<void(const Ptr&)> on_add;
    std::function<void(const Ptr& old_obj, const Ptr& new_obj)> on_update;
    std::function<void(const Ptr&)> on_delete;
  };

  Cache() {
    AddIndex(std::string(kIndexNamespace),
             [](const T& o) { return std::vector<std::string>{o.metadata.namespace_}; });
  }

  // Adds (or replaces) index `name`, indexing what is already cached.
  void AddIndex(std::string name, IndexFn fn) {
    Index& idx = indexes_[name];
    idx.fn = std::move(fn);
    idx.values.clear();
    for (const auto& [key, obj] : items_) {
      for (std::string& v : idx.fn(*obj)) idx.values[std::move(v)].insert(key);
    }
  }

  // Registers handlers; objects already cached are delivered to on_add at once (as client-go
  // does for a handler added to a running informer). Returns an id for RemoveHandlers.
  int AddHandlers(Handlers h) {
    int id = next_handler_id_++;
    handlers_.emplace_back(id, std::move(h));
    const Handlers& added = handlers_.back().second;
    if (added.on_add) {
      for (const auto& [key, obj] : items_) added.on_add(obj);
    }
    return id;
  }
  void RemoveHandlers(int id) {
    std::erase_if(handlers_, [id](const auto& p) { return p.first == id; });
  }

  [[nodiscard]] Ptr Get(std::string_view key) const {
    auto it = items_.find(std::string(key));
    return it == items_.end() ? nullptr : it->second;
  }
  [[nodiscard]] std::vector<Ptr> List() const {
    std::vector<Ptr> out;
    out.reserve(items_.size());
    for (const auto& [key, obj] : items_) out.push_back(obj);
    return out;
  }
  [[nodiscard]] std::vector<std::string> Keys() const {
    std::vector<std::string> out;
    out.reserve(items_.size());
    for (const auto& [key, obj] : items_) out.push_back(key);
    return out;
  }
  // Objects whose index `index` has value `value`; empty for an unknown index.
  [[nodiscard]] std::vector<Ptr> ByIndex(std::string_view index, std::string_view value) const {
    std::vector<Ptr> out;
    auto it = indexes_.find(std::string(index));
    if (it == indexes_.end()) return out;
    auto vit = it->second.values.find(std::string(value));
    if (vit == it->second.values.end()) return out;
    for (const std::string& key : vit->second) out.push_back(items_.at(key));
    return out;
  }
  [[nodiscard]] std::size_t size() const { return items_.size(); }

  // For the reflector ------------------------------------------------------------------------

  // ADDED / MODIFIED.
  void Upsert(T obj) {
    std::string key = ObjectKey(obj.metadata);
    Ptr cur = std::make_shared<const T>(std::move(obj));
    Ptr old = Store(key, cur);
    Notify(old, cur);
  }
  // DELETED: `obj` is the final state the apiserver sent.
  void Remove(const T& obj) {
    std::string key = ObjectKey(obj.metadata);
    Ptr old = Erase(key);
    Ptr last = std::make_shared<const T>(obj);
    if (old == nullptr) return;  // never seen: nothing to tell
    for (auto& [id, h] : handlers_) {
      if (h.on_delete) h.on_delete(last);
    }
  }
  // A full LIST: delivers the difference.
  void Replace(std::vector<T> items) {
    std::set<std::string> seen;
    for (T& obj : items) {
      std::string key = ObjectKey(obj.metadata);
      seen.insert(key);
      Ptr old = Get(key);
      if (old && old->metadata.resource_version == obj.metadata.resource_version) continue;
      Ptr cur = std::make_shared<const T>(std::move(obj));
      Store(key, cur);
      Notify(old, cur);
    }
    std::vector<std::string> gone;
    for (const auto& [key, obj] : items_) {
      if (!seen.contains(key)) gone.push_back(key);
    }
    for (const std::string& key : gone) {
      Ptr old = Erase(key);
      for (auto& [id, h] : handlers_) {
        if (h.on_delete) h.on_delete(old);
      }
    }
  }
  // Resync: on_update(obj, obj) for every object.
  void Resync() {
    for (const auto& [key, obj] : items_) {
      for (auto& [id, h] : handlers_) {
        if (h.on_update) h.on_update(obj, obj);
      }
    }
  }

 private:
  struct Index {
    IndexFn fn;
    std::unordered_map<std::string, std::set<std::string>> values;
  };

  void Unindex(const std::string& key, const T& obj) {
    for (auto& [name, idx] : indexes_) {
      for (const std::string& v : idx.fn(obj)) {
        auto it = idx.values.find(v);
        if (it == idx.values.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) idx.values.erase(it);
      }
    }
  }
  void IndexObj(const std::string& key, const T& obj) {
    for (auto& [name, idx] : indexes_) {
      for (std::string& v : idx.fn(obj)) idx.values[std::move(v)].insert(key);
    }
  }
  Ptr Store(const std::string& key, const Ptr& cur) {
    Ptr old;
    auto it = items_.find(key);
    if (it != items_.end()) {
      old = it->second;
      Unindex(key, *old);
      it->second = cur;
    } else {
      items_.emplace(key, cur);
    }
    IndexObj(key, *cur);
    return old;
  }
  Ptr Erase(const std::string& key) {
    auto it = items_.find(key);
    if (it == items_.end()) return nullptr;
    Ptr old = it->second;
    Unindex(key, *old);
    items_.erase(it);
    return old;
  }
  void Notify(const Ptr& old, const Ptr& cur) {
    for (auto& [id, h] : handlers_) {
      if (old) {
        if (h.on_update) h.on_update(old, cur);
      } else if (h.on_add) {
        h.on_add(cur);
      }
    }
  }

  std::unordered_map<std::string, Ptr> items_;
  std::map<std::string, Index, std::less<>> indexes_;
  std::vector<std::pair<int, Handlers>> handlers_;
  int next_handler_id_ = 0;
};

// Pods by spec.nodeName (unassigned pods are not indexed).
inline Cache<Pod>::IndexFn PodNodeNameIndex() {
  return [](const Pod& p) {
    return p.spec.node_name.empty() ? std::vector<std::string>{}
                                    : std::vector<std::string>{p.spec.node_name};
  };
}

// Objects by the value of label `key` (objects without it are not indexed). Index name
// convention: LabelIndexName(key).
template <typename T>
typename Cache<T>::IndexFn LabelIndex(std::string key) {
  return [key = std::move(key)](const T& o) {
    auto it = o.metadata.labels.find(key);
    return it == o.metadata.labels.end() ? std::vector<std::string>{}
                                         : std::vector<std::string>{it->second};
  };
}
inline std::string LabelIndexName(std::string_view key) { return "label:" + std::string(key); }

}  // namespace sb::kube
