#!/usr/bin/env python3
"""Does scripts/install-deps.sh install everything a build used? (ctest install_deps_cover_build)

  python3 scripts/check-deps.py --build build/dev [--install-deps FILE] [--self-test]

A green build on a machine that had a package from earlier work proves nothing about a fresh one.
This maps every file the configured and built tree actually used to the Debian package that owns it
(dpkg's own file lists, as `dpkg -S` reads them):
  libraries  what `ldd` resolves for every ELF executable and shared library in the build folder;
  headers    every header the compiler read (`ninja -t deps`);
  CMake      every file or package-config folder in CMakeCache.txt (find_package, find_library,
             find_program, pkg-config results, the compilers and CMake itself);
  tools      the programs the build ran (the first word of each command in `ninja -t commands`) and
             the programs ctest runs (CTestTestfile.cmake).
Each owner must be installed by install-deps.sh: one of its packages, or a dependency (Depends or
Pre-Depends, through alternatives and virtual packages) of one, or part of every Debian system
(Essential or Priority: required, and their dependencies: what debootstrap --variant=minbase lays).
Files no package owns are allowed only in the CUDA toolkit (optional, not from Debian: /usr/local/cuda*,
and the CUDA compiler CMake found wherever it lies, e.g. a wrapper /usr/local/bin/nvcc that execs the
toolkit's) and the source and build folders (the pinned Python's venv resolves to Debian's python3);
anything else fails too.

--self-test (the test of the test) runs this script again on copies of install-deps.sh with one
entry removed: removing a package that owns a used file (ocl-icd-opencl-dev: oneDNN's CMake package
needs libOpenCL.so; nlohmann-json3-dev: headers only; libdnnl-dev; ninja-build: a tool) must fail
naming that package, and removing one another entry depends on (qt6-base-dev-tools, a dependency of
qt6-base-dev) must still pass; a copy of CMakeCache.txt naming an unowned wrapper outside
/usr/local/cuda as the CUDA compiler must pass, and naming it under another key must fail. Exit codes: 0 covered, 1 a file's package is not covered or bad input
(named), 2 usage.
"""
import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DPKG = "/var/lib/dpkg"
# Files no Debian package owns that a build may use: the optional CUDA toolkit, under its own folder
# or as the CUDA compiler CMake found (CMakeCache keys below), which may be a wrapper elsewhere.
CUDA_TOOLKIT = "the CUDA toolkit (optional, not a Debian package)"
UNOWNED_OK = [(re.compile(r"^/usr/local/cuda(-[0-9.]+)?/"), CUDA_TOOLKIT)]
CUDA_COMPILER_KEYS = ("CMAKE_CUDA_COMPILER", "CUDAToolkit_NVCC_EXECUTABLE")


def fail(msg):
    print(f"check-deps: {msg}", file=sys.stderr)
    sys.exit(1)


# --- dpkg's database ------------------------------------------------------------------------------

def read_status():
    """Installed packages: name -> {depends: [[alternatives]], provides: [...], base: bool}."""
    pkgs = {}
    with open(os.path.join(DPKG, "status"), encoding="utf-8", errors="replace") as f:
        text = f.read()
    for para in text.split("\n\n"):
        fields, key = {}, None
        for line in para.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name or "install ok installed" not in fields.get("Status", ""):
            continue

        def names(value):
            return [[re.sub(r"[:(].*$", "", alt.strip()).strip() for alt in group.split("|")]
                    for group in value.split(",") if group.strip()]
        pkgs[name] = {
            "depends": names(fields.get("Depends", "")) + names(fields.get("Pre-Depends", "")),
            "provides": [g[0] for g in names(fields.get("Provides", ""))],
            "base": fields.get("Essential") == "yes" or fields.get("Priority") == "required",
        }
    return pkgs


def closure(roots, pkgs):
    """Every installed package that installing `roots` brings: their dependencies, transitively."""
    providers = collections.defaultdict(set)
    for name, p in pkgs.items():
        providers[name].add(name)
        for v in p["provides"]:
            providers[v].add(name)
    seen, todo = set(), [r for r in roots if r in pkgs]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for group in pkgs[name]["depends"]:
            for alt in group:  # any installed alternative may be the one that satisfies it
                todo.extend(providers.get(alt, ()))
    return seen


