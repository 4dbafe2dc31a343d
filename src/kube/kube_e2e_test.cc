// SPDX-License-Identifier: Apache-2.0
// Placeholder; replaced below.
#include <gtest/gtest.h>
TEST(KubeE2e, Placeholder) {}
