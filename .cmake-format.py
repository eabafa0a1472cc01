# The layout of memtrain's CMake files (cmake-format, from PyPI's cmakelang,
# installed into the project's environment by scripts/install-deps.sh).
# tests/CMakeLists.txt checks it: CMakeFilesFollowCmakeFormat.
with section("format"):
    line_width = 120
    tab_size = 2
    max_subgroups_hwrap = 3
    max_pargs_hwrap = 12
    dangle_parens = False
    command_case = "lower"
    keyword_case = "unchanged"

with section("markup"):
    enable_markup = False

# memtrain's own functions, so their keywords group their arguments.
with section("parse"):
    additional_commands = {
        "memtrain_runtime_layer": {"pargs": 1, "kwargs": {"SOURCES": "*", "LINKS": "*"}},
        "memtrain_test": {"pargs": 1, "kwargs": {"SOURCES": "*", "LIBS": "*"}},
        "memtrain_runtime_tests": {"pargs": "1+"},
    }
