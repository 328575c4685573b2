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
`mpiexec.mpich -n N`. It passes as MPICH's own runner decides: by default when it
exits with status 0 and prints "No Errors" and nothing else (both streams;
the launcher's two informational lines aside); tests marked `resultTest=`
must fail as told. Tests marked `xfail=`, needing `mpiexec` arguments or a
later MPI are skipped and counted.

Output: one line per test (`pass`/`FAIL` for vpml and MPICH, and for a vpml
failure the first line that says why), a summary per directory, and
`target/conformance/results-PROTOCOL.tsv`.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "conformance"
VERSION = "4.0.2"
SUITE = WORK / f"mpich-{VERSION}" / "test" / "mpi"
DIRS = ["pt2pt", "coll", "comm", "init", "group", "errhan", "topo", "datatype", "threads", "rma", "part", "mpi_t"]
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
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        fail(f"could not fetch MPICH {VERSION}'s source package (this machine's may be another version): {last}")
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
            r = subprocess.run(["make", "-k", "-C", d], cwd=SUITE, stdout=out, stderr=subprocess.STDOUT)
        if d == "util" and r.returncode != 0:
            fail(f"MPICH's test utilities did not build, see {log}")
        stamp.touch()


def entries(d):
    """Every test a directory's testlist names (a dict: dir, prog, ranks,
    args, env, limit, result, skip), following listed subdirectories."""
    listing = SUITE / d / "testlist"
    if not listing.exists():
        print(f"conformance: no testlist in {d}", file=sys.stderr)
        return
    for line in listing.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) == 1 and (SUITE / d / words[0]).is_dir():
            yield from entries(f"{d}/{words[0]}")
            continue
        # Without a rank count, MPICH's runner uses 2.
        ranks = int(words[1]) if len(words) > 1 and words[1].isdigit() else 2
        opts = words[2:] if len(words) > 1 and words[1].isdigit() else words[1:]
        test = {"dir": d, "prog": words[0], "ranks": ranks, "args": [], "env": {}, "limit": None,
                "result": "", "skip": ""}
        for opt in opts:
            key, _, value = opt.partition("=")
            if key == "arg":
                test["args"].append(value)
            elif key == "env":
                k, _, v = value.partition("=")
                test["env"][k] = v
            elif key == "timeLimit" and value.isdigit():
                test["limit"] = int(value)
            elif key == "resultTest":
                test["result"] = value
            elif key == "xfail":
                test["skip"] = "expected to fail (xfail)"
            elif key == "mpiexecarg":
                test["skip"] = "needs mpiexec arguments"
            elif key == "mpiversion" and value not in ("3.0", "3.1", "4.0"):
                test["skip"] = f"MPI {value}"
        yield test


BANNER = re.compile(r"^vpml run: (job \S+, protocol|.* runs on vpml's MPI library)")
NO_ERRORS = re.compile(r"^\s*No [Ee]rrors\s*$")
PASSED = re.compile(r"^\s*Test Passed\s*$")


def verdict(result, status, lines):
    """Did a test pass, as MPICH's runner decides for its `resultTest`
    (the default, TestStatus, TestErrFatal, TestStatusNoErrors)?"""
    if result == "TestStatus":
        return status != 0 and (not lines or not lines[0].strip())
    if result == "TestErrFatal":
        return status != 0
    clean = all(NO_ERRORS.match(line) or PASSED.match(line) or not line.strip() for line in lines)
    said = any(NO_ERRORS.match(line) for line in lines)
    if result == "TestStatusNoErrors":
        return status != 0 and clean and said
    return status == 0 and clean and said


def run_one(cmd, cwd, env, timeout, result):
    """Run a test (its whole process group is killed 5 s past the time
    limit, if its launcher did not stop it); (passed, why)."""
    p = subprocess.Popen(
        cmd,
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = p.communicate(timeout=timeout + 5)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return False, f"timed out after {timeout} s"
    # Output as MPICH's runner reads it (both streams), without the
    # launcher's two informational lines.
    lines = [
        line
        for line in out.decode(errors="replace").splitlines()
        if not BANNER.match(line) and "FORTRAN STOP" not in line
    ]
    if verdict(result, p.returncode, lines):
        return True, ""
    telling = [line.strip() for line in lines if line.strip() and not NO_ERRORS.match(line)]
    why = next((line for line in telling if re.search(r"not supported|rror|ail", line)), None)
    return False, f"exit {p.returncode}: {why or (telling[0] if telling else 'no output')}"[:200]


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
    rows, totals, skipped = [], {}, 0
    mark = lambda ok: "-" if ok is None else ("pass" if ok else "FAIL")
    for d in dirs:
        for t in entries(d):
            name, n = f"{t['dir']}/{t['prog']}", t["ranks"]
            if a.filter and not re.search(a.filter, name):
                continue
            if t["skip"]:
                skipped += 1
                print(f"{name:40} {n:3} skipped: {t['skip']}", flush=True)
                continue
            cwd = SUITE / t["dir"]
            top = t["dir"].split("/")[0]
            tot = totals.setdefault(top, [0, 0, 0])
            tot[0] += 1
            timeout = t["limit"] or a.timeout
            res_m = why_m = None
            if not (cwd / t["prog"]).exists():
                res_v, why = False, "did not build"
                if not a.only_vpml:
                    res_m, why_m = False, "did not build"
            else:
                prog = [f"./{t['prog']}", *t["args"]]
                # Both launchers stop the job at the time limit, as MPICH's
                # runner has them do (tests marked TestErrFatal count on
                # it); the process group is killed a little later.
                env = {**t["env"], "MPIEXEC_TIMEOUT": str(timeout)}
                vcmd = [str(vpml), "run", "--np", str(n), "--protocol", a.protocol, "--", *prog]
                res_v, why = run_one(vcmd, cwd, env, timeout, t["result"])
                if not a.only_vpml:
                    res_m, why_m = run_one(["mpiexec.mpich", "-n", str(n), *prog], cwd, env, timeout, t["result"])
            tot[1] += res_v
            tot[2] += bool(res_m)
            note = why if not res_v else (f"(MPICH: {why_m})" if res_m is False else "")
            print(f"{name:40} {n:3} vpml {mark(res_v):4}  mpich {mark(res_m):4}  {note}", flush=True)
            rows.append((name, n, mark(res_v), mark(res_m), why, why_m or ""))
    print()
    print(f"{'directory':12} {'tests':>6} {'vpml':>6} {'mpich':>6}   (protocol {a.protocol})")
    all_t = [0, 0, 0]
    for d, (n, v, m) in totals.items():
        print(f"{d:12} {n:6} {v:6} {m if not a.only_vpml else '-':>6}")
        all_t = [x + y for x, y in zip(all_t, (n, v, m))]
    print(f"{'all':12} {all_t[0]:6} {all_t[1]:6} {all_t[2] if not a.only_vpml else '-':>6}")
    if skipped:
        print(f"({skipped} skipped: expected to fail, or needing mpiexec arguments or a later MPI)")
    out = WORK / f"results-{a.protocol}.tsv"
    out.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    print(f"results: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
