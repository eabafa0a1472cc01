# Each folder under src/ is one layer, built as one target. A source may
# include headers only from its own layer and from the layers its target
# links, directly or through them; anything else (an upward or sideways
# include) stops CMake's configure step with the file and the include named.
# The targets' link lines are the one place the order is written.

function(_memtrain_layer_deps target out)
  set(seen ${target})
  set(queue ${target})
  while(queue)
    list(POP_FRONT queue current)
    get_target_property(type ${current} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(libs ${current} INTERFACE_LINK_LIBRARIES)
    else()
      get_target_property(libs ${current} LINK_LIBRARIES)
    endif()
    foreach(lib IN LISTS libs)
      if(lib MATCHES "^memtrain::(.+)$")
        set(dep memtrain_${CMAKE_MATCH_1})
        if(NOT dep IN_LIST seen)
          list(APPEND seen ${dep})
          list(APPEND queue ${dep})
        endif()
      endif()
    endforeach()
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()

# Every folder under src/ (and src/runtime/) whose CMakeLists.txt defines
# its layer's target memtrain_<folder> must be among the checked targets: a
# layer left out of the list would go unchecked, so the configure step stops.
function(_memtrain_require_every_layer)
  file(GLOB lists RELATIVE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/*/CMakeLists.txt
                                                     ${PROJECT_SOURCE_DIR}/src/runtime/*/CMakeLists.txt)
  foreach(list IN LISTS lists)
    get_filename_component(folder ${list} DIRECTORY)
    get_filename_component(name ${folder} NAME)
    if(NOT TARGET memtrain_${name})
      continue()
    endif()
    get_target_property(type memtrain_${name} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY" AND NOT memtrain_${name} IN_LIST ARGN)
      string(REPLACE ";" ", " checked "${ARGN}")
      message(FATAL_ERROR "src/${folder} builds the layer memtrain_${name}, which the layering check leaves out; "
                          "add it to memtrain_layers in CMakeLists.txt (checked now: ${checked})")
    endif()
  endforeach()
endfunction()

include(${CMAKE_CURRENT_LIST_DIR}/flag_names.cmake)

# The front ends: the layers that may name command-line flags.
set(_memtrain_front_ends memtrain_cli memtrain_python)

function(memtrain_check_layers)
  _memtrain_require_every_layer(${ARGN})
  foreach(target IN LISTS ARGN)
    get_target_property(dir ${target} SOURCE_DIR)
    file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}/src ${dir})
    set(layer_of_${folder} ${target})
  endforeach()
  foreach(target IN LISTS ARGN)
    _memtrain_layer_deps(${target} allowed)
    get_target_property(dir ${target} SOURCE_DIR)
    file(GLOB sources ${dir}/*.h ${dir}/*.cpp)
    foreach(source IN LISTS sources)
      if(NOT target IN_LIST _memtrain_front_ends)
        memtrain_refuse_flag_names(${source})
      endif()
      file(STRINGS ${source} lines REGEX "^#include \"")
      foreach(line IN LISTS lines)
        string(REGEX REPLACE "^#include \"([^\"]+)\".*$" "\\1" header "${line}")
        get_filename_component(header_folder ${header} DIRECTORY)
        if(header_folder STREQUAL "" OR NOT DEFINED layer_of_${header_folder})
          continue() # a header beside the source, or a third party's
        endif()
        set(layer ${layer_of_${header_folder}})
        if(NOT layer IN_LIST allowed)
          file(RELATIVE_PATH shown ${PROJECT_SOURCE_DIR} ${source})
          string(REPLACE ";" ", " allowed_shown "${allowed}")
          message(FATAL_ERROR "${shown} includes \"${header}\" from layer ${layer}, which ${target} does not "
                              "link; it may include from: ${allowed_shown}")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
