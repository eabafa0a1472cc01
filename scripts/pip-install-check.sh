#!/usr/bin/env bash
# A PyTorch user's install, as a user who is not root: `pip install .` (as pip
# runs it: a wheel built in an isolated environment, then installed) into a
# fresh virtual environment that has torch and transformers, then the README's
# Python example for a few steps; then the same wheel, installed into another
# fresh environment without compiling, runs the example there.
#
# The fresh environment sees torch and transformers (and what they need) of
# the environment scripts/install-deps.sh made, through a .pth file naming a
# folder of links to exactly those packages; nothing else of that
# environment. The build gets its tools from PyPI through pip (the build
# requirements of pyproject.toml), and finds none of the system's optional
# libraries (CMake, Ninja, pkg-config and ccache are hidden from its PATH,
# CMake's pkg-config, zlib and nlohmann-json packages are disabled), so it
# leaves out what needs them, as on a machine with only a C++ compiler added.
#
# MEMTRAIN_VENV: the environment with torch (default /opt/memtrain/venv);
# MEMTRAIN_KEEP_PIP_CHECK=1 keeps the folder it works in.
# Prints the module's build time from an empty build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
source_env=${MEMTRAIN_VENV:-/opt/memtrain/venv}
user=memtrain-pip

work=$(mktemp -d /tmp/memtrain-pip.XXXXXX)
trap '[ -n "${MEMTRAIN_KEEP_PIP_CHECK:-}" ] || rm -rf "$work"' EXIT
mkdir "$work/src"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$work/src"

# torch, transformers and what they need, as links in one folder.
"$source_env/bin/python" - "$work/packages" <<'PY'
import importlib.metadata as md, os, re, sys
out = sys.argv[1]
os.makedirs(out)
seen, todo = set(), ["torch", "transformers"]
while todo:
    name = re.split(r"[ ;<>=!~\[(]", todo.pop())[0].lower().replace("_", "-")
    if name in seen:
        continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue  # an extra's, not installed
    seen.add(name)
    todo += [r for r in (dist.requires or []) if "extra ==" not in r]
    base = dist.locate_file("")
    for f in dist.files or []:
        top = f.parts[0]
        if top == ".." or top == "__pycache__" or os.path.exists(os.path.join(out, top)):
            continue
        os.symlink(os.path.join(base, top), os.path.join(out, top))  # its packages and its .dist-info
print("pip-install-check: the environment sees", ", ".join(sorted(seen)))
PY

# A Python of the same version that a user who is not root can run: the
# system's, where the environment's own lies under /root.
version=$("$source_env/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
base_python=/usr/bin/python$version
[ -x "$base_python" ] || base_python=$("$source_env/bin/python" -c 'import sys, os; print(os.path.join(sys.base_prefix, "bin", "python3"))')

# The system's tools, without CMake, Ninja, ccache and pkg-config: pip
# brings the first two; the build finds none of the optional libraries.
mkdir "$work/bin"
for tool in /usr/bin/* /bin/*; do
  case "$(basename "$tool")" in
    cmake | ctest | cpack | ninja | ccache | pkg-config | pkgconf | *-pkg-config) ;;
    *) [ -e "$work/bin/$(basename "$tool")" ] || ln -s "$tool" "$work/bin/$(basename "$tool")" ;;
  esac
done

if [ "$(id -u)" = 0 ]; then
  id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
  chown -R "$user" "$work"
  as_user=(runuser -u "$user" --)
else
  as_user=()
fi

# The README's Python example, 3 steps instead of 30.
awk '/^From Python/ {f = 1} f && /^```python/ {p = 1; next} p && /^```/ {exit} p' README.md |
  sed 's/range(30)/range(3)/' >"$work/example.py"
grep -q "memtrain.Module" "$work/example.py"

"${as_user[@]}" env -i HOME="$work/home" PATH="$work/bin" TMPDIR="$work" \
  MEMTRAIN_DATA_PREFIX="${MEMTRAIN_DATA_PREFIX:-/usr/local/share/memtrain}" \
  bash -euo pipefail -c '
  cd "$1"
  mkdir -p home
  "$2" -m venv venv
  site=$(venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")
  echo "$1/packages" >"$site/torch-environment.pth"
  venv/bin/python -m pip install -q --no-cache-dir --upgrade pip  # -C needs pip 23.1
  venv/bin/python -c "import torch; print(\"pip-install-check: torch\", torch.__version__)"
  # What a machine without the system packages finds: no zlib, no
  # nlohmann-json (its wheel instead), no pkg-config, no ccache.
  as_a_bare_machine=(-C cmake.define.CMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON
    -C cmake.define.CMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON
    -C cmake.define.CMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON -C cmake.define.MEMTRAIN_CCACHE=OFF)
  # `pip install .` is pip building a wheel in an isolated environment and
  # installing it: done here in its two halves, so that the other
  # environment below installs the same wheel. (pip makes a new isolated
  # environment for every build, and a second build compiled everything
  # again: 8 minutes on 2 cores.)
  start=$(date +%s)
  venv/bin/python -m pip wheel -q --no-cache-dir --no-deps -w wheels \
    "${as_a_bare_machine[@]}" -C build-dir="$1/build" ./src
  venv/bin/python -m pip install -q --no-index --no-deps wheels/memtrain-*.whl
  echo "pip-install-check: pip install . took $(( $(date +%s) - start )) s"
  # Built without the libraries it was not given: each part left out.
  for part in CBC TURBOJPEG ZLIB GLOO; do
    grep -q "MEMTRAIN_HAS_$part=0" build/compile_commands.json ||
      { echo "pip-install-check: the build did not leave out what needs $part" >&2; exit 1; }
  done
  echo "pip-install-check: left out the parts needing CBC, libjpeg-turbo, zlib and Gloo"
  (cd home && ../venv/bin/python -c "import memtrain; print(\"pip-install-check: memtrain from\", memtrain.__file__)" &&
    ../venv/bin/python ../example.py)
  # The wheel installs into another environment with the same torch, compiling nothing.
  "$2" -m venv other
  echo "$1/packages" >"$(other/bin/python -c "import sysconfig; print(sysconfig.get_paths()[\"purelib\"])")/torch-environment.pth"
  PATH=/nonexistent other/bin/python -m pip install -q --no-index --no-deps wheels/memtrain-*.whl
  (cd home && ../other/bin/python ../example.py)
  echo "pip-install-check: the wheel $(basename wheels/memtrain-*.whl) trained in another environment"
  ' _ "$work" "$base_python"
echo "pip-install-check: passed"
