#!/usr/bin/env bash
# Builds the .deb from a build folder and checks it: file list, dependencies, desktop entry and
# AppStream metadata (validated when the Debian validators are installed), the man pages, the
# license, lintian, that the packaged programs run from an unpacked copy, and (as root) that the
# package installs with apt-get, runs from /usr/bin and removes cleanly.
#   check_package.sh BUILD_DIR
set -euo pipefail
build="$1"
cd "$build"
cpack -G DEB > cpack.log 2>&1 || { cat cpack.log; exit 1; }
deb="$(ls -t tpstudio_*_*.deb | head -1)"
fail=0
check() { if eval "$2"; then echo "ok   $1"; else echo "FAIL $1"; fail=1; fi; }
files="$(dpkg-deb -c "$deb" | awk '{print $6}')"
for f in ./usr/bin/tpstudio ./usr/bin/tpstudio-cli ./usr/share/applications/tpstudio.desktop \
         ./usr/share/metainfo/io.github.tpstudio.TPStudio.metainfo.xml \
         ./usr/share/icons/hicolor/scalable/apps/tpstudio.svg ./usr/share/man/man1/tpstudio-cli.1.gz \
         ./usr/share/tpstudio/plans/index.json ./usr/share/tpstudio/plans/hardware/h100-sxm-8.json \
         ./usr/share/doc/tpstudio/copyright; do
  check "contains $f" "grep -qx '$f' <<< \"\$files\""
done
depends="$(dpkg-deb -f "$deb" Depends)"
for d in libqt6widgets6 libqt6svg6 libqcustomplot2.1-qt6 libopenblas0 libopenmpi3 libfmt9; do
  check "depends on $d" "grep -q '$d' <<< \"\$depends\""
done
recommends="$(dpkg-deb -f "$deb" Recommends)"
check "recommends openmpi-bin" "grep -q openmpi-bin <<< \"\$recommends\""
# Every dependency must be a package Debian has.
for p in $(tr ',' '\n' <<< "$depends" | sed 's/(.*//; s/|.*//' | tr -d ' '); do
  check "dependency $p exists in the archive" "apt-cache show '$p' > /dev/null 2>&1"
done
check "no build paths in the binaries" "! dpkg-deb --fsys-tarfile '$deb' | tar -xO ./usr/bin/tpstudio-cli | grep -aq '$PWD'"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch"
if command -v desktop-file-validate > /dev/null; then
  check "desktop-file-validate" "desktop-file-validate '$scratch/usr/share/applications/tpstudio.desktop'"
fi
if command -v appstreamcli > /dev/null; then
  check "appstreamcli validate" "appstreamcli validate --no-net --pedantic '$scratch/usr/share/metainfo/io.github.tpstudio.TPStudio.metainfo.xml' > '$scratch/as.log' 2>&1 || { cat '$scratch/as.log'; false; }"
fi
check "user guide and its screenshots installed" "test -s '$scratch/usr/share/doc/tpstudio/user-guide.md' && test -s '$scratch/usr/share/doc/tpstudio/screenshots/plan-dark.png'"
check "copyright names GPL-3+" "grep -q '^License: GPL-3+' '$scratch/usr/share/doc/tpstudio/copyright'"
check "AppStream license is GPL-3.0-or-later" "grep -q '<project_license>GPL-3.0-or-later</project_license>' '$scratch/usr/share/metainfo/io.github.tpstudio.TPStudio.metainfo.xml'"
check "man page renders" "zcat '$scratch/usr/share/man/man1/tpstudio-cli.1.gz' | grep -q '^.SS plan preview'"
check "packaged tpstudio-cli runs" "'$scratch/usr/bin/tpstudio-cli' plan validate llama-3.1-8b --tp 8 > /dev/null"
check "packaged tpstudio runs" "QT_QPA_PLATFORM=offscreen '$scratch/usr/bin/tpstudio' example --screenshot '$scratch/shot.png' > /dev/null 2>&1 && test -s '$scratch/shot.png'"
if command -v lintian > /dev/null; then
  check "lintian: no errors or warnings" "lintian --fail-on error,warning '$deb' > '$scratch/lintian.log' 2>&1 || { cat '$scratch/lintian.log'; false; }"
else
  echo "FAIL lintian is not installed (scripts/install-deps.sh installs it)"; fail=1
fi
# Installed for real, as a user installs it, then removed: only as root, and never over a tpstudio
# this test did not install.
if [ "$(id -u)" -ne 0 ]; then
  echo "skip install: needs root (apt-get install ./$deb)"
elif dpkg-query -W -f='${Status}' tpstudio 2>/dev/null | grep -q 'install ok installed'; then
  echo "skip install: a tpstudio package is installed already; this test does not replace it"
else
  remove() { DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq --purge tpstudio > /dev/null 2>&1 || true; }
  trap 'remove; rm -rf "$scratch"' EXIT
  # Its dependencies are installed already (scripts/install-deps.sh), so apt fetches nothing: the
  # simulation must install tpstudio alone. (apt's --no-download refuses a local .deb.)
  check "apt-get would install tpstudio alone" "test \"\$(apt-get install -s '$PWD/$deb' 2>/dev/null | grep '^Inst ' | cut -d' ' -f2 | tr '\n' ' ')\" = 'tpstudio '"
  check "apt-get install ./$deb" "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq '$PWD/$deb' > '$scratch/apt.log' 2>&1 || { cat '$scratch/apt.log'; false; }"
  check "installed tpstudio-cli runs" "/usr/bin/tpstudio-cli plan validate llama-3.1-8b --tp 8 > /dev/null"
  check "installed plans preview" "/usr/bin/tpstudio-cli plan preview example --plan /usr/share/tpstudio/plans/llama/sequence-parallel.json --tp 2 > /dev/null"
  check "installed tpstudio runs" "QT_QPA_PLATFORM=offscreen /usr/bin/tpstudio example --screenshot '$scratch/installed.png' > /dev/null 2>&1 && test -s '$scratch/installed.png'"
  check "man pages installed" "man -w tpstudio > /dev/null && man -w tpstudio-cli > /dev/null"
  remove
  check "removed cleanly" "! test -e /usr/bin/tpstudio-cli && ! test -e /usr/bin/tpstudio && ! test -e /usr/share/tpstudio"
fi
echo "package: $deb ($(du -h "$deb" | cut -f1))"
exit $fail
