// SPDX-License-Identifier: Apache-2.0
//
// The controllers' safety rules end to end, against the real slurmctld/slurmrestd and
// kube-apiserver: a pod's job-id label is never enough to touch a Slurm job (review item 1), a
// bound pod without a job of this bridge is deleted (item 11), and a bound pod whose job was
// requeued or suspended is deleted (item 10).
#include <fstream>
#include <string>
#include <vector>

#include "testing/bridge_e2e.h"

namespace sb::controllers {
namespace {
using namespace std::chrono_literals;
using sb::testing::RunSync;

class ControllersSafetyE2e : public sb::testing::BridgeE2e {
 protected:
  std::string JobState(std::int64_t id) {
    auto j = RunSync(io_, slurm_->GetJob(id));
    return j ? std::string(j->BaseState()) : "GONE";
  }

  // A plain external job of one CPU (no tag, or `comment` as admin_comment), straight to Slurm:
  // someone else's job as far as the bridge is concerned.
  std::int64_t SubmitPlain(const std::string& comment = "") {
    const std::int64_t id = SubmitExternal("not-the-bridges", comment);
    if (id > 0) cleanup_.push_back(fmt::format("scancel {}", id));
    return id;
  }

  void Label(const std::string& pod, std::int64_t job) {
    auto r =
        RunSync(io_, kube_->Patch(kube::PodsRef(ns_).WithName(pod), kube::PatchType::kJsonMerge,
                                  fmt::format(R"({{"metadata":{{"labels":{{"{}":"{}"}}}}}})",
                                              bridge::kJobIdLabel, job)));
    ASSERT_TRUE(r) << r.error().message;
  }

  // The message of the first Event with `reason` on pod `name` whose message contains `part`;
  // "" when none.
  std::string EventMessage(const std::string& name, const std::string& reason,
                           const std::string& part = "") {
    for (const kube::Event& e : Events(name)) {
      if (e.reason == reason && e.message.find(part) != std::string::npos) return e.message;
    }
    return "";
  }

  // Lines of the bridge's log that contain `what`.
  int LogCount(const std::string& what) {
    std::ifstream in(dir_ + "/scheduler.log");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) n += line.find(what) != std::string::npos ? 1 : 0;
    return n;
  }

