#!/usr/bin/env bash
# The README's test command on a really fresh Debian 12, not on this machine with what earlier work
# left on it: debootstrap lays a minbase bookworm root (no CUDA toolkit: CUDA parts are optional),
# the committed tree (git archive HEAD) goes into it, and in a chroot it runs
#   TP_SKIP_TRANSFORMERS=1 bash scripts/test.sh      install-deps, configure, build, every test suite
# (the pinned Python's 5.6 GB download is left out: the Transformers checks report Skipped there).
# Run it as root before resolving anything that touches dependencies.
#
#   bash scripts/fresh-machine.sh            the whole ctest
#   bash scripts/fresh-machine.sh --quick    install-deps, configure, build, the Qt-free suites
#   options: --root DIR (default /var/tmp/tpstudio-fresh; made anew, never reused), --keep (leave the
#            root), --cold (do not share this machine's ccache: the build then takes its full time)
# The compiler cache is shared by default: it cannot hide a missing package (a missing header fails
# the preprocessor before any cache look-up, a missing library fails the link, which is not cached).
# The log is ROOT.log; the last lines are ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
src="$(pwd)"
root=/var/tmp/tpstudio-fresh
quick=0 keep=0 cold=0
usage="usage: bash scripts/fresh-machine.sh [--quick] [--keep] [--cold] [--root DIR]"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --keep) keep=1 ;;
    --cold) cold=1 ;;
    --root) [ $# -ge 2 ] && [ -n "$2" ] || { echo "$usage" >&2; exit 2; }; root=$2; shift ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine: debootstrap and chroot need root" >&2; exit 1; }
case "$root" in /|/usr|/var|/tmp|/var/tmp|/home|/root|"$src"*) echo "fresh-machine: --root $root: not a folder to lay a system in" >&2; exit 1 ;; esac
log="$root.log"

mounted() { awk -v r="$root" '$2 == r || index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r; }
# Every process whose root is the chroot (apt and dpkg go on after a Ctrl-C otherwise).
in_root() { local p; for p in /proc/[0-9]*; do [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/}"; done; }
cleanup() {
  local m
  # shellcheck disable=SC2046
  kill -9 $(in_root) 2>/dev/null || true
  for m in $(mounted); do umount -l "$m" 2>/dev/null || true; done
  if [ -n "$(mounted)" ]; then
    echo "fresh-machine: $root still has mounts; left in place" >&2
  elif [ "$keep" = 0 ]; then
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -e "$root" ]; then
  [ -z "$(mounted)" ] || { echo "fresh-machine: $root has mounts (another run?); unmount them first" >&2; exit 1; }
  rm -rf --one-file-system "$root"
fi
command -v debootstrap > /dev/null || {
  echo "fresh-machine: installing debootstrap (this script's tool, not the project's)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap > /dev/null
}
# The mirror this machine's apt uses (deb822 or one-line sources), Debian's own by default.
mirror=$(grep -hoE '(URIs:|^deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
         | head -1 | awk '{print $2}' || true)
mirror=${mirror:-http://deb.debian.org/debian}
start=$(date +%s)
echo "fresh-machine: debootstrap --variant=minbase bookworm $root $mirror (log: $log)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$log" 2>&1 || { tail -5 "$log"; exit 1; }
echo "fresh-machine: minbase laid in $(( $(date +%s) - start )) s: $(chroot "$root" dpkg-query -W | wc -l) packages"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
# The same suites as this machine's apt (security updates included), else bookworm and its updates.
if ls /etc/apt/sources.list.d/*.sources > /dev/null 2>&1; then
  rm -f "$root/etc/apt/sources.list"
  for f in /etc/apt/sources.list.d/*.sources; do cp "$f" "$root/etc/apt/sources.list.d/"; done
fi

# At the same path as here, so that the shared compiler cache's entries (keyed by the folder) apply.
mkdir -p "$root$src" "$root/root/.cache/ccache"
git archive HEAD | tar -x -C "$root$src"
echo "fresh-machine: the tree of $(git rev-parse --short HEAD) in $root$src"
for m in proc sys dev dev/pts dev/shm; do
  if mountpoint -q "/$m"; then mkdir -p "$root/$m" && mount --bind "/$m" "$root/$m"; fi
done
ccache_dir=$(ccache -k cache_dir 2>/dev/null || true)
if [ "$cold" = 0 ] && [ -n "$ccache_dir" ] && [ -d "$ccache_dir" ]; then
  mount --bind "$ccache_dir" "$root/root/.cache/ccache"
  echo "fresh-machine: sharing the compiler cache $ccache_dir (--cold does not)"
fi

if [ "$quick" = 1 ]; then
  inside='bash scripts/install-deps.sh && cmake --preset dev -DTP_ENABLE_CUDA=OFF && cmake --build --preset dev &&
          ctest --preset dev -j "$(nproc)" -R "^(tst_status|tst_config|tst_safetensors|tst_model|tst_plan|tst_shard|tst_cost|tst_engine|tst_backend_ops|tst_cli|engine_is_qt_free|executor_has_no_math)$"'
else
  inside='TP_SKIP_TRANSFORMERS=1 bash scripts/test.sh'
fi
echo "fresh-machine: chroot: $inside"
# In the background and waited for, so that Ctrl-C reaches the trap at once (cleanup ends the chroot's processes).
set +e
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 CI="${CI:-}" /bin/bash -c "cd '$src' && $inside" > >(tee -a "$log") 2>&1 &
wait $!
rc=$?
set -e
echo "fresh-machine: exit $rc after $(( $(date +%s) - start )) s (debootstrap, install-deps, build, tests)"
exit "$rc"
