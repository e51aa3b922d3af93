//! yaql's `math` module: arithmetic operators with Python semantics (floor division of ints,
//! `%` with the divisor's sign, int/float kept apart), comparisons of numbers, `abs`, `int`,
//! `float`, bitwise functions, `max`/`min` of two values, `pow`, `sign`, `round` (half to
//! even), `isInteger`, `isNumber`. `random` is left out (not deterministic). Must not do I/O.

use crate::error::{ErrorKind, Result, YaqlError, err};
use crate::interp::{Call, Interp};
use crate::registry::{Def, Form, Registry, Ty, p};
use crate::value::Value;

fn overflow() -> YaqlError {
    YaqlError::new(
        ErrorKind::OverflowError,
        "integer result does not fit in 64 bits (stoker has no big integers)",
    )
}

fn zero_div(what: &str) -> YaqlError {
    YaqlError::new(ErrorKind::ZeroDivisionError, what.to_string())
}

fn f(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        Value::Bool(b) => f64::from(u8::from(*b)),
        _ => 0.0,
    }
}

fn int_float_cmp(a: &Value, b: &Value) -> std::cmp::Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        _ => f(a).partial_cmp(&f(b)).unwrap_or(std::cmp::Ordering::Equal),
    }
}

/// Python `%` on floats.
pub fn py_fmod(a: f64, b: f64) -> f64 {
    let m = a % b;
    if m != 0.0 && ((m < 0.0) != (b < 0.0)) {
        m + b
    } else {
        m
    }
}

pub fn arith(op: char, a: &Value, b: &Value) -> Result<Value> {
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        let (x, y) = (*x, *y);
        return Ok(Value::Int(match op {
            '+' => x.checked_add(y).ok_or_else(overflow)?,
            '-' => x.checked_sub(y).ok_or_else(overflow)?,
            '*' => x.checked_mul(y).ok_or_else(overflow)?,
            '/' => {
                if y == 0 {
                    return Err(zero_div("integer division or modulo by zero"));
                }
                x.checked_div_euclid(y).ok_or_else(overflow)?;
                let q = x / y;
                if (x % y != 0) && ((x < 0) != (y < 0)) {
                    q - 1
                } else {
                    q
                }
            }
            _ => {
                if y == 0 {
                    return Err(zero_div("integer division or modulo by zero"));
                }
                let m = x.checked_rem(y).ok_or_else(overflow)?;
                if m != 0 && ((m < 0) != (y < 0)) {
                    m + y
                } else {
                    m
                }
            }
        }));
    }
    let (x, y) = (f(a), f(b));
    Ok(Value::Float(match op {
        '+' => x + y,
        '-' => x - y,
        '*' => x * y,
        '/' => {
            if y == 0.0 {
                return Err(zero_div("float division by zero"));
            }
            x / y
        }
        _ => {
            if y == 0.0 {
                return Err(zero_div("float modulo"));
            }
            py_fmod(x, y)
        }
    }))
}

fn num2(name: &'static str) -> Vec<crate::registry::Param> {
    let _ = name;
    vec![p("left", Ty::Number), p("right", Ty::Number)]
}

/// Python `round(x, n)`: half to even; ints stay ints.
pub fn py_round(v: &Value, nd: i64) -> Result<Value> {
    match v {
        Value::Int(i) => {
            if nd >= 0 {
                return Ok(Value::Int(*i));
            }
            let p = 10i64.checked_pow((-nd) as u32).ok_or_else(overflow)?;
            let q = i.div_euclid(p);
            let r = i.rem_euclid(p);
            let half = p / 2;
            let q = if r > half || (r == half && p % 2 == 0 && q % 2 != 0) {
                q + 1
            } else {
                q
            };
            Ok(Value::Int(q.checked_mul(p).ok_or_else(overflow)?))
        }
        _ => {
            let x = f(v);
            if !x.is_finite() {
                return Ok(Value::Float(x));
            }
            // Python rounds the exact decimal value of the double: go through its repr with
            // enough digits, then round half to even on the decimal string.
            Ok(Value::Float(round_decimal(x, nd)))
        }
    }
}

