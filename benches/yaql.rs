//! YAQL benchmark: stoker against the reference (yaql 3.2.0 with `yaql-oracle.py`'s Fuel
//! functions and finaliser) over the Fuel corpora (`fuel-conditions.jsonl` + `fuel-ext.jsonl`,
//! each case's `expr`, `data`, `old`, `vars`, as `yaql-check.py` sends them).
//!
//!     cargo bench --bench yaql -- [SHARED_DIR] [ROUNDS]
//!
//! SHARED_DIR defaults to ../shared, ROUNDS to 7 (at least 5); the Python with yaql 3.2.0 is
//! $YAQL_PYTHON, else /tmp/yaqlvenv/bin/python. Three figures per side, measured in rounds
//! that alternate the two sides (the side that goes first alternates too), each reported as
//! the median and the min–max over the rounds:
//!
//! * evaluation: each case's context prepared once (how the deployment engine works: one
//!   context per node, many expressions); the time per evaluation, finalised result included.
//! * with conversion: a request line in, an answer line out, in process: the JSON text parsed
//!   and converted into values, evaluated, the answer written as JSON (stoker: `yaql::jsonl`,
//!   what `stoker yaql --jsonl` runs per line; the reference: `json.loads`,
//!   `convert_input_data`, evaluate, `json.dumps`).
//! * whole process: `stoker yaql --jsonl` fed the corpus through a pipe, against a Python
//!   process running the same loop; spawn to exit, and the same with no input (start-up).
//!
//! Expressions are parsed once on both sides (stoker's engine cache, a dict in Python) and a
//! warm-up pass precedes the rounds. The whole-process answers of both sides are compared.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use stoker::yaql::{Context, Converter, Engine, Limits, jsonl};

/// The reference, driven round by round: `eval N` / `conv N` on stdin run N passes over the
/// corpus and print the seconds they took.
const PY_DRIVER: &str = r#"
import collections.abc, importlib.util, json, sys, time
spec = importlib.util.spec_from_file_location("oracle", sys.argv[1])
oracle = importlib.util.module_from_spec(spec); spec.loader.exec_module(oracle)
import yaql
from yaql.language import utils
lines = [l.rstrip("\n") for l in open(sys.argv[2]) if l.strip()]
engine = yaql.YaqlFactory().create(dict(oracle.ENGINE_OPTIONS))
base = yaql.create_context(finalizer=oracle.finalize)
oracle.register_fuel_functions(base)
parsed = {}
def parse(expr):
    p = parsed.get(expr)
    if p is None:
        p = parsed[expr] = engine(expr)
    return p
def prepare(c):
    return (c["expr"], utils.convert_input_data(c.get("data")),
            utils.convert_input_data(c.get("old", {})),
            {k: utils.convert_input_data(v) for k, v in (c.get("vars") or {}).items()})
def run(prepared):
    expr, data, old, vars = prepared
    ctx = base.create_child_context()
    ctx["$%new"] = data
    ctx["$%old"] = old
    for k, v in vars.items():
        ctx["$" + k.lstrip("$")] = v
    ctx["$"] = data
    return parse(expr).evaluate(context=ctx)
def answer(line):
    try:
        c = json.loads(line)
        if c.get("old") is None: c.pop("old", None)
        return json.dumps({"ok": True, "value": run(prepare(c))}, ensure_ascii=False, allow_nan=False)
    except Exception as e:
        return json.dumps({"ok": False, "error": type(e).__name__})
ready = [prepare(json.loads(l)) for l in lines]
def ev(p):
    try:
        return run(p)
    except Exception:
        return None
for p in ready: ev(p)
for l in lines: answer(l)
print("ready", flush=True)
for cmd in sys.stdin:
    what, n = cmd.split()
    t = time.perf_counter()
    for _ in range(int(n)):
        if what == "eval":
            for p in ready: ev(p)
        else:
            for l in lines: answer(l)
    print(time.perf_counter() - t, flush=True)
"#;