def file_owners():
    """Path -> owning packages, from dpkg's file lists (what `dpkg -S` reads)."""
    owners = collections.defaultdict(set)
    for lst in glob.glob(os.path.join(DPKG, "info", "*.list")):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        with open(lst, encoding="utf-8", errors="replace") as f:
            for line in f:
                owners[line.rstrip("\n")].add(pkg)
    return owners


def names(path):
    """The files a path stands for, each as the names dpkg may list it under (/usr merged or not):
    the path itself (a symbolic link in a -dev package, say) and the file it resolves to."""
    out = []
    for p in dict.fromkeys((os.path.normpath(path), os.path.realpath(path))):
        m = re.match(r"^/usr(/(?:lib|lib64|bin|sbin)/.*)$", p)
        twin = m.group(1) if m else ("/usr" + p if re.match(r"^/(lib|lib64|bin|sbin)/", p) else p)
        out.append(list(dict.fromkeys((p, twin))))
    return out


# --- what the build used --------------------------------------------------------------------------

def is_elf(path):
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except OSError:
        return False
    # ELF, and an executable or shared object (e_type 2 or 3), not a relocatable .o
    return head[:4] == b"\x7fELF" and len(head) == 18 and head[16] in (2, 3)


def used_files(build, cache):
    """(path, how it was used) for every file outside the source and build folders the build used,
    and the paths CMakeCache names as the CUDA compiler."""
    used, cuda_compilers = [], set()
    for dirpath, dirs, files in os.walk(build):
        dirs[:] = [d for d in dirs if d not in ("CMakeFiles", "_CPack_Packages")]
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not is_elf(path):
                continue
            rel = os.path.relpath(path, build)
            run = subprocess.run(["ldd", path], capture_output=True, text=True, timeout=60)
            for line in run.stdout.splitlines():
                m = re.match(r"^\s*(\S+) => (/\S+)", line) or re.match(r"^\s*(/\S+) \(0x", line)
                if m:
                    used.append((m.group(m.lastindex), f"library of {rel}"))
                elif "=> not found" in line:
                    used.append((line.split()[0], f"library of {rel} (not found)"))
    ninja = shutil.which("ninja") or shutil.which("ninja-build")
    if not ninja or not os.path.exists(os.path.join(build, "build.ninja")):
        fail(f"{build} is not a Ninja build folder (the presets use Ninja)")
    deps = subprocess.run([ninja, "-C", build, "-t", "deps"], capture_output=True, text=True, timeout=300).stdout
    for line in deps.splitlines():
        if line.startswith("    /"):
            used.append((line.strip(), "header"))
    cmds = subprocess.run([ninja, "-C", build, "-t", "commands"], capture_output=True, text=True, timeout=300).stdout
    for line in cmds.splitlines():
        for part in line.split("&&"):
            # the program and what it launches (cmake -E env … ccache … c++), up to the first option
            for w in part.split():
                if w.startswith("-"):
                    break
                if w.startswith("/"):
                    used.append((w, "tool the build ran"))
    source = ROOT  # the project's own files: the source folder this build was configured from
    with open(cache, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.+-]+):(FILEPATH|PATH|STRING|INTERNAL)=(.*)$", line.rstrip("\n"))
            if not m:
                continue
            key, _, value = m.groups()
            if key == "CMAKE_HOME_DIRECTORY":
                source = value
                continue
            if key in CUDA_COMPILER_KEYS and value.startswith("/"):
                cuda_compilers.add(os.path.normpath(value))
            for v in value.split(";"):
                if not v.startswith("/") or not os.path.exists(v):
                    continue
                if os.path.isdir(v):  # a package's CMake config folder: the config files in it
                    if key.endswith("_DIR"):
                        for c in glob.glob(os.path.join(v, "*onfig.cmake")):  # FooConfig.cmake, foo-config.cmake
                            used.append((c, f"CMake package {key}"))
                    continue
                used.append((v, f"CMakeCache {key}"))
    for ctest_file in glob.glob(os.path.join(build, "**", "CTestTestfile.cmake"), recursive=True):
        with open(ctest_file, encoding="utf-8", errors="replace") as f:
            for m in re.finditer(r'add_test\(\[=\[([^\]]+)\]=\]\s+"([^"]+)"', f.read()):
                prog = m.group(2) if m.group(2).startswith("/") else (shutil.which(m.group(2)) or m.group(2))
                used.append((prog, f"program of test {m.group(1)}"))
    # The project's own files: its source folder (the one this build was configured from) and the build.
    inside = tuple(os.path.realpath(d) + os.sep for d in (source, build))
    outside = [(p, how) for p, how in used if not os.path.realpath(p).startswith(inside) and not p.startswith(inside)]
    return outside, cuda_compilers


