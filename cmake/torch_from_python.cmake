# LibTorch from a Python environment's `torch` wheel, and, for a CUDA wheel,
# a CUDA toolkit laid out from NVIDIA's PyPI wheels (nvidia-cuda-nvcc and its
# companions) so that no system-wide CUDA is needed.
#
# MEMTRAIN_PYTHON_EXECUTABLE names the environment's Python. Under
# `pip install .` (scikit-build-core) it is the Python pip runs, whose
# isolated build environment hides the environment's own packages behind
# PYTHONPATH; torch is asked with PYTHONPATH unset, so it is the torch of the
# environment the module is installed into. The CUDA compiler is looked for
# with PYTHONPATH as it is, so it may come from the isolated build
# environment (pyproject.toml's build requirements) or from the environment.
#
# Sets MEMTRAIN_TORCH_VERSION (e.g. 2.11.0+cu130), MEMTRAIN_TORCH_CUDA
# (e.g. 13.0, empty for a CPU wheel) and then runs find_package(Torch).

if(NOT MEMTRAIN_PYTHON_EXECUTABLE)
  if(Python_EXECUTABLE)
    set(MEMTRAIN_PYTHON_EXECUTABLE ${Python_EXECUTABLE})
  else()
    find_program(MEMTRAIN_PYTHON_EXECUTABLE NAMES python3 python REQUIRED)
  endif()
endif()

# Runs Python code in the environment torch is installed in (pip's isolation
# unset) or, with BUILD_ENVIRONMENT, as CMake's Python sees it.
function(_memtrain_python out code)
  cmake_parse_arguments(P "BUILD_ENVIRONMENT" "" "" ${ARGN})
  set(isolation --unset=PYTHONPATH --unset=PYTHONNOUSERSITE)
  if(P_BUILD_ENVIRONMENT)
    set(isolation "")
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env ${isolation} ${MEMTRAIN_PYTHON_EXECUTABLE} -c "${code}"
    OUTPUT_VARIABLE output
    ERROR_VARIABLE error
    RESULT_VARIABLE result
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(${out} "${output}" PARENT_SCOPE)
  set(${out}_ERROR "${error}" PARENT_SCOPE)
  set(${out}_RESULT "${result}" PARENT_SCOPE)
endfunction()

_memtrain_python(
  _torch_facts
  "import torch; print(torch.__version__); print(torch.utils.cmake_prefix_path); print(torch.version.cuda or '')")
if(NOT _torch_facts_RESULT EQUAL 0)
  message(
    FATAL_ERROR
      "memtrain: ${MEMTRAIN_PYTHON_EXECUTABLE} cannot import torch; memtrain builds against the "
      "LibTorch of a torch wheel (torch>=2.11; scripts/install-deps.sh makes such an environment) "
      "and MEMTRAIN_PYTHON_EXECUTABLE names its Python:\n${_torch_facts_ERROR}")
endif()
string(REPLACE "\n" ";" _torch_facts "${_torch_facts}")
list(GET _torch_facts 0 MEMTRAIN_TORCH_VERSION)
list(GET _torch_facts 1 _torch_prefix)
list(LENGTH _torch_facts _torch_fact_count)
set(MEMTRAIN_TORCH_CUDA "")
if(_torch_fact_count GREATER 2)
  list(GET _torch_facts 2 MEMTRAIN_TORCH_CUDA)
endif()
list(PREPEND CMAKE_PREFIX_PATH ${_torch_prefix})
message(STATUS "memtrain: torch ${MEMTRAIN_TORCH_VERSION} from ${MEMTRAIN_PYTHON_EXECUTABLE}")

