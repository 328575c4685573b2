//! The benchmark parts (which program, on how many ranks, how to read its
//! output) and the configurations each runs: vpml with and without the
//! pessimist protocol, and the reference MPIs where a C program exists.

use serde_json::{Value, json};

use super::Part;
use super::common::{
    Config, FLAVOURS, build_c, build_mpi_library, example, reference, vpml_run_with,
};

fn parse_pingpong(v: &Value) -> Vec<(String, u64, f64)> {
    let b = v["bytes"].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    if let Some(l) = v["latency_us"].as_f64() {
        out.push(("latency_us".into(), b, l));
    }
    // vpml's own programs also give the median round trip.
    if let Some(l) = v["latency_p50_us"].as_f64() {
        out.push(("latency_p50_us".into(), b, l));
    }
    if let Some(bw) = v["bandwidth_mbs"].as_f64() {
        out.push(("bandwidth_mbs".into(), b, bw));
    }
    out
}

fn parse_collective(v: &Value) -> Vec<(String, u64, f64)> {
    match (v["op"].as_str(), v["bytes"].as_u64(), v["us"].as_f64()) {
        (Some(op), Some(b), Some(us)) => vec![(format!("{op}_us"), b, us)],
        _ => Vec::new(),
    }
}

fn parse_mpi_bench(v: &Value) -> Vec<(String, u64, f64)> {
    match (v["test"].as_str(), v["bytes"].as_u64(), v["value"].as_f64()) {
        (Some(t), Some(b), Some(x)) => vec![(t.to_string(), b, x)],
        _ => Vec::new(),
    }
}

fn parse_heat3d(v: &Value) -> Vec<(String, u64, f64)> {
    v["elapsed_s"]
        .as_f64()
        .map(|s| vec![("elapsed_s".to_string(), 0, s)])
        .unwrap_or_default()
}

/// A ping-pong part for one of the protocol's targets: vpml with and
/// without it only, in the steady state, four pairs of runs per round. One
/// run's figures are steady, but they move by up to ±10 % from one run
/// (pair of processes) to the next here: a target wants many short runs,
/// not a few long ones.
const fn protocol_pingpong(name: &'static str, args: &'static [&'static str]) -> Part {
    Part {
        name,
        example: "pingpong",
        c_source: None,
        ranks: &[2],
        args,
        parse: parse_pingpong,
        tcp: false,
        steady: &["--checkpoint-every-mib", "16"],
        repeats: 4,
        nogc: false,
        busy: 0,
    }
}

/// The part that measures what logging costs a C program that never
/// checkpoints (see [`nocheckpoint_configs`]).
pub(crate) const NOCHECKPOINT: &str = "nocheckpoint";

/// Every test of `benches/c/mpi_bench.c` (issue 23's set) but
/// `latency_mt`, which runs apart: it makes the program start
/// `MPI_THREAD_MULTIPLE`, and every other test would then measure a
/// multi-threaded program's calls instead of a single-threaded one's.
const ALL_TESTS: &str = "latency,sendrecv,bw,msgrate,bibw,mrate,put_latency,get_latency,put_bw,\
get_bw,acc_latency,get_acc_latency,fop_latency,cas_latency,barrier,bcast,reduce,allreduce,gather,\
gatherv,scatter,scatterv,allgather,allgatherv,alltoall,alltoallv,alltoallw,reduce_scatter,\
reduce_scatter_block,scan,ibarrier,ibcast,ireduce,iallreduce,igather,igatherv,iscatter,iscatterv,\
iallgather,iallgatherv,ialltoall,ialltoallv,ialltoallw,ireduce_scatter,ireduce_scatter_block,iscan";
/// Its multi-rank tests: the multi-pair message rate and the collectives.
const MULTI_RANK_TESTS: &str = "mrate,barrier,bcast,reduce,allreduce,gather,gatherv,scatter,\
scatterv,allgather,allgatherv,alltoall,alltoallv,alltoallw,reduce_scatter,reduce_scatter_block,\
scan,ibarrier,ibcast,iallreduce,ialltoall,ialltoallw";

/// A part of the head-to-head with the reference MPIs: one MPICH-built
/// binary of `benches/c/mpi_bench.c` on vpml's MPI library (`vpml`) and
/// natively (see [`speed_configs`]), running the comma-separated `tests`.
const fn speed(
    name: &'static str,
    ranks: &'static [usize],
    tests: &'static [&'static str],
    tcp: bool,
    busy: usize,
) -> Part {
    Part {
        name,
        example: "",
        c_source: Some("mpi_bench.c"),
        ranks,
        args: tests,
        parse: parse_mpi_bench,
        tcp,
        steady: &[],
        repeats: 1,
        nogc: false,
        busy,
    }
}

/// Prefix of the names of the head-to-head parts.
pub(crate) const SPEED: &str = "speed";

