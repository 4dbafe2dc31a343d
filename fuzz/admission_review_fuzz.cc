// SPDX-License-Identifier: Apache-2.0
//
// fuzz/admission_review_fuzz.cc
//
// The admission webhook's handling of an AdmissionReview body (admission/review.h): decode, then
// mutate and validate under a policy with every option on, and encode the answer, as the
// webhook server does for each call. Seeds: fuzz/seeds/admission_review/.
#include <cstddef>
#include <cstdint>

#include "admission/review.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace sb::admission;
  static const Policy kPolicy = [] {
    Policy p;
    p.managed_namespaces = {"default", "slurm"};
    p.privileged_users = DefaultPrivilegedUsers("slinky");
    p.privileged_groups = {"system:masters"};
    p.nvidia_visible_devices = true;
    return p;
  }();
  static const Policy kSelectorPolicy = [] {
    Policy p = kPolicy;
    p.namespace_selector = sb::bridge::LabelSelector{.match_labels = {{"slurm", "yes"}}};
    return p;
  }();
  static const Labels kNamespaceLabels = {{"slurm", "yes"}};

  sb::Result<Request> request = DecodeReview(sb::fuzz::AsText(data, size));
  if (!request) {
    return 0;
  }
  (void)EncodeReview(request->uid, Mutate(*request, kPolicy, nullptr));
  (void)EncodeReview(request->uid, Mutate(*request, kSelectorPolicy, &kNamespaceLabels));
  (void)EncodeReview(request->uid, Validate(*request, kPolicy));
  return 0;
}