/// Round the exact decimal value of `x` to `nd` digits, half to even, as Python does.
fn round_decimal(x: f64, nd: i64) -> f64 {
    if nd > 330 {
        return x;
    }
    if nd < -330 {
        return 0.0 * x.signum();
    }
    let neg = x < 0.0;
    // 400 places is more than a double's exact expansion has below 1e-330
    let s = format!("{:.400}", x.abs());
    let (int, frac) = s.split_once('.').unwrap_or((&s, ""));
    let digits: Vec<u8> = int.bytes().chain(frac.bytes()).map(|b| b - b'0').collect();
    let point = int.len() as i64;
    let keep = point + nd; // number of leading digits kept
    if keep < 0 {
        return if neg { -0.0 } else { 0.0 };
    }
    let keep = keep as usize;
    let mut kept: Vec<u8> = digits[..keep.min(digits.len())].to_vec();
    let rest = &digits[keep.min(digits.len())..];
    let up = match rest.first() {
        Some(&d) if d > 5 => true,
        Some(5) => rest[1..].iter().any(|&d| d != 0) || kept.last().is_some_and(|d| d % 2 == 1),
        _ => false,
    };
    if up {
        let mut i = kept.len();
        loop {
            if i == 0 {
                kept.insert(0, 1);
                break;
            }
            i -= 1;
            if kept[i] == 9 {
                kept[i] = 0;
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    let mut text: String = kept.iter().map(|d| char::from(b'0' + d)).collect();
    if text.is_empty() {
        text.push('0');
    }
    let exp = -nd; // the kept digits are an integer scaled by 10^-nd
    let v: f64 = format!("{text}e{exp}").parse().unwrap_or(x);
    if neg { -v } else { v }
}

fn parse_int(s: &str) -> Result<Value> {
    let t = s.trim();
    let t2: String = t.chars().filter(|c| *c != '_').collect();
    let ok_underscores = !t.starts_with('_') && !t.ends_with('_') && !t.contains("__");
    match t2.parse::<i64>() {
        Ok(i) if ok_underscores && !t2.is_empty() => Ok(Value::Int(i)),
        _ => {
            if !t2.is_empty()
                && t2
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
            {
                return Err(overflow());
            }
            err(
                ErrorKind::ValueError,
                format!(
                    "invalid literal for int() with base 10: {}",
                    crate::value::str_repr(s)
                ),
            )
        }
    }
}

fn parse_float(s: &str) -> Result<Value> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.replace('_', "");
    let special = match t.trim_start_matches(['+', '-']) {
        "inf" | "infinity" => Some(f64::INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    };
    if let Some(x) = special {
        return Ok(Value::Float(if t.starts_with('-') { -x } else { x }));
    }
    let valid = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-'));
    match t.parse::<f64>() {
        Ok(x) if valid => Ok(Value::Float(x)),
        _ => err(
            ErrorKind::ValueError,
            format!(
                "could not convert string to float: {}",
                crate::value::str_repr(s)
            ),
        ),
    }
}

pub fn register(r: &mut Registry) {
    for (name, op) in [
        ("#operator_+", '+'),
        ("#operator_-", '-'),
        ("#operator_*", '*'),
        ("#operator_/", '/'),
        ("#operator_mod", '%'),
    ] {
        let imp: fn(&Interp, &mut Call) -> Result<Value> = match op {
            '+' => |_, c| arith('+', c.val(0), c.val(1)),
            '-' => |_, c| arith('-', c.val(0), c.val(1)),
            '*' => |_, c| arith('*', c.val(0), c.val(1)),
            '/' => |_, c| arith('/', c.val(0), c.val(1)),
            _ => |_, c| arith('%', c.val(0), c.val(1)),
        };
        r.add(name, Form::Function, num2(name), imp);
    }
    r.add(
        "#unary_operator_+",
        Form::Function,
        vec![p("op", Ty::Number)],
        |_, c| Ok(c.take(0)),
    );
    r.add(
        "#unary_operator_-",
        Form::Function,
        vec![p("op", Ty::Number)],
        |_, c| {
            Ok(match c.val(0) {
                Value::Int(i) => Value::Int(i.checked_neg().ok_or_else(overflow)?),
                Value::Float(x) => Value::Float(-x),
                _ => Value::Null,
            })
        },
    );
    r.add("#operator_>", Form::Function, num2(""), |_, c| {
        Ok(Value::Bool(
            int_float_cmp(c.val(0), c.val(1)).is_gt() && !nan(c),
        ))
    });
    r.add("#operator_>=", Form::Function, num2(""), |_, c| {
        Ok(Value::Bool(
            int_float_cmp(c.val(0), c.val(1)).is_ge() && !nan(c),
        ))
    });
    r.add("#operator_<", Form::Function, num2(""), |_, c| {
        Ok(Value::Bool(
            int_float_cmp(c.val(0), c.val(1)).is_lt() && !nan(c),
        ))
    });
    r.add("#operator_<=", Form::Function, num2(""), |_, c| {
        Ok(Value::Bool(
            int_float_cmp(c.val(0), c.val(1)).is_le() && !nan(c),
        ))
    });
    r.add("abs", Form::Function, vec![p("op", Ty::Number)], |_, c| {
        Ok(match c.val(0) {
            Value::Int(i) => Value::Int(i.checked_abs().ok_or_else(overflow)?),
            Value::Float(x) => Value::Float(x.abs()),
            _ => Value::Null,
        })
    });
    r.add("int", Form::Function, vec![p("value", Ty::Any)], |_, c| {
        match c.val(0) {
            Value::Null => Ok(Value::Int(0)),
            Value::Int(i) => Ok(Value::Int(*i)),
            Value::Bool(b) => Ok(Value::Int(i64::from(*b))),
            Value::Float(x) => {
                if !x.is_finite() {
                    return err(
                        if x.is_nan() { ErrorKind::ValueError } else { ErrorKind::OverflowError },
                        "cannot convert float to integer",
                    );
                }
                let t = x.trunc();
                if t.abs() >= 9.223_372_036_854_776e18 {
                    return Err(overflow());
                }
                Ok(Value::Int(t as i64))
            }
            Value::Str(s) => parse_int(s),
            other => err(
                ErrorKind::TypeError,
                format!(
                    "int() argument must be a string, a bytes-like object or a real number, not '{}'",
                    other.type_name()
                ),
            ),
        }
    });
    r.add(
        "float",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, c| match c.val(0) {
            Value::Null => Ok(Value::Float(0.0)),
            Value::Int(i) => Ok(Value::Float(*i as f64)),
            Value::Bool(b) => Ok(Value::Float(f64::from(u8::from(*b)))),
            Value::Float(x) => Ok(Value::Float(*x)),
            Value::Str(s) => parse_float(s),
            other => err(
                ErrorKind::TypeError,
                format!(
                    "float() argument must be a string or a real number, not '{}'",
                    other.type_name()
                ),
            ),
        },
    );
    let bit2 = || vec![p("left", Ty::PyInt), p("right", Ty::PyInt)];
    r.add("bitwiseAnd", Form::Function, bit2(), |_, c| {
        Ok(Value::Int(c.int(0) & c.int(1)))
    });
    r.add("bitwiseOr", Form::Function, bit2(), |_, c| {
        Ok(Value::Int(c.int(0) | c.int(1)))
    });
    r.add("bitwiseXor", Form::Function, bit2(), |_, c| {
        Ok(Value::Int(c.int(0) ^ c.int(1)))
    });
    r.add(
        "bitwiseNot",
        Form::Function,
        vec![p("arg", Ty::PyInt)],
        |_, c| Ok(Value::Int(!c.int(0))),
    );
    r.add(
        "shiftBitsRight",
        Form::Function,
        vec![p("value", Ty::PyInt), p("bitsNumber", Ty::PyInt)],
        |_, c| {
            let n = c.int(1);
            if n < 0 {
                return err(ErrorKind::ValueError, "negative shift count");
            }
            Ok(Value::Int(c.int(0) >> n.min(63)))
        },
    );
    r.add(
        "shiftBitsLeft",
        Form::Function,
        vec![p("value", Ty::PyInt), p("bitsNumber", Ty::PyInt)],
        |_, c| {
            let (v, n) = (c.int(0), c.int(1));
            if n < 0 {
                return err(ErrorKind::ValueError, "negative shift count");
            }
            if v == 0 {
                return Ok(Value::Int(0));
            }
            if n >= 63 || (v.unsigned_abs().leading_zeros() as i64) <= n {
                return Err(overflow());
            }
            Ok(Value::Int(v << n))
        },
    );
    r.add(
        "max",
        Form::Function,
        vec![p("a", Ty::Any), p("b", Ty::Any)],
        |it, c| {
            let (a, b) = (c.val(0).clone(), c.val(1).clone());
            if it
                .call_fn("#operator_>", vec![b.clone(), a.clone()], c.ctx)?
                .truthy()
            {
                Ok(b)
            } else {
                Ok(a)
            }
        },
    );
    r.add(
        "min",
        Form::Function,
        vec![p("a", Ty::Any), p("b", Ty::Any)],
        |it, c| {
            let (a, b) = (c.val(0).clone(), c.val(1).clone());
            if it
                .call_fn("#operator_>", vec![b.clone(), a.clone()], c.ctx)?
                .truthy()
            {
                Ok(a)
            } else {
                Ok(b)
            }
        },
    );
    r.add(
        "pow",
        Form::Function,
        vec![
            p("a", Ty::Number),
            p("b", Ty::Number),
            p("c", Ty::Number).null().def(Def::Null),
        ],
        |_, c| pow(c.val(0), c.val(1), c.val(2)),
    );
    r.add(
        "sign",
        Form::Function,
        vec![p("num", Ty::Number)],
        |_, c| {
            let x = f(c.val(0));
            Ok(Value::Int(if x > 0.0 {
                1
            } else if x < 0.0 {
                -1
            } else {
                0
            }))
        },
    );
    r.add(
        "round",
        Form::Function,
        vec![
            p("number", Ty::Number),
            p("ndigits", Ty::PyInt).def(Def::Int(0)),
        ],
        |_, c| {
            // round(x, 0) with an explicit or default ndigits keeps floats floats
            py_round(c.val(0), c.int(1))
        },
    );
    r.add(
        "isInteger",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, c| Ok(Value::Bool(matches!(c.val(0), Value::Int(_)))),
    );
    r.add(
        "isNumber",
        Form::Function,
        vec![p("value", Ty::Any)],
        |_, c| Ok(Value::Bool(c.val(0).is_number())),
    );
}

fn nan(c: &Call) -> bool {
    matches!(c.val(0), Value::Float(x) if x.is_nan())
        || matches!(c.val(1), Value::Float(x) if x.is_nan())
}

fn pow(a: &Value, b: &Value, m: &Value) -> Result<Value> {
    if !m.is_null() {
        let (Value::Int(x), Value::Int(y), Value::Int(z)) = (a, b, m) else {
            return err(
                ErrorKind::TypeError,
                "pow() 3rd argument not allowed unless all arguments are integers",
            );
        };
        if *z == 0 {
            return err(ErrorKind::ValueError, "pow() 3rd argument cannot be 0");
        }
        if *y < 0 {
            return err(
                ErrorKind::ValueError,
                "base is not invertible for the given modulus",
            );
        }
        let (mut base, mut exp, modu) =
            ((*x as i128).rem_euclid(*z as i128), *y as u64, *z as i128);
        let mut acc: i128 = 1 % modu.abs();
        while exp > 0 {
            if exp & 1 == 1 {
                acc = (acc * base).rem_euclid(modu.abs());
            }
            base = (base * base).rem_euclid(modu.abs());
            exp >>= 1;
        }
        // Python's result takes the modulus's sign
        if modu < 0 && acc != 0 {
            acc += modu;
        }
        return Ok(Value::Int(acc as i64));
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) if *y >= 0 => {
            let e = u32::try_from(*y).map_err(|_| overflow())?;
            Ok(Value::Int(x.checked_pow(e).ok_or_else(overflow)?))
        }
        (Value::Int(x), Value::Int(y)) => {
            if *x == 0 {
                return Err(zero_div("0.0 cannot be raised to a negative power"));
            }
            Ok(Value::Float((*x as f64).powf(*y as f64)))
        }
        _ => {
            let (x, y) = (f(a), f(b));
            if x == 0.0 && y < 0.0 {
                return Err(zero_div("0.0 cannot be raised to a negative power"));
            }
            if x < 0.0 && y.fract() != 0.0 {
                return err(
                    ErrorKind::ValueError,
                    "negative number cannot be raised to a fractional power (complex result)",
                );
            }
            let r = x.powf(y);
            if r.is_infinite() && x.is_finite() && y.is_finite() {
                return err(
                    ErrorKind::OverflowError,
                    "(34, 'Numerical result out of range')",
                );
            }
            Ok(Value::Float(r))
        }
    }
}
