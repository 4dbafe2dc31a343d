# SPDX-License-Identifier: Apache-2.0
#
# Test labels:
#   unit  fast, no I/O beyond loopback fakes; `ctest -L unit`
#   e2e   needs the real daemons (Slurm in its chroot, kube-apiserver + etcd); `ctest -L e2e`
#
# Every e2e test requires the `testenv` fixture: ctest starts one environment (testenv/up.sh)
# before the first e2e test and stops it (testenv/down.sh) after the last, even on failure.
# Tests find it through SB_TESTENV, the env file that up.sh writes.
#
# The e2e tests share the environment's nodes n1..n4 (drains, taints, labels, readiness) and
# its Slurm queue: they hold RESOURCE_LOCK testenv-nodes, so that `ctest -j` never runs two of
# them at once (unit tests, and the tests of the other environments, still run beside them).

# The order in which `ctest -j2` starts tests: COST, higher first. Without it a fresh clone (no
# Testing/Temporary/CTestCostData.txt yet) starts them in declaration order, and the chains of
# tests behind each environment's lock were left to run one after another at the end (warm CI:
# 1,282 s of tests). Each lock makes a chain (measured on CI's 2 cores: testenv ~690 s, the
# tests with environments of their own ~560 s, testenv-kubelets ~320 s, testenv-policy ~240 s):
# the two longest start first, side by side, the other two follow on whichever slot frees first,
# and the unit tests (cost 0) fill the gaps. A fixture's setup has its chain's cost; the
# lifecycle test, which holds every lock, goes first (the unit tests run beside it).
set(SB_TEST_COST_lifecycle 40)
set(SB_TEST_COST_testenv 30)
set(SB_TEST_COST_own-environment 20)
set(SB_TEST_COST_testenv-kubelets 10)
set(SB_TEST_COST_testenv-policy 10)

set(SB_TESTENV_DIR ${CMAKE_BINARY_DIR}/testenv)
set(SB_TESTENV_FILE ${SB_TESTENV_DIR}/env)

add_test(NAME testenv.up COMMAND ${PROJECT_SOURCE_DIR}/testenv/up.sh --tries 2 --run-dir ${SB_TESTENV_DIR})
set_tests_properties(testenv.up PROPERTIES FIXTURES_SETUP testenv LABELS e2e TIMEOUT 600
                                            RESOURCE_LOCK testenv-nodes COST ${SB_TEST_COST_testenv})
add_test(NAME testenv.down COMMAND ${PROJECT_SOURCE_DIR}/testenv/down.sh ${SB_TESTENV_DIR})
set_tests_properties(testenv.down PROPERTIES FIXTURES_CLEANUP testenv LABELS e2e TIMEOUT 120
                                              RESOURCE_LOCK testenv-nodes)

# The fixture `testenv-kubelets`: a second environment whose Slurm nodes have real kubelets
# (testenv/up.sh --kubelets: n1..n4 and kube-n5 for Slurm's n5), for the tests of the pod
# lifecycle on real nodes. Its tests hold RESOURCE_LOCK testenv-kubelet-nodes.
set(SB_TESTENV_KUBELETS_DIR ${CMAKE_BINARY_DIR}/testenv-kubelets)
set(SB_TESTENV_KUBELETS_FILE ${SB_TESTENV_KUBELETS_DIR}/env)
add_test(NAME testenv-kubelets.up
         COMMAND ${PROJECT_SOURCE_DIR}/testenv/up.sh --tries 2 --kubelets --external-kubelet
                 --run-dir ${SB_TESTENV_KUBELETS_DIR})
# Its slurmd nodes run `slurm-bridge epilog` as their Epilog (SB_EPILOG_BINARY: this build's
# binary, which must be built before the fixture starts).
set_tests_properties(testenv-kubelets.up PROPERTIES FIXTURES_SETUP testenv-kubelets LABELS e2e
                                                    TIMEOUT 600 RESOURCE_LOCK testenv-kubelet-nodes
                                                    COST ${SB_TEST_COST_testenv-kubelets}
                                                    ENVIRONMENT SB_EPILOG_BINARY=$<TARGET_FILE:slurm-bridge>)
