# Run by ctest: every CMake file of the project must be as cmake-format (with
# the repository's .cmake-format.py) writes it.
# Usage: cmake -DCMAKE_FORMAT=... -DSOURCE_DIR=... -P check_cmake_format.cmake
file(GLOB_RECURSE lists ${SOURCE_DIR}/src/CMakeLists.txt ${SOURCE_DIR}/tests/CMakeLists.txt
     ${SOURCE_DIR}/bench/CMakeLists.txt)
file(GLOB modules ${SOURCE_DIR}/cmake/*.cmake)
set(files ${SOURCE_DIR}/CMakeLists.txt ${lists} ${modules})
set(differ "")
foreach(file IN LISTS files)
  execute_process(
    COMMAND ${CMAKE_FORMAT} --check ${file}
    RESULT_VARIABLE result
    OUTPUT_QUIET ERROR_QUIET
    WORKING_DIRECTORY ${SOURCE_DIR})
  if(NOT result EQUAL 0)
    list(APPEND differ ${file})
  endif()
endforeach()
if(differ)
  list(JOIN differ "\n  " text)
  message(FATAL_ERROR "These CMake files differ from .cmake-format.py's layout:\n  ${text}\nrun: "
                      "git ls-files CMakeLists.txt '*/CMakeLists.txt' '*.cmake' | xargs ${CMAKE_FORMAT} -i")
endif()
list(LENGTH files count)
message(STATUS "${count} CMake files follow .cmake-format.py")
