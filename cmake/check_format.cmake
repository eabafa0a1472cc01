# Run by ctest: every C++ source and header under src/, tests/ and bench/
# must be as clang-format (with the repository's .clang-format) writes it.
# Usage: cmake -DCLANG_FORMAT=... -DSOURCE_DIR=... -P check_format.cmake
file(GLOB_RECURSE sources ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/src/*.h ${SOURCE_DIR}/tests/*.cpp
     ${SOURCE_DIR}/tests/*.h ${SOURCE_DIR}/bench/*.cpp ${SOURCE_DIR}/bench/*.h)
list(LENGTH sources count)
if(count EQUAL 0)
  message(FATAL_ERROR "no sources found under ${SOURCE_DIR}")
endif()
execute_process(
  COMMAND ${CLANG_FORMAT} --dry-run --Werror ${sources}
  RESULT_VARIABLE result
  ERROR_VARIABLE errors
  WORKING_DIRECTORY ${SOURCE_DIR})
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${errors}\nSources differ from .clang-format's style; run: "
                      "git ls-files '*.cpp' '*.h' | xargs ${CLANG_FORMAT} -i")
endif()
message(STATUS "${count} sources follow .clang-format")
