//! fio's arithmetic in job files: "anywhere a numeric value is required, an arithmetic
//! expression may be used, provided it is surrounded by parentheses" (`+ - * / % ^`, nested
//! parentheses, decimals), e.g. `bs=(4*1024)`, `size=(2^20)k`, `runtime=(60*5)s`.
//!
//! [`split`] separates `(EXPR)` from a unit suffix after it; the caller applies the unit
//! (fio reads a time expression without a unit in microseconds).

/// Evaluates an expression (without the surrounding parentheses). `None` for bad syntax,
/// division by zero or a result that is not finite.
pub(crate) fn eval(text: &str) -> Option<f64> {
    let tokens: Vec<char> = text.chars().filter(|c| !c.is_whitespace()).collect();
    let mut p = Parser { t: &tokens, i: 0 };
    let v = p.sum()?;
    (p.i == tokens.len() && v.is_finite()).then_some(v)
}

/// Splits `(EXPR)SUFFIX` into the value of EXPR and SUFFIX; `None` if `text` does not start
/// with a parenthesised expression or the expression is bad.
pub(crate) fn split(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    if !t.starts_with('(') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in t.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    let inner = t.get(1..i)?;
                    let rest = t.get(i + 1..)?;
                    return eval(inner).map(|v| (v, rest.trim()));
                }
            }
            _ => {}
        }
    }
    None
}

struct Parser<'a> {
    t: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.t.get(self.i).copied()
    }

    /// sum := product (('+' | '-') product)*
    fn sum(&mut self) -> Option<f64> {
        let mut v = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.i += 1;
            let r = self.product()?;
            v = if op == '+' { v + r } else { v - r };
        }
        Some(v)
    }

    /// product := power (('*' | '/' | '%') power)*
    fn product(&mut self) -> Option<f64> {
        let mut v = self.power()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.i += 1;
            let r = self.power()?;
            v = match op {
                '*' => v * r,
                _ if r == 0.0 => return None,
                '/' => v / r,
                _ => v % r,
            };
        }
        Some(v)
    }

    /// power := unary ('^' power)?   (right associative)
    fn power(&mut self) -> Option<f64> {
        let base = self.unary()?;
        if self.peek() == Some('^') {
            self.i += 1;
            let exp = self.power()?;
            return Some(base.powf(exp));
        }
        Some(base)
    }

    /// unary := '-' unary | atom
    fn unary(&mut self) -> Option<f64> {
        if self.peek() == Some('-') {
            self.i += 1;
            return self.unary().map(|v| -v);
        }
        self.atom()
    }

    /// atom := number | '(' sum ')'
    fn atom(&mut self) -> Option<f64> {
        if self.peek() == Some('(') {
            self.i += 1;
            let v = self.sum()?;
            if self.peek() != Some(')') {
                return None;
            }
            self.i += 1;
            return Some(v);
        }
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
            self.i += 1;
        }
        let text: String = self.t.get(start..self.i)?.iter().collect();
        text.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_fios_operators_with_precedence() {
        assert_eq!(eval("4*1024"), Some(4096.0));
        assert_eq!(eval("1+2*3"), Some(7.0));
        assert_eq!(eval("(1+2)*3"), Some(9.0));
        assert_eq!(eval("2^3^2"), Some(512.0));
        assert_eq!(eval("10%4"), Some(2.0));
        assert_eq!(eval("-3+5"), Some(2.0));
        assert_eq!(eval("1.5*2"), Some(3.0));
        assert_eq!(eval("1/0"), None);
        assert_eq!(eval("2*"), None);
        assert_eq!(eval("(2"), None);
        assert_eq!(split("(4*1024)k"), Some((4096.0, "k")));
        assert_eq!(split(" (60*5) s"), Some((300.0, "s")));
        assert_eq!(split("4k"), None);
    }
}