if(MEMTRAIN_TORCH_CUDA AND NOT CUDA_TOOLKIT_ROOT_DIR)
  string(REGEX MATCH "^[0-9]+" _cuda_major ${MEMTRAIN_TORCH_CUDA})
  # The folders cu<major> of the nvidia namespace package: the one with nvcc
  # (the build requirements' under pip, else the environment's), and the
  # environment's, where torch's own dependencies put the headers of cuBLAS,
  # cuSPARSE and the rest.
  set(_folders "import nvidia, os; print(';'.join(os.path.join(p, 'cu${_cuda_major}') for p in nvidia.__path__ if ")
  _memtrain_python(_compiler "${_folders}os.path.exists(os.path.join(p, 'cu${_cuda_major}', 'bin', 'nvcc'))))"
                   BUILD_ENVIRONMENT)
  _memtrain_python(_environment "${_folders}os.path.isdir(os.path.join(p, 'cu${_cuda_major}', 'include'))))")
  set(_wheels "")
  if(_compiler)
    list(GET _compiler 0 _wheels)
  endif()
  if(NOT _wheels)
    # No compiler wheel: LibTorch's CMake files look for a system CUDA
    # (CUDA_TOOLKIT_ROOT_DIR, CUDA_HOME, nvcc on PATH), as on a GPU machine.
    message(STATUS "memtrain: torch is a CUDA ${MEMTRAIN_TORCH_CUDA} build and no CUDA ${_cuda_major} compiler wheel "
                   "is installed (nvidia-cuda-nvcc and its companions, which pyproject.toml names); looking for a "
                   "system CUDA toolkit")
  else()
    # The wheels keep every library under its versioned name only, and nvcc
    # finds its parts relative to the real path of its folder: copy bin/ and
    # nvvm/ (190 MB) into a toolkit in the build tree and link the rest, with
    # the unversioned library names the linker looks for. The compiler's own
    # headers and libraries come first: LibTorch's CMake files refuse a
    # cuda.h of another version than nvcc's.
    set(_toolkit ${CMAKE_BINARY_DIR}/cuda-toolkit)
    if(NOT EXISTS ${_toolkit}/bin/nvcc OR ${_wheels}/bin/nvcc IS_NEWER_THAN ${_toolkit}/bin/nvcc)
      file(REMOVE_RECURSE ${_toolkit})
      file(COPY ${_wheels}/bin ${_wheels}/nvvm DESTINATION ${_toolkit})
    endif()
    file(REMOVE_RECURSE ${_toolkit}/include ${_toolkit}/lib64)
    file(MAKE_DIRECTORY ${_toolkit}/include ${_toolkit}/lib64)
    list(REMOVE_ITEM _environment ${_wheels})
    foreach(_folder IN ITEMS ${_wheels} ${_environment})
      file(GLOB _headers RELATIVE ${_folder}/include ${_folder}/include/*)
      foreach(_header IN LISTS _headers)
        if(NOT EXISTS ${_toolkit}/include/${_header})
          file(CREATE_LINK ${_folder}/include/${_header} ${_toolkit}/include/${_header} SYMBOLIC)
        endif()
      endforeach()
      file(GLOB _libs ${_folder}/lib/*)
      foreach(_lib IN LISTS _libs)
        get_filename_component(_name ${_lib} NAME)
        set(_names ${_name})
        if(_name MATCHES "^(lib[^.]+)\\.so\\.")
          list(APPEND _names ${CMAKE_MATCH_1}.so)
        endif()
        foreach(_link IN LISTS _names)
          if(NOT EXISTS ${_toolkit}/lib64/${_link})
            file(CREATE_LINK ${_lib} ${_toolkit}/lib64/${_link} SYMBOLIC)
          endif()
        endforeach()
      endforeach()
    endforeach()
    set(CUDA_TOOLKIT_ROOT_DIR ${_toolkit})
    set(CMAKE_CUDA_COMPILER ${_toolkit}/bin/nvcc)
    message(STATUS "memtrain: a CUDA toolkit in ${_toolkit} from the wheels in ${_wheels} ${_environment}")
  endif()
endif()
if(MEMTRAIN_TORCH_CUDA AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
  # Without a GPU LibTorch's CMake files would pick eleven architectures;
  # memtrain's CUDA path is C++ on LibTorch, so one is enough to compile it.
  set(ENV{TORCH_CUDA_ARCH_LIST} 9.0)
endif()
# LibTorch picks its CUDA architectures itself and warns about CMake's default.
cmake_policy(SET CMP0104 OLD)
find_package(Torch REQUIRED)
