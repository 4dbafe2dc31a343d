// SPDX-License-Identifier: Apache-2.0
#include "kube/runtime/kube_adapters.h"

#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/io_context.hpp>

#include "kube/codec.h"
#include "testing/run.h"

namespace sb::kube {
namespace {

namespace asio = boost::asio;

// Answers every call with the next canned reply and records what was asked.
class FakeClient final : public Client {
 public:
  struct Call {
    std::string verb;
    std::string path;
    std::string body;
    PatchType patch_type = PatchType::kJsonMerge;
  };

  asio::awaitable<Result<std::string>> Get(ResourceRef ref) override {
    co_return Reply(Call{"GET", ref.Path(), ""});
  }
  asio::awaitable<Result<std::string>> List(ResourceRef ref, ListOptions) override {
    co_return Reply(Call{"LIST", ref.Path(), ""});
  }
  asio::awaitable<Result<std::string>> Create(ResourceRef ref, std::string body) override {
    co_return Reply(Call{"POST", ref.Path(), std::move(body)});
  }
  asio::awaitable<Result<std::string>> Update(ResourceRef ref, std::string body) override {
    co_return Reply(Call{"PUT", ref.Path(), std::move(body)});
  }
  asio::awaitable<Result<std::string>> Patch(ResourceRef ref, PatchType type,
                                             std::string body) override {
    co_return Reply(Call{"PATCH", ref.Path(), std::move(body), type});
  }
  asio::awaitable<Result<std::string>> Delete(ResourceRef ref, DeleteOptions) override {
    co_return Reply(Call{"DELETE", ref.Path(), ""});
  }
  asio::awaitable<Result<void>> Watch(ResourceRef, ListOptions,
                                      std::function<bool(std::string_view)>) override {
    co_return MakeError(ErrorCode::kInternal, "not faked");
  }

  std::vector<Call> calls;
  std::deque<Result<std::string>> replies;

 private:
  Result<std::string> Reply(Call call) {
    calls.push_back(std::move(call));
    if (replies.empty()) {
      return MakeError(ErrorCode::kInternal, "no reply queued");
    }
    Result<std::string> r = std::move(replies.front());
    replies.pop_front();
    return r;
  }
};

constexpr char kLeaseJson[] = R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",
  "metadata":{"name":"sched","namespace":"sb","resourceVersion":"7"},
  "spec":{"holderIdentity":"a","leaseDurationSeconds":15,"acquireTime":"2026-01-01T00:00:00.000000Z",
          "renewTime":"2026-01-01T00:00:04.000000Z","leaseTransitions":2}})";

TEST(ClientLeaseStoreTest, MapsGetCreateUpdateToLeasePaths) {
  asio::io_context io;
  FakeClient client;
  ClientLeaseStore store(client);
  client.replies = {std::string(kLeaseJson), std::string(kLeaseJson),
                    MakeError(ErrorCode::kConflict, "modified", 409)};

  Result<Lease> got = sb::testing::RunSync(io, store.Get("sb", "sched"));
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_EQ(got->holder_identity, "a");
  EXPECT_EQ(got->lease_transitions, 2);
  EXPECT_EQ(got->metadata.resource_version, "7");

  Lease fresh;
  fresh.metadata.namespace_ = "sb";
  fresh.metadata.name = "sched";
  fresh.holder_identity = "a";
  ASSERT_TRUE(sb::testing::RunSync(io, store.Create(fresh)).has_value());

  Result<Lease> updated = sb::testing::RunSync(io, store.Update(*got));
  ASSERT_FALSE(updated.has_value());
  EXPECT_EQ(updated.error().code, ErrorCode::kConflict);

  ASSERT_EQ(client.calls.size(), 3u);
  EXPECT_EQ(client.calls[0].verb, "GET");
  EXPECT_EQ(client.calls[0].path, "/apis/coordination.k8s.io/v1/namespaces/sb/leases/sched");
  EXPECT_EQ(client.calls[1].verb, "POST");
  EXPECT_EQ(client.calls[1].path, "/apis/coordination.k8s.io/v1/namespaces/sb/leases");
  EXPECT_EQ(client.calls[2].verb, "PUT");
  EXPECT_EQ(client.calls[2].path, "/apis/coordination.k8s.io/v1/namespaces/sb/leases/sched");
  // The PUT is conditional on the resourceVersion read.
  EXPECT_EQ(JsonStringAt(client.calls[2].body, "/metadata/resourceVersion"), "7");
  EXPECT_EQ(JsonStringAt(client.calls[2].body, "/spec/holderIdentity"), "a");
}

TEST(ClientEventSinkTest, CreatesAndStrategicMergePatchesEvents) {
  asio::io_context io;
  FakeClient client;
  ClientEventSink sink(client);
  const std::string stored =
      R"({"metadata":{"name":"p.1","namespace":"ns","resourceVersion":"9"},"count":2,)"
      R"("message":"m","lastTimestamp":"2026-01-01T00:00:05Z"})";
  client.replies = {stored, stored};

  Event e;
  e.metadata.namespace_ = "ns";
  e.metadata.name = "p.1";
  e.involved_object.kind = "Pod";
  e.count = 1;
  ASSERT_TRUE(sb::testing::RunSync(io, sink.Create(e)).has_value());

  EventPatch patch{"ns", "p.1", 2, "2026-01-01T00:00:05Z", "m \"quoted\""};
  Result<Event> patched = sb::testing::RunSync(io, sink.Patch(patch));
  ASSERT_TRUE(patched.has_value()) << patched.error().message;
  EXPECT_EQ(patched->count, 2);
  EXPECT_EQ(patched->metadata.resource_version, "9");

  ASSERT_EQ(client.calls.size(), 2u);
  EXPECT_EQ(client.calls[0].verb, "POST");
  EXPECT_EQ(client.calls[0].path, "/api/v1/namespaces/ns/events");
  EXPECT_EQ(client.calls[1].verb, "PATCH");
  EXPECT_EQ(client.calls[1].path, "/api/v1/namespaces/ns/events/p.1");
  EXPECT_EQ(client.calls[1].patch_type, PatchType::kStrategicMerge);
  EXPECT_EQ(JsonIntAt(client.calls[1].body, "/count"), 2);
  EXPECT_EQ(JsonStringAt(client.calls[1].body, "/lastTimestamp"), "2026-01-01T00:00:05Z");
  EXPECT_EQ(JsonStringAt(client.calls[1].body, "/message"), "m \"quoted\"");
}

}  // namespace
}  // namespace sb::kube