/// The reference's whole process: `stoker yaql --jsonl`'s loop in Python.
const PY_WHOLE: &str = r#"
import collections.abc, importlib.util, json, sys
spec = importlib.util.spec_from_file_location("oracle", sys.argv[1])
oracle = importlib.util.module_from_spec(spec); spec.loader.exec_module(oracle)
import yaql
from yaql.language import utils
engine = yaql.YaqlFactory().create(dict(oracle.ENGINE_OPTIONS))
base = yaql.create_context(finalizer=oracle.finalize)
oracle.register_fuel_functions(base)
parsed = {}
out = sys.stdout
for line in sys.stdin:
    try:
        c = json.loads(line)
        expr = c["expr"]
        p = parsed.get(expr)
        if p is None:
            p = parsed[expr] = engine(expr)
        data = utils.convert_input_data(c.get("data"))
        ctx = base.create_child_context()
        ctx["$%new"] = data
        old = c.get("old")
        ctx["$%old"] = utils.convert_input_data({} if old is None else old)
        for k, v in (c.get("vars") or {}).items():
            ctx["$" + k.lstrip("$")] = utils.convert_input_data(v)
        ctx["$"] = data
        text = json.dumps({"ok": True, "value": p.evaluate(context=ctx)}, ensure_ascii=False, allow_nan=False)
    except Exception as e:
        text = json.dumps({"ok": False, "error": type(e).__name__})
    out.write(text + "\n")
"#;

/// A table row: its name, stoker's and the reference's figures, their unit.
type Row<'a> = (&'a str, &'a [f64], &'a [f64], fn(f64) -> String);

