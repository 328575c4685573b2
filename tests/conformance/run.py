#!/usr/bin/env python3
"""MPICH 4.0.2's conformance tests (its `test/mpi` directory), run on vpml and
on MPICH itself, test by test.

    tests/conformance/run.py [--dirs group,topo,...] [--protocol pessimist]
                             [--only-vpml] [--timeout S] [--filter RE]

The tests come from the Debian source package of MPICH (`apt-get source
--download-only mpich`; run as root, this script adds the `deb-src` entry it
needs) and are built once with `mpicc.mpich` (package `libmpich-dev`) under
`target/conformance/`. Each entry of a directory's `testlist` (program,
ranks, `arg=`/`env=`/`timeLimit=` options) runs with `vpml run --np N` (the
release build: `cargo build --release`) and, unless `--only-vpml`, with
`mpiexec.mpich -n N`. It passes, as MPICH's own runner decides, when it exits
with status 0 and prints "No Errors".

Output: one line per test (`pass`/`FAIL` for vpml and MPICH, and for a vpml
failure the first line that says why), a summary per directory, and
`target/conformance/results-PROTOCOL.tsv`.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "conformance"
VERSION = "4.0.2"
SUITE = WORK / f"mpich-{VERSION}" / "test" / "mpi"
DIRS = ["pt2pt", "coll", "comm", "init", "group", "errhan", "topo", "datatype", "threads", "rma"]
SRC_LIST = Path("/etc/apt/sources.list.d/vpml-deb-src.sources")


def fail(why):
    print(f"conformance: {why}", file=sys.stderr)
    sys.exit(2)


def fetch_source():
    """The MPICH source tarball, from Debian's source package."""
    found = sorted(WORK.glob(f"mpich_{VERSION}*.orig.tar.*"))
    if found:
        return found[0]
    WORK.mkdir(parents=True, exist_ok=True)
    if shutil.which("apt-get") is None:
        fail("apt-get is needed to fetch MPICH's source package")

    def download():
        return subprocess.run(
            ["apt-get", "source", "--download-only", "mpich"],
            cwd=WORK,
            capture_output=True,
            text=True,
        )

    r = download()
    if r.returncode != 0 and os.geteuid() == 0 and not SRC_LIST.exists():
        # No deb-src entry: add one for the release this machine runs.
        codename = subprocess.run(
            ["sh", "-c", ". /etc/os-release && echo $VERSION_CODENAME"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        SRC_LIST.write_text(
            "Types: deb-src\nURIs: http://deb.debian.org/debian\n"
            f"Suites: {codename}\nComponents: main\n"
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        )
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        r = download()
    found = sorted(WORK.glob(f"mpich_{VERSION}*.orig.tar.*"))
    if not found:
        fail(f"could not fetch MPICH {VERSION}'s source package: {r.stderr.strip().splitlines()[-1:]}")
    return found[0]


def prepare(dirs):
    """Extract, configure and build the test directories (once)."""
    mpicc = shutil.which("mpicc.mpich")
    if mpicc is None:
        fail("mpicc.mpich not found: apt-get install -y mpich libmpich-dev")
    if not (SUITE / "configure").exists():
        tarball = fetch_source()
        with tarfile.open(tarball) as t:
            members = [m for m in t.getmembers() if "/test/mpi/" in m.name or m.name.endswith("/test/mpi")]
            t.extractall(WORK, members=members, filter="data")
    if not (SUITE / "Makefile").exists():
        log = WORK / "configure.log"
        with open(log, "w") as out:
            r = subprocess.run(
                [
                    "./configure",
                    "--disable-fortran",
                    "--disable-cxx",
                    "--disable-romio",
                    "--disable-spawn",
                    "--disable-ft-tests",
                    "--disable-perftest",
                ],
                cwd=SUITE,
                # (It would take the first `mpicc` on the PATH otherwise,
                # Open MPI's on many machines.)
                env={**os.environ, "MPICC": mpicc, "MPIEXEC": shutil.which("mpiexec.mpich") or ""},
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        if r.returncode != 0:
            fail(f"configure failed, see {log}")
    for d in ["util"] + dirs:
        stamp = SUITE / d / ".vpml-built"
        if stamp.exists():
            continue
        log = WORK / f"make-{d.replace('/', '-')}.log"
        with open(log, "w") as out:
            # -k: a test that does not build is reported, the others run.
            subprocess.run(["make", "-k", "-C", d], cwd=SUITE, stdout=out, stderr=subprocess.STDOUT)
        stamp.touch()


def entries(d):
    """(directory, program, ranks, args, env, time limit) of every test a
    directory's testlist names, following listed subdirectories."""
    listing = SUITE / d / "testlist"
    if not listing.exists():
        return
    for line in listing.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) == 1 and (SUITE / d / words[0]).is_dir():
            yield from entries(f"{d}/{words[0]}")
            continue
        if len(words) < 2 or not words[1].isdigit():
            continue
        args, env, limit, skip = [], {}, None, False
        for opt in words[2:]:
            key, _, value = opt.partition("=")
            if key == "arg":
                args.append(value)
            elif key == "env":
                k, _, v = value.partition("=")
                env[k] = v
            elif key == "timeLimit":
                limit = int(value)
            elif key in ("xfail", "mpiexecarg", "resultTest"):
                skip = skip or key == "mpiexecarg"
            elif key == "mpiversion" and value not in ("3.0", "3.1", "4.0"):
                skip = True
        if not skip:
            yield d, words[0], int(words[1]), args, env, limit


def run_one(cmd, cwd, env, timeout):
    """Run a test; (passed, why) as MPICH's runner decides."""
    try:
        r = subprocess.run(
            cmd,
            cwd=cwd,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s"
    ok = r.returncode == 0 and any(re.fullmatch(r"\s*No Errors\s*", line) for line in r.stdout.splitlines())
    if ok:
        return True, ""
    lines = [
        line.strip()
        for line in (r.stderr + "\n" + r.stdout).splitlines()
        if line.strip() and not line.startswith("vpml run:")
    ]
    why = next((line for line in lines if re.search(r"not supported|error|Error|fail|Fail", line)), None)
    return False, f"exit {r.returncode}: {why or (lines[0] if lines else 'no output')}"[:200]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dirs", default=",".join(DIRS))
    ap.add_argument("--protocol", default="none")
    ap.add_argument("--only-vpml", action="store_true")
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--filter", default="", help="only tests whose dir/program matches this regex")
    a = ap.parse_args()
    dirs = [d for d in a.dirs.split(",") if d]
    vpml = ROOT / "target" / "release" / "vpml"
    if not vpml.exists():
        fail("target/release/vpml not found: cargo build --release")
    prepare(dirs)
    rows, totals = [], {}
    for d in dirs:
        for sub, prog, n, args, env, limit in entries(d):
            name = f"{sub}/{prog}"
            if a.filter and not re.search(a.filter, name):
                continue
            cwd = SUITE / sub
            top = sub.split("/")[0]
            t = totals.setdefault(top, [0, 0, 0])
            t[0] += 1
            timeout = min(limit or a.timeout, a.timeout)
            if not (cwd / prog).exists():
                res_v, why, res_m = False, "did not build", False
            else:
                vcmd = [str(vpml), "run", "--np", str(n), "--protocol", a.protocol, "--", f"./{prog}", *args]
                started = time.monotonic()
                res_v, why = run_one(vcmd, cwd, env, timeout)
                spent = time.monotonic() - started
                res_m = None
                if not a.only_vpml:
                    res_m, _ = run_one(["mpiexec.mpich", "-n", str(n), f"./{prog}", *args], cwd, env, timeout)
            t[1] += res_v
            t[2] += bool(res_m)
            mark = lambda ok: "-" if ok is None else ("pass" if ok else "FAIL")
            print(f"{name:40} {n:3} vpml {mark(res_v):4}  mpich {mark(res_m):4}  {why}", flush=True)
            rows.append((name, n, mark(res_v), mark(res_m), why))
    print()
    print(f"{'directory':12} {'tests':>6} {'vpml':>6} {'mpich':>6}   (protocol {a.protocol})")
    all_t = [0, 0, 0]
    for d, (n, v, m) in totals.items():
        print(f"{d:12} {n:6} {v:6} {m if not a.only_vpml else '-':>6}")
        all_t = [x + y for x, y in zip(all_t, (n, v, m))]
    print(f"{'all':12} {all_t[0]:6} {all_t[1]:6} {all_t[2] if not a.only_vpml else '-':>6}")
    out = WORK / f"results-{a.protocol}.tsv"
    out.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    print(f"results: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