def check(build, install_deps, cache):
    listed = subprocess.run(["bash", install_deps, "--list"], capture_output=True, text=True, timeout=60)
    if listed.returncode != 0:
        fail(f"{install_deps} --list failed: {listed.stderr.strip()[:300]}")
    roots = listed.stdout.split()
    pkgs = read_status()
    not_installed = [r for r in roots if r not in pkgs]
    if not_installed:
        print(f"check-deps: {install_deps} lists {', '.join(not_installed)}, not installed here: run it first")
        return 1
    covered = closure(roots + [n for n, p in pkgs.items() if p["base"]], pkgs)
    owners = file_owners()
    files, cuda_compilers = used_files(build, cache)
    problems = collections.defaultdict(list)   # package (or a reason) -> [(file, how)]
    unowned_ok = collections.Counter()
    counted = collections.Counter()
    for path, how in dict(files).items():
        counted[how.split(" of ")[0].split(" ")[0]] += 1
        # Each file it stands for that a package owns must be covered: libOpenCL.so (in
        # ocl-icd-opencl-dev) is not covered by libOpenCL.so.1.0.0 (in ocl-icd-libopencl1).
        owned = [set().union(*(owners.get(n, set()) for n in twins)) for twins in names(path)]
        owned = [o for o in owned if o]
        if not owned:
            why = CUDA_TOOLKIT if os.path.normpath(path) in cuda_compilers else \
                next((w for rx, w in UNOWNED_OK if rx.match(path) or rx.match(os.path.realpath(path))), None)
            if why:
                unowned_ok[why] += 1
            else:
                problems[None].append((path, how))
            continue
        for o in owned:
            if not o & covered:
                problems[" or ".join(sorted(o))].append((path, how))
    print(f"check-deps: {len(dict(files))} files the build in {build} used "
          f"({', '.join(f'{n} {k}' for k, n in sorted(counted.items()))}); {len(roots)} packages in {install_deps}, "
          f"{len(covered)} with their dependencies and the base system")
    for why, n in sorted(unowned_ok.items()):
        print(f"check-deps: {n} files from {why}")
    for pkg, items in sorted(problems.items(), key=lambda kv: kv[0] or ""):
        shown = "; ".join(f"{p} ({how})" for p, how in items[:3]) + (f"; and {len(items) - 3} more" if len(items) > 3 else "")
        if pkg is None:
            print(f"FAIL: no Debian package owns {shown}: nothing installs it on a fresh machine")
        else:
            print(f"FAIL: {pkg} owns {shown}, and {install_deps} neither installs it nor a package that depends on it")
    print("check-deps: " + ("every package the build used is installed by install-deps.sh" if not problems
                            else f"{len(problems)} packages missing from install-deps.sh"))
    return 1 if problems else 0