pub(crate) const PARTS: [Part; 13] = [
    // vpml against Open MPI and MPICH through the C library (issue 23):
    // every size from 0 B to 4 MiB, shared memory, 2 ranks ...
    speed("speed", &[2], &[ALL_TESTS], false, 0),
    // ... threads: OSU's latency_mt, in a program started
    // MPI_THREAD_MULTIPLE ...
    speed("speed-mt", &[2], &["latency_mt"], false, 0),
    // ... the multi-rank tests on 4 and 8 ranks (8 oversubscribes 2 cores) ...
    speed("speed-ranks", &[4, 8], &[MULTI_RANK_TESTS], false, 0),
    // ... point to point over TCP (against Open MPI's tcp BTL) ...
    speed("speed-tcp", &[2], &["latency,bw,msgrate,bibw"], true, 0),
    // ... and with two CPU-bound processes competing for the 2 cores.
    speed("speed-busy", &[2], &["latency,bw"], false, 2),
    Part {
        name: "pingpong-tcp",
        example: "pingpong",
        c_source: Some("pingpong.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_pingpong,
        tcp: true,
        steady: &[],
        repeats: 1,
        nogc: false,
        busy: 0,
    },
    Part {
        name: "pingpong",
        example: "pingpong",
        c_source: Some("pingpong.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_pingpong,
        tcp: false,
        steady: &["--checkpoint-every-mib", "16"],
        repeats: 1,
        nogc: true,
        busy: 0,
    },
    // Small-message latency, for its target.
    protocol_pingpong("latency", &["--json", "--max", "1024"]),
    // Bandwidth at 1-4 MiB, for its target.
    protocol_pingpong("bandwidth", &["--json", "--min", "1048576"]),
    Part {
        name: "anysource",
        example: "anysource-pingpong",
        c_source: Some("anysource_pingpong.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_pingpong,
        tcp: false,
        steady: &[],
        repeats: 1,
        nogc: false,
        busy: 0,
    },
    Part {
        name: "collectives",
        example: "collbench",
        c_source: Some("collectives.c"),
        ranks: &[2, 4, 8],
        args: &["--json"],
        parse: parse_collective,
        tcp: false,
        steady: &[],
        repeats: 1,
        nogc: false,
        busy: 0,
    },
    // An unmodified MPI program that never checkpoints: the one binary,
    // built by MPICH's mpicc, on vpml's MPI library with and without the
    // protocol, and under the reference MPIs.
    Part {
        name: NOCHECKPOINT,
        example: "",
        c_source: Some("mpi_bench.c"),
        ranks: &[2],
        args: &["--json"],
        parse: parse_mpi_bench,
        tcp: false,
        steady: &[],
        repeats: 1,
        nogc: false,
        busy: 0,
    },
    Part {
        name: "heat3d",
        example: "heat3d",
        c_source: None,
        ranks: &[4],
        args: &["--size", "small", "--steps", "50", "--timing"],
        parse: parse_heat3d,
        tcp: false,
        steady: &[],
        // About 1 s a run, with 4 ranks taking turns on the cores: one
        // run's time varies by ±10 % here, so one pair per round is not
        // enough to tell a 5 % overhead.
        repeats: 4,
        nogc: false,
        busy: 0,
    },
];

/// heat3d prints `key value` lines; turn the elapsed time into JSON.
pub(crate) fn heat3d_json(c: &Config) -> Result<Vec<Value>, String> {
    let out = std::process::Command::new("timeout")
        .arg("600")
        .args(&c.cmd)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            c.name,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("elapsed_s ")?.trim().parse::<f64>().ok())
        .map(|s| json!({ "elapsed_s": s }))
        .collect())
}

/// The largest message `vpml-pessimist-nogc` sends.
const NOGC_MAX: usize = 64 << 10;

/// The configuration running MPICH's build of the C program on vpml.
pub(crate) const MPICH_ON_VPML: &str = "mpich-on-vpml";

/// The configurations of [`NOCHECKPOINT`]: the MPICH-built program on
/// vpml without a protocol (`vpml`) and with the pessimist one
/// (`vpml-pessimist`; `vpml-pessimist-memlog` with its sender log in
/// memory), then natively under MPICH and Open MPI.
fn nocheckpoint_configs(part: &Part, ranks: usize) -> Result<Vec<Config>, String> {
    c_program_configs(
        part,
        ranks,
        &[],
        &[
            ("vpml", &[]),
            ("vpml-pessimist", &["--protocol", "pessimist"]),
            // The sender log in anonymous memory (huge pages where the
            // kernel gives them) rather than in files of the log directory.
            (
                "vpml-pessimist-memlog",
                &["--protocol", "pessimist", "--sender-log", "memory"],
            ),
        ],
    )
}

/// The configurations of the [`SPEED`] parts: the MPICH-built program on
/// vpml's library (over TCP for `speed-tcp`), then natively under Open MPI
/// (its tcp BTL for `speed-tcp`) and MPICH (shared memory only).
fn speed_configs(part: &Part, ranks: usize) -> Result<Vec<Config>, String> {
    let transport: &[&str] = if part.tcp {
        &["--transport", "tcp"]
    } else {
        &[]
    };
    // Every size from 0 B, about 20 ms per test and size.
    let common = ["--json", "--min", "0", "--budget-ms", "20", "--tests"];
    c_program_configs(part, ranks, &common, &[("vpml", transport)])
}

/// The MPICH build of `part`'s C program on vpml's MPI library, once per
/// (name, `vpml run` options) of `variants`, then the same source under
/// each reference MPI installed; the program's arguments are `prefix`
/// then the part's.
fn c_program_configs(
    part: &Part,
    ranks: usize,
    prefix: &[&str],
    variants: &[(&str, &[&str])],
) -> Result<Vec<Config>, String> {
    let src = part.c_source.unwrap_or_default();
    let exe = build_c("mpich", src)
        .map_err(|why| format!("needs MPICH's mpicc to build the program vpml runs: {why}"))?;
    build_mpi_library()?;
    let args: Vec<String> = prefix
        .iter()
        .chain(part.args)
        .map(|a| a.to_string())
        .collect();
    let mut out: Vec<Config> = variants
        .iter()
        .map(|(name, options)| {
            let mut cmd = vpml_run_with(ranks, options, &exe);
            cmd.extend(["--name".to_string(), name.to_string()]);
            cmd.extend(args.iter().cloned());
            Config {
                name: name.to_string(),
                cmd,
                envs: vec![],
            }
        })
        .collect();
    for f in FLAVOURS {
        if let Some(mut c) = reference_for(part, f, src, ranks) {
            c.cmd.extend(args.iter().cloned());
            out.push(c);
        }
    }
    Ok(out)
}

/// `part`'s C program under reference MPI `flavour` (over its tcp BTL for
/// a TCP part, which only Open MPI's is compared with), or `None` after
/// printing why it is skipped.
fn reference_for(part: &Part, flavour: &str, src: &str, ranks: usize) -> Option<Config> {
    if part.tcp && flavour != "openmpi" {
        println!(
            "# {}: skipping {flavour}: only Open MPI's tcp BTL is compared",
            part.name
        );
        return None;
    }
    match reference(flavour, src, ranks) {
        Ok(mut c) => {
            if part.tcp {
                c.cmd
                    .splice(1..1, ["--mca".to_string(), "btl".into(), "tcp,self".into()]);
            }
            Some(c)
        }
        Err(why) => {
            println!("# {}: skipping {flavour}: {why}", part.name);
            None
        }
    }
}

pub(crate) fn configs(part: &Part, ranks: usize) -> Result<Vec<Config>, String> {
    if part.name == NOCHECKPOINT {
        return nocheckpoint_configs(part, ranks);
    }
    if part.name.starts_with(SPEED) {
        return speed_configs(part, ranks);
    }
    let program = example(part.example)?;
    let args: Vec<String> = part.args.iter().map(|a| a.to_string()).collect();
    let transport: &[&str] = if part.tcp {
        &["--transport", "tcp"]
    } else {
        &[]
    };
    let steady: Vec<String> = part.steady.iter().map(|a| a.to_string()).collect();
    let pessimist = |name: &str, program_args: Vec<String>| Config {
        name: name.into(),
        cmd: [
            vpml_run_with(
                ranks,
                &[transport, &["--protocol", "pessimist"]].concat(),
                &program,
            ),
            program_args,
        ]
        .concat(),
        envs: vec![],
    };
    let mut out = vec![
        Config {
            name: "vpml".into(),
            cmd: [
                vpml_run_with(ranks, transport, &program),
                args.clone(),
                steady.clone(),
            ]
            .concat(),
            envs: vec![],
        },
        pessimist("vpml-pessimist", [args.clone(), steady.clone()].concat()),
    ];
    if part.nogc {
        // Up to 64 KiB: beyond, the log of a run without checkpoints grows
        // to over 15 GB in /dev/shm, which measures this machine's memory
        // reclaim, not logging, and slows the runs after it.
        let small = ["--max".to_string(), NOGC_MAX.to_string()];
        out.push(pessimist(
            "vpml-pessimist-nogc",
            [args.clone(), small.to_vec()].concat(),
        ));
    }
    match part.c_source {
        Some(src) => {
            // `mpich-on-vpml` below runs on vpml's MPI library.
            build_mpi_library()?;
            for f in FLAVOURS {
                if let Some(mut c) = reference_for(part, f, src, ranks) {
                    c.cmd.extend(args.iter().cloned());
                    // The same MPICH binary on vpml's MPICH-ABI library.
                    if f == "mpich"
                        && let Some(at) = c.cmd.iter().position(|a| a == "--name")
                    {
                        let exe = std::path::PathBuf::from(&c.cmd[at - 1]);
                        let mut cmd = vpml_run_with(ranks, transport, &exe);
                        cmd.extend(["--name".to_string(), MPICH_ON_VPML.into()]);
                        cmd.extend(args.iter().cloned());
                        out.push(Config {
                            name: MPICH_ON_VPML.into(),
                            cmd,
                            envs: vec![],
                        });
                    }
                    out.push(c);
                }
            }
        }
        None => println!("# {}: no C reference program; vpml only", part.name),
    }
    Ok(out)
}
