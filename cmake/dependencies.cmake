# The libraries memtrain's layers link, and which parts need each.
#
# nlohmann-json (header-only) is needed by core: the system's CMake package,
# else the headers of PyPI's nlohmann-json wheel in CMake's Python (pip's
# build environment has it: pyproject.toml's build requirements).
#
# The others serve parts `import memtrain` never uses: zlib and libjpeg-turbo
# the CLI's datasets, COIN-OR CBC the graph planner, Gloo's headers the CLI's
# own ranks. With MEMTRAIN_LEAVE_OUT_MISSING (pip's build), one not found
# leaves its part out: the part's functions are still there and refuse by
# name, saying what to install (MEMTRAIN_HAS_<NAME> is 0 in its sources).
# Without it (the test suite's build), a missing one is an error.

option(MEMTRAIN_LEAVE_OUT_MISSING "Leave out the parts whose libraries are not found, instead of failing" OFF)

find_package(nlohmann_json 3 QUIET)
if(NOT nlohmann_json_FOUND AND MEMTRAIN_PYTHON_EXECUTABLE)
  execute_process(
    COMMAND
      ${MEMTRAIN_PYTHON_EXECUTABLE} -c
      "import importlib.util as u, os; s = u.find_spec('nlohmann_json'); print(os.path.join(list(s.submodule_search_locations)[0], 'include'))"
    OUTPUT_VARIABLE _memtrain_json_include
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT EXISTS "${_memtrain_json_include}/nlohmann/json.hpp")
    message(FATAL_ERROR "memtrain: nlohmann-json not found; install it (Debian: nlohmann-json3-dev; "
                        "pip: nlohmann-json, in the Python that builds memtrain)")
  endif()
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
                                                                "${_memtrain_json_include}")
  message(STATUS "memtrain: nlohmann-json from ${_memtrain_json_include}")
elseif(NOT nlohmann_json_FOUND)
  find_package(nlohmann_json 3 REQUIRED)
endif()

# memtrain_optional(<target> <NAME> <found> <part> <install>): defines
# MEMTRAIN_HAS_<NAME> on <target> as whether <found>; a part not found fails
# the configuration unless MEMTRAIN_LEAVE_OUT_MISSING.
function(memtrain_optional target name found part install)
  if(found)
    target_compile_definitions(${target} PRIVATE MEMTRAIN_HAS_${name}=1)
    return()
  endif()
  if(NOT MEMTRAIN_LEAVE_OUT_MISSING)
    message(FATAL_ERROR "memtrain: ${part} needs ${install}, not found "
                        "(or configure with -DMEMTRAIN_LEAVE_OUT_MISSING=ON to build without it)")
  endif()
  target_compile_definitions(${target} PRIVATE MEMTRAIN_HAS_${name}=0)
  message(STATUS "memtrain: left out ${part}: ${install} not found")
endfunction()

if(MEMTRAIN_LEAVE_OUT_MISSING)
  find_package(ZLIB QUIET)
  find_package(PkgConfig QUIET)
else()
  find_package(ZLIB REQUIRED)
  find_package(PkgConfig REQUIRED)
endif()