/// Median, min, max.
fn stats(xs: &[f64]) -> (f64, f64, f64) {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = if v.len() % 2 == 1 {
        v[v.len() / 2]
    } else {
        (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
    };
    (mid, v[0], v[v.len() - 1])
}

fn us(x: f64) -> String {
    let u = x * 1e6;
    if u >= 100.0 {
        format!("{u:.0} µs")
    } else {
        format!("{u:.1} µs")
    }
}

fn ms(x: f64) -> String {
    format!("{:.1} ms", x * 1e3)
}

/// `median (min–max)`.
fn spread(xs: &[f64], unit: fn(f64) -> String) -> String {
    let (m, lo, hi) = stats(xs);
    format!("{} ({}–{})", unit(m), unit(lo), unit(hi))
}

/// The ratio of medians, and the range of the ratio over rounds (each round's pair).
fn ratio(ours: &[f64], theirs: &[f64]) -> String {
    let per: Vec<f64> = theirs.iter().zip(ours).map(|(t, o)| t / o).collect();
    let (_, lo, hi) = stats(&per);
    format!(
        "{:.1}× ({:.1}–{:.1}×)",
        stats(theirs).0 / stats(ours).0,
        lo,
        hi
    )
}

struct Py {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Py {
    fn start(python: &str, oracle: &Path, corpus: &Path) -> Result<Py, String> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(PY_DRIVER)
            .arg(oracle)
            .arg(corpus)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {python}: {e}"))?;
        let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let mut line = String::new();
        out.read_line(&mut line).map_err(|e| e.to_string())?;
        if line.trim() != "ready" {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the reference did not start (said {line:?})"));
        }
        Ok(Py { child, out })
    }

    /// Seconds for `passes` passes of `what`.
    fn run(&mut self, what: &str, passes: usize) -> f64 {
        let stdin = self.child.stdin.as_mut().expect("python stdin");
        writeln!(stdin, "{what} {passes}").expect("write to python");
        stdin.flush().expect("flush python");
        let mut line = String::new();
        self.out.read_line(&mut line).expect("python answer");
        line.trim().parse().expect("python seconds")
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Spawn `cmd` with `input` on stdin; seconds from spawn to exit, and its stdout.
fn whole(cmd: &mut Command, input: &Path) -> (f64, String) {
    let file = std::fs::File::open(input).expect("corpus file");
    let t = Instant::now();
    let out = cmd
        .stdin(file)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn");
    let secs = t.elapsed().as_secs_f64();
    assert!(out.status.success(), "{cmd:?} failed");
    (secs, String::from_utf8_lossy(&out.stdout).into_owned())
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
    let rounds: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(7).max(5);
    let files = [
        shared.join("yaql-cases/fuel-conditions.jsonl"),
        shared.join("yaql-cases/fuel-ext.jsonl"),
    ];
    // The request lines, as yaql-check.py sends them.
    let mut lines = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| {
            eprintln!("cannot read {}: {e}", f.display());
            std::process::exit(2);
        });
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let case: serde_json::Value = serde_json::from_str(line).expect("case line");
            let mut req = serde_json::Map::new();
            for k in ["expr", "data", "old", "vars"] {
                if let Some(v) = case.get(k) {
                    req.insert(k.to_string(), v.clone());
                }
            }
            lines.push(serde_json::Value::Object(req).to_string());
        }
    }
    let n = lines.len();
    let dir = tempfile::tempdir().expect("temp dir");
    let corpus = dir.path().join("requests.jsonl");
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&corpus, lines.join("\n") + "\n").expect("write corpus");
    std::fs::write(&empty, "").expect("write empty");
    let oracle = shared.join("tools/yaql-oracle.py");
    let python = std::env::var("YAQL_PYTHON").unwrap_or_else(|_| "/tmp/yaqlvenv/bin/python".into());
    let stoker = env!("CARGO_BIN_EXE_stoker");

    // stoker, warmed up: contexts prepared once, and the request → answer path.
    let engine = Engine::new(Limits::default());
    let mut conv = Converter::new();
    let ready: Vec<(String, Context)> = lines
        .iter()
        .map(|l| jsonl::request(&mut conv, l).expect("request line"))
        .collect();
    let mut buf = Vec::new();
    let eval_pass = || {
        for (e, ctx) in &ready {
            let _ = std::hint::black_box(engine.eval(e, ctx));
        }
    };
    let mut conv_pass = |conv: &mut Converter| {
        for l in &lines {
            buf.clear();
            jsonl::answer(&engine, conv, l, &mut buf);
            std::hint::black_box(&buf);
        }
    };
    eval_pass();
    conv_pass(&mut conv);
    // Passes per round: enough for about a quarter of a second each.
    let t = Instant::now();
    eval_pass();
    let eval_passes = ((0.25 / t.elapsed().as_secs_f64()) as usize).clamp(1, 1000);
    let t = Instant::now();
    conv_pass(&mut conv);
    let conv_passes = ((0.25 / t.elapsed().as_secs_f64()) as usize).clamp(1, 1000);

    let mut py = match Py::start(&python, &oracle, &corpus) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("{e}: only stoker's figures follow");
            None
        }
    };
    let mut ours: [Vec<f64>; 4] = Default::default();
    let mut theirs: [Vec<f64>; 4] = Default::default();
    let mut ours_out = String::new();
    let mut agree = None;
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let t = Instant::now();
                for _ in 0..eval_passes {
                    eval_pass();
                }
                ours[0].push(t.elapsed().as_secs_f64() / (eval_passes * n) as f64);
                let t = Instant::now();
                for _ in 0..conv_passes {
                    conv_pass(&mut conv);
                }
                ours[1].push(t.elapsed().as_secs_f64() / (conv_passes * n) as f64);
                let (secs, out) = whole(Command::new(stoker).args(["yaql", "--jsonl"]), &corpus);
                ours[2].push(secs);
                ours[3].push(whole(Command::new(stoker).args(["yaql", "--jsonl"]), &empty).0);
                if round == 0 {
                    ours_out = out;
                }
            } else if let Some(p) = py.as_mut() {
                theirs[0].push(p.run("eval", 1) / n as f64);
                theirs[1].push(p.run("conv", 1) / n as f64);
                let mut cmd = Command::new(&python);
                cmd.arg("-c").arg(PY_WHOLE).arg(&oracle);
                let (secs, out) = whole(&mut cmd, &corpus);
                theirs[2].push(secs);
                let mut cmd = Command::new(&python);
                cmd.arg("-c").arg(PY_WHOLE).arg(&oracle);
                theirs[3].push(whole(&mut cmd, &empty).0);
                if round == 0 {
                    agree = Some(compare(&ours_out, &out, n));
                }
            }
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    drop(py);

    // Whole process less start-up, per evaluation.
    let per_eval = |w: &[f64], s: &[f64]| -> Vec<f64> {
        w.iter()
            .zip(s)
            .map(|(w, s)| (w - s).max(0.0) / n as f64)
            .collect()
    };
    let ours_net = per_eval(&ours[2], &ours[3]);
    let theirs_net = per_eval(&theirs[2], &theirs[3]);
    let whole_per: Vec<f64> = ours[2].iter().map(|w| w / n as f64).collect();
    let theirs_whole_per: Vec<f64> = theirs[2].iter().map(|w| w / n as f64).collect();

    println!(
        "{n} cases (fuel-conditions + fuel-ext), {rounds} rounds alternating the sides; \
         median (min–max) over the rounds"
    );
    println!(
        "stoker per round: {} passes for evaluation, {} for conversion, 1 whole process; \
         the reference: 1 pass each",
        eval_passes, conv_passes
    );
    if let Some(a) = &agree {
        println!("whole-process answers: {a}");
    }
    let mut table = vec![
        "| per evaluation, Fuel corpora | stoker | yaql 3.2.0 | ratio |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let rows: [Row; 5] = [
        (
            "evaluation (context prepared once)",
            &ours[0],
            &theirs[0],
            us,
        ),
        (
            "with conversion (request line → answer line, in process)",
            &ours[1],
            &theirs[1],
            us,
        ),
        (
            "whole process, per evaluation, start-up included",
            &whole_per,
            &theirs_whole_per,
            us,
        ),
        (
            "whole process, per evaluation, start-up excluded",
            &ours_net,
            &theirs_net,
            us,
        ),
        ("process start-up (no input)", &ours[3], &theirs[3], ms),
    ];
    for (name, o, t, unit) in rows {
        if t.is_empty() {
            table.push(format!("| {name} | {} | — | — |", spread(o, unit)));
        } else {
            table.push(format!(
                "| {name} | {} | {} | {} |",
                spread(o, unit),
                spread(t, unit),
                ratio(o, t)
            ));
        }
    }
    println!();
    println!("What bounds these figures:");
    println!(
        "- the corpus: {n} cases, each a ~5 KB document; a figure is the mean over them, so the \
         few expensive cases (changed() over whole sub-trees) weigh most"
    );
    println!(
        "- the reference's own per-call overhead (a child context, yaql's overload resolution, \
         the finaliser in Python) is part of its figure, as stoker's is of its own"
    );
    println!(
        "- whole process: start-up (Python importing yaql, ~{}) is in the first whole-process \
         row; the second subtracts each side's median start-up of that round",
        theirs[3]
            .first()
            .map(|s| ms(*s))
            .unwrap_or_else(|| "—".into())
    );
    println!(
        "- the timer: Instant / time.perf_counter over rounds of ≥ 0.1 s, far above their \
         resolution; the spread is the machine's load, which alternating rounds share"
    );
    println!();
    for row in table {
        println!("{row}");
    }
}

/// How many answer lines agree (as JSON values: 3 ≠ 3.0, key order ignored).
fn compare(ours: &str, theirs: &str, n: usize) -> String {
    let parse = |s: &str| -> Vec<Option<serde_json::Value>> {
        s.lines().map(|l| serde_json::from_str(l).ok()).collect()
    };
    let (a, b) = (parse(ours), parse(theirs));
    let same = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x.is_some() && x == y)
        .count();
    format!(
        "{same} of {n} agree (stoker answered {}, the reference {})",
        a.len(),
        b.len()
    )
}
