# Sourced by scripts/gpu-check.sh and scripts/gpu-figures.sh on a GPU machine:
# unpacks what scripts/gpu-carry.sh put into the carried folder
# (MEMTRAIN_CARRY, .gpu by default) and exports where it went:
# MEMTRAIN_DEPS_ROOT (Debian packages and Gloo's headers, for
# scripts/build-cuda.sh) and MEMTRAIN_DATA_PREFIX (the Brown corpus).
gpu_carry=${MEMTRAIN_CARRY:-.gpu}
if [[ -d $gpu_carry/debs ]]; then
  export MEMTRAIN_DEPS_ROOT=/tmp/memtrain-deps
  mkdir -p "$MEMTRAIN_DEPS_ROOT"
  for f in "$gpu_carry"/debs/*.deb; do dpkg -x "$f" "$MEMTRAIN_DEPS_ROOT"; done
  tar xzf "$gpu_carry/gloo.tgz" -C "$MEMTRAIN_DEPS_ROOT"
  # Debian's development links are absolute (libz.so -> /lib/.../libz.so.1.2.13):
  # point them into the unpacked tree, or the linker falls back to libz.a,
  # which a shared module cannot link.
  while IFS= read -r link; do
    target=$(readlink "$link")
    if [[ -e $MEMTRAIN_DEPS_ROOT$target ]]; then ln -sfn "$MEMTRAIN_DEPS_ROOT$target" "$link"; fi
  done < <(find "$MEMTRAIN_DEPS_ROOT" -type l -lname '/*')
  export MEMTRAIN_DATA_PREFIX=/tmp/memtrain-data
  mkdir -p "$MEMTRAIN_DATA_PREFIX" && tar xzf "$gpu_carry/brown.tgz" -C "$MEMTRAIN_DATA_PREFIX"
  echo "unpacked $(ls "$gpu_carry"/debs | wc -l) packages, Gloo's headers and the corpus from $gpu_carry"
fi
