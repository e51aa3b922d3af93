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
corpora = [[l.rstrip("\n") for l in open(f) if l.strip()] for f in sys.argv[2:]]
lines = corpora[0]
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
for c in corpora:
    for l in c: answer(l)
print("ready", flush=True)
for cmd in sys.stdin:
    what, n, which = cmd.split()
    t = time.perf_counter()
    for _ in range(int(n)):
        if what == "eval":
            for p in ready: ev(p)
        else:
            for l in corpora[int(which)]: answer(l)
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
type Row = (String, Vec<f64>, Vec<f64>, fn(f64) -> String);

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
    fn start(python: &str, oracle: &Path, corpora: &[PathBuf]) -> Result<Py, String> {
        let mut child = Command::new(python)
            .arg("-c")
            .arg(PY_DRIVER)
            .arg(oracle)
            .args(corpora)
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

    /// Seconds for `passes` passes of `what` over corpus `which`.
    fn run(&mut self, what: &str, passes: usize, which: usize) -> f64 {
        let stdin = self.child.stdin.as_mut().expect("python stdin");
        writeln!(stdin, "{what} {passes} {which}").expect("write to python");
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

/// The three forms of the corpus every conversion figure is given for.
const VARIANTS: [(&str, &str); 3] = [
    (
        "as is",
        "the corpus's lines: 231 cases over 2 distinct data documents, so most lines repeat \
         another's data whole",
    ),
    (
        "per node",
        "each line's data and old get a distinct top-level `uid` (one node each, as a plan's \
         nodes are): the documents differ, their sub-trees are the corpus's",
    ),
    (
        "distinct",
        "every object and array of every line opens with white space that numbers it, so no \
         two containers have the same text and nothing can be shared (the values are those \
         of the corpus)",
    ),
];

/// `v` as JSON, each object and array opening with white space that spells `tag` (then
/// incremented) in binary, spaces and tabs, so no two containers written by one writer have
/// the same text (and a line stays one line).
fn write_tagged(v: &serde_json::Value, tag: &mut u64, out: &mut String) {
    let mut open = |c: char, out: &mut String| {
        out.push(c);
        let mut t = *tag;
        *tag += 1;
        loop {
            out.push([' ', '\t'][(t & 1) as usize]);
            t >>= 1;
            if t == 0 {
                break;
            }
        }
    };
    match v {
        serde_json::Value::Array(a) => {
            open('[', out);
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_tagged(x, tag, out);
            }
            out.push(']');
        }
        serde_json::Value::Object(o) => {
            open('{', out);
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).expect("key"));
                out.push(':');
                write_tagged(x, tag, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).expect("scalar")),
    }
}

