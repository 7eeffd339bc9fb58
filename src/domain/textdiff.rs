//! Line diff (longest common subsequence) for template history and payload comparisons.

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum DiffLine {
    Same(String),
    Added(String),
    Removed(String),
}

/// Lines beyond which the quadratic table would cost too much; larger inputs are shown as a
/// whole replacement instead.
const MAX_CELLS: usize = 4_000_000;

/// The line diff turning `before` into `after`.
pub fn diff_lines(before: &str, after: &str) -> Vec<DiffLine> {
    let a: Vec<&str> = before.lines().collect();
    let b: Vec<&str> = after.lines().collect();
    if (a.len() + 1) * (b.len() + 1) > MAX_CELLS {
        return a
            .iter()
            .map(|l| DiffLine::Removed((*l).to_owned()))
            .chain(b.iter().map(|l| DiffLine::Added((*l).to_owned())))
            .collect();
    }
    // lcs[i][j] = LCS length of a[i..] and b[j..].
    let mut lcs = vec![vec![0_u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(DiffLine::Same(a[i].to_owned()));
            i += 1;
            j += 1;
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(DiffLine::Removed(a[i].to_owned()));
            i += 1;
        } else {
            out.push(DiffLine::Added(b[j].to_owned()));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| DiffLine::Removed((*l).to_owned())));
    out.extend(b[j..].iter().map(|l| DiffLine::Added((*l).to_owned())));
    out
}

/// Whether a diff changes anything.
pub fn has_changes(d: &[DiffLine]) -> bool {
    d.iter().any(|l| !matches!(l, DiffLine::Same(_)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_inserted_and_removed_lines() {
        let d = diff_lines("a\nb\nc\n", "a\nc\nd\n");
        assert_eq!(
            d,
            vec![
                DiffLine::Same("a".into()),
                DiffLine::Removed("b".into()),
                DiffLine::Same("c".into()),
                DiffLine::Added("d".into())
            ]
        );
        assert!(!has_changes(&diff_lines("x\ny", "x\ny")));
    }
}
