//! YAQL benchmark: evaluate the Fuel corpora (`fuel-conditions.jsonl` + `fuel-ext.jsonl`)
//! many times with stoker and with the reference (`yaql-oracle.py`'s engine, parse cached),
//! and print the time per evaluation on each side and the ratio.
//!
//!     cargo bench --bench yaql -- [SHARED_DIR] [ROUNDS]
//!
//! SHARED_DIR defaults to ../shared; the Python with yaql 3.2.0 is $YAQL_PYTHON, else
//! /tmp/yaqlvenv/bin/python. Two figures per side: with each case's data converted once
//! (how the deployment engine works: one context per node, many expressions) and with the
//! JSON data converted again on every evaluation (as `yaql-oracle.py` does).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use stoker::yaql::{Context, Engine, Limits};

const PY: &str = r#"
import collections.abc, importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("oracle", sys.argv[1])
oracle = importlib.util.module_from_spec(spec); spec.loader.exec_module(oracle)
import yaql
from yaql.language import utils
cases = [json.loads(l) for f in sys.argv[3:] for l in open(f) if l.strip()]
rounds = int(sys.argv[2])
engine = yaql.YaqlFactory().create(dict(oracle.ENGINE_OPTIONS))
base = yaql.create_context(finalizer=oracle.finalize)
oracle.register_fuel_functions(base)
parsed = {c["expr"]: engine(c["expr"]) for c in cases}
def prepare(c):
    return (utils.convert_input_data(c.get("data")),
            utils.convert_input_data(c.get("old", {})),
            {k: utils.convert_input_data(v) for k, v in (c.get("vars") or {}).items()})
def run(c, prepared):
    data, old, vars = prepared if prepared is not None else prepare(c)
    ctx = base.create_child_context()
    ctx["$%new"] = data
    ctx["$%old"] = old
    for k, v in vars.items():
        ctx["$" + k] = v
    ctx["$"] = data
    try:
        return parsed[c["expr"]].evaluate(context=ctx)
    except Exception:
        return None
ready = [prepare(c) for c in cases]
for c, r in zip(cases, ready): run(c, r)
t = time.perf_counter()
for _ in range(rounds):
    for c, r in zip(cases, ready): run(c, r)
t1 = time.perf_counter() - t
t = time.perf_counter()
for _ in range(rounds):
    for c in cases: run(c, None)
t2 = time.perf_counter() - t
print(t1, t2, rounds * len(cases))
"#;

#[derive(serde::Deserialize)]
struct Case {
    expr: String,
    #[serde(default)]
    data: serde_json::Value,
    old: Option<serde_json::Value>,
    #[serde(default)]
    vars: serde_json::Value,
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let shared = PathBuf::from(
        args.first()
            .cloned()
            .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../shared").to_string()),
    );
    let rounds: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(20);
    let files = [
        shared.join("yaql-cases/fuel-conditions.jsonl"),
        shared.join("yaql-cases/fuel-ext.jsonl"),
    ];
    let mut cases = Vec::new();
    for f in &files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("cannot read {}: {e}", f.display());
                std::process::exit(2);
            }
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let c: Case = serde_json::from_str(line).expect("case line");
            cases.push(c);
        }
    }
    let engine = Engine::new(Limits::default());
    let context = |c: &Case| {
        let mut ctx = Context::new(&c.data);
        if let Some(old) = &c.old {
            ctx = ctx.with_old(old);
        }
        if let serde_json::Value::Object(vars) = &c.vars {
            for (k, v) in vars {
                ctx = ctx.with_var(k, v);
            }
        }
        ctx
    };
    let ready: Vec<Context> = cases.iter().map(context).collect();
    for (c, ctx) in cases.iter().zip(&ready) {
        let _ = engine.eval(&c.expr, ctx);
    }
    let n = rounds * 50 * cases.len();
    let t = Instant::now();
    for _ in 0..rounds * 50 {
        for (c, ctx) in cases.iter().zip(&ready) {
            let _ = std::hint::black_box(engine.eval(&c.expr, ctx));
        }
    }
    let ours_eval = t.elapsed().as_secs_f64() / n as f64;
    let skip_conversion = std::env::var("YAQL_BENCH_EVAL_ONLY").is_ok();
    let t = Instant::now();
    for _ in 0..if skip_conversion { 0 } else { rounds * 50 } {
        for c in &cases {
            let _ = std::hint::black_box(engine.eval(&c.expr, &context(c)));
        }
    }
    let ours_conv = t.elapsed().as_secs_f64() / n as f64;
    println!("{} cases, parse cached on both sides", cases.len());
    println!(
        "stoker    (context prepared once per case): {:>8.2} µs per evaluation ({n} evaluations)",
        ours_eval * 1e6
    );
    println!(
        "stoker    (data converted from JSON each time): {:>8.2} µs per evaluation",
        ours_conv * 1e6
    );

    let python = std::env::var("YAQL_PYTHON").unwrap_or_else(|_| "/tmp/yaqlvenv/bin/python".into());
    let out = Command::new(&python)
        .arg("-c")
        .arg(PY)
        .arg(shared.join("tools/yaql-oracle.py"))
        .arg(rounds.to_string())
        .args(&files)
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            let nums: Vec<f64> = text
                .split_whitespace()
                .filter_map(|s| s.parse().ok())
                .collect();
            if let [t1, t2, n] = nums[..] {
                let (theirs_eval, theirs_conv) = (t1 / n, t2 / n);
                println!(
                    "reference (context prepared once per case): {:>8.2} µs per evaluation ({n} evaluations)",
                    theirs_eval * 1e6
                );
                println!(
                    "reference (data converted from JSON each time): {:>8.2} µs per evaluation",
                    theirs_conv * 1e6
                );
                println!(
                    "ratio, evaluation:          {:>6.1}x faster",
                    theirs_eval / ours_eval
                );
                println!(
                    "ratio, with data conversion: {:>6.1}x faster",
                    theirs_conv / ours_conv
                );
            }
        }
        Ok(o) => eprintln!(
            "reference run failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => eprintln!("cannot run {python}: {e}"),
    }
}