  bool DeletedOrGone(const std::string& name) {
    auto p = RunSync(io_, kube::GetPod(*kube_, ns_, name));
    return p ? !p->metadata.deletion_timestamp.empty() : p.error().code == ErrorCode::kNotFound;
  }
};

// Review item 1: a user labels a bridge pod with someone else's running job and deletes the pod.
// The controllers used to cancel that job ("its pods are gone"); the job is not theirs.
TEST_F(ControllersSafetyE2e, ForgedLabelNeverCancelsAPlainJob) {
  const std::int64_t plain = SubmitPlain();
  ASSERT_GT(plain, 0);
  ASSERT_TRUE(WaitFor([&] { return JobState(plain) == "RUNNING"; }, 30s)) << JobState(plain);
  scheduler_ = StartBridge("controllers");
  // No scheduler runs: the pod stays Pending with the label the user wrote.
  CreatePod("forger", R"({"limits":{"cpu":"1","memory":"64Mi"}})");
  Label("forger", plain);
  // The controller reports the label, once, and leaves the job alone.
  std::string reported;
  EXPECT_TRUE(WaitFor(
      [&] {
        reported = EventMessage("forger", "SlurmJobNotOurs");
        return !reported.empty();
      },
      30s));
  EXPECT_NE(reported.find(fmt::format("Slurm job {} has no slurm-bridge tag", plain)),
            std::string::npos)
      << reported;
  // The controller's debug line for the job once no pod names it any more.
  const std::string looked = fmt::format("Slurm job {} reconciled: RUNNING, 0 pod(s)", plain);
  EXPECT_EQ(LogCount(looked), 0);
  auto d = RunSync(io_, kube::DeletePod(*kube_, ns_, "forger", {.grace_period_seconds = 0}));
  ASSERT_TRUE(d) << d.error().message;
  // The controller looks at the job again once the pod is gone (its log says so), or cancels it.
  ASSERT_TRUE(WaitFor([&] { return JobState(plain) != "RUNNING" || LogCount(looked) > 0; }, 30s));
  EXPECT_EQ(JobState(plain), "RUNNING");
  EXPECT_EQ(LogCount(fmt::format("cancelled Slurm job {}", plain)), 0);
}

// Review items 1 and 11: bound bridge pods that no job of this bridge holds (one labelled with
// a plain job, one with no label) are reported and deleted after the confirmation period; the
// plain job stays.
TEST_F(ControllersSafetyE2e, BoundPodsWithoutAJobOfOursAreDeletedAndThePlainJobStays) {
  const std::int64_t plain = SubmitPlain();
  ASSERT_GT(plain, 0);
  ASSERT_TRUE(WaitFor([&] { return JobState(plain) == "RUNNING"; }, 30s)) << JobState(plain);
  scheduler_ = StartBridge("controllers");
  // Bound at creation (no webhook here), as a user could without it.
  CreatePod("forged", R"({"limits":{"cpu":"1","memory":"64Mi"}})", "{}", R"(,"nodeName":"n1")");
  Label("forged", plain);
  CreatePod("unlabelled", R"({"limits":{"cpu":"1","memory":"64Mi"}})", "{}", R"(,"nodeName":"n2")");
  ASSERT_TRUE(WaitFor([&] { return DeletedOrGone("forged") && DeletedOrGone("unlabelled"); }, 60s));
  // The Warning written before each deletion (Events are written asynchronously).
  std::string forged;
  std::string unlabelled;
  EXPECT_TRUE(WaitFor(
      [&] {
        forged = EventMessage("forged", "NoSlurmJob", "deleting the pod");
        unlabelled = EventMessage("unlabelled", "NoSlurmJob", "deleting the pod");
        return !forged.empty() && !unlabelled.empty();
      },
      30s));
  EXPECT_NE(forged.find(fmt::format("Slurm job {} has no slurm-bridge tag", plain)),
            std::string::npos)
      << forged;
  EXPECT_NE(unlabelled.find("without a Slurm job"), std::string::npos) << unlabelled;
  EXPECT_EQ(JobState(plain), "RUNNING");
}

// Review item 10: a job suspended under its bound pod no longer holds the node for it (Slurm may
// give the CPUs away): the pod is deleted after the confirmation period, with an event.
TEST_F(ControllersSafetyE2e, SuspendedJobDeletesTheBoundPodWithAnEvent) {
  scheduler_ = StartBridge("all");
  CreatePod("suspended", R"({"limits":{"cpu":"1","memory":"64Mi"}})",
            R"({"slurmjob.slinky.slurm.net/exclusive":"false"})");
  std::optional<kube::Pod> pod = WaitForPod("suspended", IsBound);
  ASSERT_TRUE(pod);
  const std::int64_t job = JobId(*pod);
  const std::string out = Slurm(fmt::format("scontrol suspend {}", job));
  ASSERT_TRUE(WaitFor([&] { return JobState(job) == "SUSPENDED"; }, 30s))
      << JobState(job) << ": " << out;
  ASSERT_TRUE(WaitFor([&] { return DeletedOrGone("suspended"); }, 60s));
  std::string msg;
  EXPECT_TRUE(WaitFor(
      [&] {
        msg = EventMessage("suspended", "SlurmJobNotRunning");
        return !msg.empty();
      },
      30s));
  EXPECT_NE(msg.find(fmt::format("Slurm job {} is SUSPENDED", job)), std::string::npos) << msg;
}

// Review item 10: a batch job requeued under its bound pod goes back to PENDING; the pod is
// deleted (its allocation is gone, even if the job starts again elsewhere), with an event.
TEST_F(ControllersSafetyE2e, RequeuedJobDeletesTheBoundPodWithAnEvent) {
  std::ofstream(config_path_, std::ios::app) << "jobMode: batch\n";
  scheduler_ = StartBridge("all");
  CreatePod("requeued", R"({"limits":{"cpu":"1","memory":"64Mi"}})",
            R"({"slurmjob.slinky.slurm.net/exclusive":"false"})");
  std::optional<kube::Pod> pod = WaitForPod("requeued", IsBound);
  ASSERT_TRUE(pod);
  const std::int64_t job = JobId(*pod);
  const std::string out = Slurm(fmt::format("scontrol requeue {}", job));
  ASSERT_TRUE(WaitFor([&] { return JobState(job) != "RUNNING"; }, 30s))
      << JobState(job) << ": " << out;
  ASSERT_TRUE(WaitFor([&] { return DeletedOrGone("requeued"); }, 60s));
  std::string msg;
  EXPECT_TRUE(WaitFor(
      [&] {
        msg = EventMessage("requeued", "SlurmJobNotRunning");
        return !msg.empty();
      },
      30s));
  EXPECT_NE(msg.find(fmt::format("Slurm job {} was requeued", job)), std::string::npos) << msg;
}

}  // namespace
}  // namespace sb::controllers