add_test(NAME testenv-kubelets.down COMMAND ${PROJECT_SOURCE_DIR}/testenv/down.sh
                                            ${SB_TESTENV_KUBELETS_DIR})
set_tests_properties(testenv-kubelets.down PROPERTIES FIXTURES_CLEANUP testenv-kubelets LABELS e2e
                                                      TIMEOUT 120 RESOURCE_LOCK testenv-kubelet-nodes)

# The fixture `testenv-policy`: a third environment with kubelets (n1, n2 and kube-n3 for Slurm's
# n3) whose Slurm keeps accounts and decides by them (testenv/up.sh --accounting: MariaDB and
# slurmdbd, fair share and QOS priority, QOS preemption), for the tests of Slurm's policy through
# the bridge. Its tests hold RESOURCE_LOCK testenv-policy-nodes.
set(SB_TESTENV_POLICY_DIR ${CMAKE_BINARY_DIR}/testenv-policy)
set(SB_TESTENV_POLICY_FILE ${SB_TESTENV_POLICY_DIR}/env)
add_test(NAME testenv-policy.up
         COMMAND ${PROJECT_SOURCE_DIR}/testenv/up.sh --tries 2 --kubelets --nodes 2 --accounting
                 --run-dir ${SB_TESTENV_POLICY_DIR})
# As testenv-kubelets: the Epilog (this build's binary) and, where built, the DRA driver
# (CMakeLists.txt appends SB_DRA_DRIVER_BINARY to both).
set_tests_properties(testenv-policy.up PROPERTIES FIXTURES_SETUP testenv-policy LABELS e2e
                                                  TIMEOUT 600 RESOURCE_LOCK testenv-policy-nodes
                                                  COST ${SB_TEST_COST_testenv-policy}
                                                  ENVIRONMENT SB_EPILOG_BINARY=$<TARGET_FILE:slurm-bridge>)
add_test(NAME testenv-policy.down COMMAND ${PROJECT_SOURCE_DIR}/testenv/down.sh
                                          ${SB_TESTENV_POLICY_DIR})
set_tests_properties(testenv-policy.down PROPERTIES FIXTURES_CLEANUP testenv-policy LABELS e2e
                                                    TIMEOUT 120 RESOURCE_LOCK testenv-policy-nodes)

# The tests' own code (test binaries, sb_testing, the test DRA driver) is compiled for the
# compiler's speed: -Og -g1 instead of RelWithDebInfo's -O2 -g. The code under test (the
# libraries the binaries link) keeps -O2 -g, as do the benchmarks. Measured on
# scheduler_e2e_test.cc: 58.5 s of CPU at -O2 -g, 24.4 s at -Og -g1, its object 25 MB -> 7 MB;
# the test objects were 57% of a cold build's compile time. Not in the sanitized or fuzz builds,
# which choose their own (-O1 -gline-tables-only). SB_TEST_CXX_OPTIONS="" keeps the build type's.
set(SB_TEST_CXX_OPTIONS "-Og;-g1" CACHE STRING "Compile options of the tests' own code")
function(sb_test_code target)
  if(SB_TEST_CXX_OPTIONS AND NOT SB_SANITIZE AND NOT SB_FUZZ
     AND CMAKE_BUILD_TYPE MATCHES "^(RelWithDebInfo|Release)$")
    target_compile_options(${target} PRIVATE ${SB_TEST_CXX_OPTIONS})
  endif()
endfunction()

