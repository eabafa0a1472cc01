# The layers below the front ends know no command line: a string in their
# code that holds a flag ("--budget") stops the configure step, naming the
# file and the line. A front end (the CLI, the Python module) maps what a
# lower layer reports to its own flags. Run alone (cmake -P) on one file,
# MEMTRAIN_FLAG_CHECK_FILE, it checks that file.

function(memtrain_refuse_flag_names source)
  file(STRINGS ${source} lines REGEX "\"[^\"]*--[a-z][^\"]*\"")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*//")
      continue() # a comment
    endif()
    string(STRIP "${line}" shown_line)
    message(FATAL_ERROR "${source} holds a command-line flag in a layer below the front ends: ${shown_line}\n"
                        "Name the option in words there; the CLI names its flag.")
  endforeach()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND MEMTRAIN_FLAG_CHECK_FILE)
  memtrain_refuse_flag_names(${MEMTRAIN_FLAG_CHECK_FILE})
endif()
