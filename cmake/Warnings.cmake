# SPDX-License-Identifier: Apache-2.0
# sb_set_warnings(<target>): the project's warning set, errors with -DSB_WERROR=ON (CI).
function(sb_set_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Woverloaded-virtual -Wconversion -Wsign-conversion -Wdouble-promotion
    -Wformat=2 -Wimplicit-fallthrough
    # designated initializers leave the rest default on purpose
    -Wno-missing-field-initializers
    # GCC 12 false positive on Asio coroutine frames (operator new/delete of awaitable_frame)
    -Wno-mismatched-new-delete)
  if(SB_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
