#!/usr/bin/env python3
"""Random-kill soak test: 200 jobs under the pessimist protocol, each with
1-3 SIGKILLs of random ranks at random instants (`--inject-failure
random:K@W`), over shm or TCP, with and without checkpoints:

  * tests/c/nondet.c (every non-deterministic MPI call) x100,
  * heat3d x50,
  * request-mix, seeds 1-5, x50.

Each run is classified against the failure-free run of the same program:
consistent (status 0, output identical), loud (non-zero status: the job
stopped with a message) or WRONG (status 0, different output). Runs that
are not consistent are printed with the launcher's last line; the last
line of output is a JSON summary. WRONG must be 0.

    cargo build --examples && python3 tests/soak/random_kills.py [SEED] [TARGET_DIR]

TARGET_DIR defaults to target/debug (copy it elsewhere to keep building
while this runs). About 15 minutes on 2 cores with debug builds."""
import json, os, random, subprocess, sys, tempfile, time

seed = int(sys.argv[1]) if len(sys.argv) > 1 else 2026
target = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else "target/debug")
here = os.path.dirname(os.path.abspath(__file__))
V = os.path.join(target, "vpml")
E = os.path.join(target, "examples")
rng = random.Random(seed)

nondet = os.path.join(tempfile.mkdtemp(prefix="vpml-soak-"), "nondet")
subprocess.run([V, "mpicc", "-O2", "-o", nondet, os.path.join(here, "..", "c", "nondet.c")], check=True)


def run(prog, args, launcher):
    t = time.time()
    p = subprocess.run([V, "run", "-n", "4", "--timeout", "300", "--protocol", "pessimist",
                        *launcher, prog, *args], capture_output=True, text=True)
    return p, time.time() - t


cases = []
for _ in range(100):
    cases.append(("nondet", nondet, ["200", rng.choice(["0", "20"])]))
for _ in range(50):
    ck = rng.choice([["--checkpoint-every", "4"], []])
    cases.append(("heat3d", os.path.join(E, "heat3d"),
                  ["--points", "6x6x12", "--steps", "24", "--output-interval", "4", *ck]))
for i in range(50):
    cases.append(("request-mix", os.path.join(E, "request-mix"),
                  ["--seed", str(1 + i % 5), "--rounds", "800"]))

refs = {}
counts = {"consistent": 0, "loud": 0, "WRONG": 0}
restarts = 0
for n, (name, prog, args) in enumerate(cases):
    key = (prog, tuple(args))
    if key not in refs:
        p, took = run(prog, args, [])
        if p.returncode != 0:
            sys.exit(f"failure-free run of {name} {args} failed:\n{p.stderr}")
        refs[key] = (p.stdout, took)
    want, took = refs[key]
    # Random kills count from the join, and `took` includes start-up:
    # 0.6 of it keeps most kills before the end of the run.
    launcher = ["--transport", rng.choice(["shm", "tcp"]),
                "--inject-failure", f"random:{rng.randint(1, 3)}@{took * 0.6:.3f}",
                "--inject-seed", str(rng.randrange(1 << 60))]
    p, _ = run(prog, args, launcher)
    restarts += p.stderr.count("restarted it as incarnation")
    if p.returncode == 0 and p.stdout == want:
        verdict = "consistent"
    elif p.returncode != 0:
        verdict = "loud"
    else:
        verdict = "WRONG"
    counts[verdict] += 1
    if verdict != "consistent":
        last = [l for l in p.stderr.splitlines() if l.startswith("vpml run:")][-1:]
        print(n, name, args, launcher, verdict, p.returncode, last, flush=True)
print(json.dumps({"seed": seed, "runs": len(cases), **counts, "restarts": restarts}), flush=True)
sys.exit(1 if counts["WRONG"] else 0)
