# Run at build time (cmake -P): writes OUT, a header defining KORCH_GIT_DESCRIBE as
# `git describe --always --dirty` of SRC (empty outside a git checkout), and rewrites it only when
# the text changes, so artifacts name the commit the build was made from (a configure-time stamp
# went stale with every commit after it) and an unchanged commit rebuilds nothing.
execute_process(COMMAND git describe --always --dirty WORKING_DIRECTORY "${SRC}"
                OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(text "#define KORCH_GIT_DESCRIBE \"${describe}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