def self_test(build, install_deps):
    """Copies of install-deps.sh with one entry removed: those that own a used file must fail."""
    with open(install_deps) as f:
        text = f.read()
    expect = {"ocl-icd-opencl-dev": 1, "nlohmann-json3-dev": 1, "libdnnl-dev": 1, "ninja-build": 1, "qt6-base-dev-tools": 0}
    bad = 0
    with tempfile.TemporaryDirectory(prefix="check-deps-") as d:
        for pkg, want in expect.items():
            lines, n = [], 0
            for line in text.splitlines(keepends=True):  # the package lists, not the comments
                if not line.lstrip().startswith("#"):
                    line, k = re.subn(rf"(?<=[\s(]){re.escape(pkg)}(?=[\s)])", "", line)
                    n += k
                lines.append(line)
            cut = "".join(lines)
            if n != 1:
                print(f"FAIL self-test: {install_deps} names {pkg} {n} times, not once")
                bad += 1
                continue
            copy = os.path.join(d, "install-deps.sh")
            with open(copy, "w") as f:
                f.write(cut)
            args = [sys.executable, os.path.abspath(__file__), "--build", build, "--install-deps", copy]
            run = subprocess.run(args, capture_output=True, text=True, timeout=600)
            named = [l for l in run.stdout.splitlines() if l.startswith("FAIL:") and re.search(rf"\b{re.escape(pkg)}\b", l)]
            ok = (run.returncode == 1 and bool(named)) if want else run.returncode == 0
            verdict = "ok  " if ok else "FAIL"
            said = named[0][:200] if named else (run.stdout.strip().splitlines() or ["no output"])[-1][:200]
            print(f"{verdict} self-test: without {pkg}: exit {run.returncode} "
                  f"(expected {'1 naming it' if want else '0: another entry depends on it'}): {said}")
            bad += not ok
        # A CUDA compiler no package owns outside /usr/local/cuda (CI's image has /usr/local/bin/nvcc,
        # a wrapper that execs the toolkit's) is the toolkit when CMake found it as the CUDA compiler,
        # and nothing installs it when anything else names it.
        wrapper = os.path.join(d, "nvcc")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\nexec /usr/local/cuda/bin/nvcc \"$@\"\n")
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8", errors="replace") as f:
            cache = f.read()
        for key, want in (("CUDAToolkit_NVCC_EXECUTABLE", 0), ("TP_SOME_TOOL", 1)):
            copy = os.path.join(d, "CMakeCache.txt")
            with open(copy, "w") as f:
                f.write(cache + f"{key}:FILEPATH={wrapper}\n")
            run = subprocess.run([sys.executable, os.path.abspath(__file__), "--build", build,
                                  "--install-deps", install_deps, "--cmake-cache", copy],
                                 capture_output=True, text=True, timeout=600)
            named = [l for l in run.stdout.splitlines() if l.startswith("FAIL:") and wrapper in l]
            ok = (run.returncode == 1 and bool(named)) if want else run.returncode == 0
            said = named[0][:200] if named else (run.stdout.strip().splitlines() or ["no output"])[-1][:200]
            print(f"{'ok  ' if ok else 'FAIL'} self-test: an unowned {wrapper} as {key}: exit {run.returncode} "
                  f"(expected {'1 naming it' if want else '0: the CUDA compiler is the toolkit'}): {said}")
            bad += not ok
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="a configured and built Ninja build folder")
    ap.add_argument("--install-deps", default=os.path.join(ROOT, "scripts", "install-deps.sh"))
    ap.add_argument("--cmake-cache", help="read this CMakeCache.txt instead of the build folder's (the self-test's copies)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(DPKG):
        print("SKIP: no dpkg database here: the check maps files to Debian packages")
        return 77
    cache = a.cmake_cache or os.path.join(a.build, "CMakeCache.txt")
    if not os.path.isfile(cache):
        fail(f"{cache}: no such file: configure and build {a.build} first")
    if not os.path.isfile(a.install_deps) or os.path.getsize(a.install_deps) > 1 << 20:
        fail(f"--install-deps {a.install_deps}: not a regular file of at most 1 MiB")
    build = os.path.abspath(a.build)
    rc = check(build, os.path.abspath(a.install_deps), cache)
    if a.self_test:
        rc |= self_test(build, os.path.abspath(a.install_deps))
    return rc


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.TimeoutExpired as e:
        fail(f"{' '.join(map(str, e.cmd))[:200]} took more than {e.timeout:.0f} s")
    except KeyboardInterrupt:
        print("check-deps: interrupted", file=sys.stderr)
        sys.exit(130)