# sb_unit_test(<name> SOURCES ... LIBS ...): one GoogleTest binary, each test labelled `unit`.
function(sb_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  sb_set_warnings(${name})
  sb_test_code(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest_main)
  gtest_discover_tests(${name} PROPERTIES LABELS unit TIMEOUT 120 DISCOVERY_TIMEOUT 60)
endfunction()

# The e2e test binaries are built unless SB_E2E_TESTS=OFF (the sanitized build of
# scripts/sanitize.sh, which runs only the unit tests, leaves them out).
option(SB_E2E_TESTS "Build the end-to-end test binaries" ON)
# The e2e test binaries built even with SB_E2E_TESTS off: scripts/sanitize.sh builds
# admission_e2e_test sanitized, so that the webhook's server runs under ASan behind the real
# apiserver (test audit N5; scripts/test.sh runs it).
set(SB_SANITIZED_E2E_TESTS "" CACHE STRING "e2e test binaries built although SB_E2E_TESTS is off")

# sb_e2e_gtest(<name> SOURCES ... LIBS ... [FIXTURE testenv|testenv-kubelets|testenv-policy]
#              [TEST_PREFIX p] [BRIDGE]): a GoogleTest binary against the real daemons of the
# fixture's environment (default testenv). BRIDGE: it starts the slurm-bridge binary, which is
# built first. The tests find the checkout and the binary at run time (testing/paths.h): no
# absolute path is compiled in, so that ccache shares the objects between clones.
function(sb_e2e_gtest name)
  cmake_parse_arguments(ARG "BRIDGE" "FIXTURE;TEST_PREFIX" "SOURCES;LIBS" ${ARGN})
  if(NOT SB_E2E_TESTS AND NOT name IN_LIST SB_SANITIZED_E2E_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  sb_set_warnings(${name})
  sb_test_code(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest_main)
  if(ARG_BRIDGE)
    add_dependencies(${name} slurm-bridge)
  endif()
  if(ARG_FIXTURE STREQUAL "testenv-kubelets")
    set(env_file ${SB_TESTENV_KUBELETS_FILE})
    set(lock testenv-kubelet-nodes)
  elseif(ARG_FIXTURE STREQUAL "testenv-policy")
    set(env_file ${SB_TESTENV_POLICY_FILE})
    set(lock testenv-policy-nodes)
  else()
    set(ARG_FIXTURE testenv)
    set(env_file ${SB_TESTENV_FILE})
    set(lock testenv-nodes)
  endif()
  set(prefix "")
  if(ARG_TEST_PREFIX)
    set(prefix TEST_PREFIX ${ARG_TEST_PREFIX})
  endif()
  gtest_discover_tests(${name} ${prefix} PROPERTIES LABELS e2e
    FIXTURES_REQUIRED ${ARG_FIXTURE} TIMEOUT 600 RESOURCE_LOCK ${lock}
    COST ${SB_TEST_COST_${ARG_FIXTURE}} ENVIRONMENT SB_TESTENV=${env_file} DISCOVERY_TIMEOUT 60)
endfunction()

# sb_e2e_kubelet_gtest(<name> ...): as sb_e2e_gtest, against the environment with kubelets
# (fixture testenv-kubelets).
function(sb_e2e_kubelet_gtest name)
  sb_e2e_gtest(${name} FIXTURE testenv-kubelets ${ARGN})
endfunction()

# sb_e2e_policy_gtest(<name> ...): as sb_e2e_gtest, against the environment with accounting,
# fair share and QOS preemption (fixture testenv-policy).
function(sb_e2e_policy_gtest name)
  sb_e2e_gtest(${name} FIXTURE testenv-policy ${ARGN})
endfunction()

# sb_e2e_script(<name> <script> [args...]): a shell test against the real daemons.
function(sb_e2e_script name script)
  add_test(NAME ${name} COMMAND bash ${script} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS e2e FIXTURES_REQUIRED testenv TIMEOUT 600
    RESOURCE_LOCK testenv-nodes COST ${SB_TEST_COST_testenv} ENVIRONMENT SB_TESTENV=${SB_TESTENV_FILE})
endfunction()

# sb_e2e_policy_script(<name> <script> [args...]): a shell test against the environment of the
# fixture testenv-policy.
function(sb_e2e_policy_script name script)
  add_test(NAME ${name} COMMAND bash ${script} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS e2e FIXTURES_REQUIRED testenv-policy TIMEOUT 600
    RESOURCE_LOCK testenv-policy-nodes COST ${SB_TEST_COST_testenv-policy}
    ENVIRONMENT SB_TESTENV=${SB_TESTENV_POLICY_FILE})
endfunction()
