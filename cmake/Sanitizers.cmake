# SPDX-License-Identifier: Apache-2.0
#
# SB_SANITIZE=ON: every target of the build is compiled and linked with AddressSanitizer and
# UndefinedBehaviorSanitizer; an undefined-behaviour report aborts the process (a test fails on
# it, it is not only printed). Debug info stays on (RelWithDebInfo) for the reports' stacks.
#
# SB_FUZZ=ON (clang only): adds fuzz/, one libFuzzer target per family of decoders of untrusted
# input. Every target of the build is compiled with coverage instrumentation
# (-fsanitize=fuzzer-no-link), so that the libraries the fuzz targets link are instrumented too;
# the unit tests of the same build run with it, unaffected (the sanitizer runtime provides the
# hooks). Meant together with SB_SANITIZE=ON: scripts/fuzz.sh and scripts/sanitize.sh configure
# build-asan/ that way.
option(SB_SANITIZE "Build everything with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(SB_FUZZ "Build the libFuzzer targets in fuzz/ (clang only)" OFF)

if(SB_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    # -fsanitize=function (in clang's "undefined") fails the Asio coroutines in the backend
    # ("Cannot represent a difference across sections", llvm-project#49689, #54153).
    add_compile_options(-fno-sanitize=function)
    # OSS-Fuzz's flags: line tables are all the reports' stacks need, and -O1 keeps them exact;
    # both halve the compile time of the Beast translation units against -O2 -g.
    add_compile_options(-O1 -gline-tables-only)
  endif()
endif()

if(SB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "SB_FUZZ=ON needs clang (scripts/sanitize.sh sets CC and CXX to one), not "
                        "${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