/// Variant `which` of the request made of `case`'s fields, line `i`.
fn request_line(case: &serde_json::Value, which: usize, i: usize, tag: &mut u64) -> String {
    let mut req = serde_json::Map::new();
    for k in ["expr", "data", "old", "vars"] {
        if let Some(v) = case.get(k) {
            let mut v = v.clone();
            if which == 1
                && (k == "data" || k == "old")
                && let serde_json::Value::Object(o) = &mut v
            {
                o.insert(
                    "uid".into(),
                    serde_json::Value::String(format!("{}", 1000 + i)),
                );
            }
            req.insert(k.to_string(), v);
        }
    }
    let req = serde_json::Value::Object(req);
    if which == 2 {
        let mut out = String::new();
        write_tagged(&req, tag, &mut out);
        out
    } else {
        req.to_string()
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
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
    let mut cases = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_else(|e| {
            eprintln!("cannot read {}: {e}", f.display());
            std::process::exit(2);
        });
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            cases.push(serde_json::from_str::<serde_json::Value>(line).expect("case line"));
        }
    }
    let n = cases.len();
    // The request lines of each variant, as yaql-check.py sends them.
    let mut tag = 0;
    let variants: Vec<Vec<String>> = (0..VARIANTS.len())
        .map(|w| {
            cases
                .iter()
                .enumerate()
                .map(|(i, c)| request_line(c, w, i, &mut tag))
                .collect()
        })
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let corpora: Vec<PathBuf> = variants
        .iter()
        .enumerate()
        .map(|(w, lines)| {
            let p = dir.path().join(format!("requests-{w}.jsonl"));
            std::fs::write(&p, lines.join("\n") + "\n").expect("write corpus");
            p
        })
        .collect();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").expect("write empty");
    let oracle = shared.join("tools/yaql-oracle.py");
    let python = std::env::var("YAQL_PYTHON").unwrap_or_else(|_| "/tmp/yaqlvenv/bin/python".into());
    let stoker = env!("CARGO_BIN_EXE_stoker");
    let load_before = load_average();

    // stoker, warmed up: contexts prepared once, and the request → answer path. Each
    // conversion pass starts with a fresh converter, as a process does, so nothing is shared
    // between passes; the engine's parse cache stays warm on both sides.
    let engine = Engine::new(Limits::default());
    let mut conv = Converter::new();
    let ready: Vec<(String, Context)> = variants[0]
        .iter()
        .map(|l| jsonl::request(&mut conv, l).expect("request line"))
        .collect();
    let mut buf = Vec::new();
    let eval_pass = || {
        for (e, ctx) in &ready {
            let _ = std::hint::black_box(engine.eval(e, ctx));
        }
    };
    let mut conv_pass = |lines: &[String]| {
        let mut conv = Converter::new();
        for l in lines {
            buf.clear();
            jsonl::answer(&engine, &mut conv, l, &mut buf);
            std::hint::black_box(&buf);
        }
        conv.stats()
    };
    eval_pass();
    let share_stats: Vec<_> = variants.iter().map(|v| conv_pass(v)).collect();
    // Passes per round: enough for about a quarter of a second each.
    let t = Instant::now();
    eval_pass();
    let eval_passes = ((0.25 / t.elapsed().as_secs_f64()) as usize).clamp(1, 1000);
    let conv_passes: Vec<usize> = variants
        .iter()
        .map(|v| {
            let t = Instant::now();
            conv_pass(v);
            ((0.25 / t.elapsed().as_secs_f64()) as usize).clamp(1, 1000)
        })
        .collect();

    let mut py = match Py::start(&python, &oracle, &corpora) {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("{e}: only stoker's figures follow");
            None
        }
    };
    // Per side: [0] evaluation; per variant w: [1 + w] in process, [4 + w] whole process;
    // [7] start-up.
    const SLOTS: usize = 8;
    let mut ours: [Vec<f64>; SLOTS] = Default::default();
    let mut theirs: [Vec<f64>; SLOTS] = Default::default();
    let mut ours_out: Vec<String> = vec![String::new(); VARIANTS.len()];
    let mut agree: Vec<String> = Vec::new();
    let py_whole = |corpus: &Path| {
        let mut cmd = Command::new(&python);
        cmd.arg("-c").arg(PY_WHOLE).arg(&oracle);
        whole(&mut cmd, corpus)
    };
    let stoker_whole =
        |corpus: &Path| whole(Command::new(stoker).args(["yaql", "--jsonl"]), corpus);
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                let t = Instant::now();
                for _ in 0..eval_passes {
                    eval_pass();
                }
                ours[0].push(t.elapsed().as_secs_f64() / (eval_passes * n) as f64);
                for (w, lines) in variants.iter().enumerate() {
                    let t = Instant::now();
                    for _ in 0..conv_passes[w] {
                        conv_pass(lines);
                    }
                    ours[1 + w].push(t.elapsed().as_secs_f64() / (conv_passes[w] * n) as f64);
                    let (secs, out) = stoker_whole(&corpora[w]);
                    ours[4 + w].push(secs);
                    if round == 0 {
                        ours_out[w] = out;
                    }
                }
                ours[7].push(stoker_whole(&empty).0);
            } else if let Some(p) = py.as_mut() {
                theirs[0].push(p.run("eval", 1, 0) / n as f64);
                for w in 0..VARIANTS.len() {
                    theirs[1 + w].push(p.run("conv", 1, w) / n as f64);
                    let (secs, out) = py_whole(&corpora[w]);
                    theirs[4 + w].push(secs);
                    if round == 0 {
                        agree.push(compare(&ours_out[w], &out, n));
                    }
                }
                theirs[7].push(py_whole(&empty).0);
            }
        }
        eprintln!(
            "round {} of {rounds} done (load average {})",
            round + 1,
            load_average()
        );
    }
    drop(py);
    let load_after = load_average();

    // Whole process per evaluation, with and without each round's start-up.
    let per = |w: &[f64], s: &[f64], less_start: bool| -> Vec<f64> {
        w.iter()
            .zip(s)
            .map(|(w, s)| (w - if less_start { *s } else { 0.0 }).max(0.0) / n as f64)
            .collect()
    };
    let bytes: Vec<usize> = variants
        .iter()
        .map(|v| v.iter().map(|l| l.len() + 1).sum())
        .collect();

    println!(
        "{n} cases (fuel-conditions + fuel-ext), {rounds} rounds alternating the sides (the \
         side that goes first alternates too); median (min–max) over the rounds"
    );
    println!(
        "stoker per round: {eval_passes} passes for evaluation, {conv_passes:?} for conversion \
         (as is, per node, distinct), 1 whole process each; the reference: 1 pass each"
    );
    println!(
        "load average before {load_before}, after {load_after} (2 cores shared with other builds shows here)"
    );
    println!();
    println!(
        "The corpus in three forms (conversion and whole-process figures are given for each):"
    );
    for (w, (name, what)) in VARIANTS.iter().enumerate() {
        let st = share_stats[w];
        println!(
            "- {name}: {what}; {} KB; stoker's converter found {} sub-trees ({} KB of text) \
             in its table and converted {} in full",
            bytes[w] / 1000,
            st.hits,
            st.hit_bytes / 1000,
            st.stored
        );
    }
    for (w, a) in agree.iter().enumerate() {
        println!("whole-process answers, {}: {a}", VARIANTS[w].0);
    }
    let mut table = vec![
        "| per evaluation, Fuel corpora | stoker | yaql 3.2.0 | ratio |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let mut rows: Vec<Row> = vec![(
        "evaluation alone (context prepared once)".into(),
        ours[0].clone(),
        theirs[0].clone(),
        us,
    )];
    for (w, (name, _)) in VARIANTS.iter().enumerate() {
        rows.push((
            format!("with conversion, in process, {name} (request line → answer line)"),
            ours[1 + w].clone(),
            theirs[1 + w].clone(),
            us,
        ));
    }
    for (w, (name, _)) in VARIANTS.iter().enumerate() {
        rows.push((
            format!("whole process, {name}, start-up included"),
            per(&ours[4 + w], &ours[7], false),
            per(&theirs[4 + w], &theirs[7], false),
            us,
        ));
        rows.push((
            format!("whole process, {name}, start-up excluded"),
            per(&ours[4 + w], &ours[7], true),
            per(&theirs[4 + w], &theirs[7], true),
            us,
        ));
    }
    rows.push((
        "process start-up (no input)".into(),
        ours[7].clone(),
        theirs[7].clone(),
        ms,
    ));
    for (name, o, t, unit) in rows {
        if t.is_empty() {
            table.push(format!("| {name} | {} | — | — |", spread(&o, unit)));
        } else {
            table.push(format!(
                "| {name} | {} | {} | {} |",
                spread(&o, unit),
                spread(&t, unit),
                ratio(&o, &t)
            ));
        }
    }
    println!();
    println!("What bounds these figures:");
    println!(
        "- the offered load: each whole process is given its corpus ({} lines, {}–{} KB) from a \
         file on stdin, all at once, and its answers are read to the end by this bench; nothing \
         paces either side but its own work and the pipe",
        n,
        bytes.iter().min().unwrap_or(&0) / 1000,
        bytes.iter().max().unwrap_or(&0) / 1000
    );
    println!(
        "- the client: this bench spawns each process and collects its output whole \
         (Command::output); the in-process figures have no client at all"
    );
    println!(
        "- the corpus: a figure is the mean over {n} cases, so the few expensive cases \
         (changed() over whole sub-trees) weigh most; 'as is' repeats its data, which stoker's \
         converter shares and Python's json.loads does not: 'per node' is what a plan's nodes \
         look like, 'distinct' is the interpreter with no sharing at all"
    );
    println!(
        "- the reference's own per-call overhead (a child context, yaql's overload resolution, \
         the finaliser in Python) is part of its figure, as stoker's is of its own"
    );
    println!(
        "- start-up (Python importing yaql, ~{}; stoker ~{}) is in the 'start-up included' rows; \
         'start-up excluded' subtracts each side's start-up of the same round",
        theirs[7]
            .first()
            .map(|s| ms(*s))
            .unwrap_or_else(|| "—".into()),
        ours[7]
            .first()
            .map(|s| ms(*s))
            .unwrap_or_else(|| "—".into())
    );
    println!(
        "- the timer: Instant / time.perf_counter over rounds of ≥ 0.1 s, far above their \
         resolution; the spread is the machine's load, which alternating rounds share. On a \
         loaded machine a short process also waits for a core for much of its wall time \
         (stoker's whole process is ~10 ms of CPU): compare the load average above"
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
