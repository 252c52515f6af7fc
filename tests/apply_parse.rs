//! Tests of the patch parser (`patchbox::patch::parse`): git and traditional formats, quoting,
//! binary hunks and the delta decoder, error reporting, and robustness on garbage.

mod gitcmd;

use gitcmd::git;
use patchbox::git::oid::blob_id_hex as git_blob_id;
use patchbox::git::quote::unquote_c_style;
use patchbox::patch::model::{apply_delta, BinaryKind, BinaryPatch, LineKind};
use patchbox::patch::parse::{parse_patch, parse_patch_strip};
use patchbox::Error;
use proptest::prelude::*;

fn parse_line(e: &Error) -> usize {
    match e {
        Error::PatchParse { line, .. } => *line,
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn simple_git_modification() {
    let text = b"commit message\n\ndiff --git a/src/x.rs b/src/x.rs\n\
index 1111111..2222222 100644\n\
--- a/src/x.rs\n\
+++ b/src/x.rs\n\
@@ -1,3 +1,3 @@ fn main\n\
\x20a\n\
-b\n\
+B\n\
\x20c\n\
@@ -10 +10,2 @@\n\
\x20x\n\
+y\n\
-- \n2.39.5\n";
    let p = parse_patch(text).unwrap();
    assert_eq!(p.files.len(), 1);
    let f = &p.files[0];
    assert_eq!(f.old_path.as_ref().unwrap().to_string(), "src/x.rs");
    assert_eq!(f.new_path.as_ref().unwrap().to_string(), "src/x.rs");
    assert_eq!(f.old_mode, Some(0o100644));
    assert_eq!(f.new_mode, Some(0o100644));
    assert_eq!(f.old_oid.as_deref(), Some("1111111"));
    assert_eq!(f.line, 3);
    assert_eq!(f.hunks.len(), 2);
    let h = &f.hunks[0];
    assert_eq!(
        (h.old_start, h.old_len, h.new_start, h.new_len),
        (1, 3, 1, 3)
    );
    assert_eq!(h.section, b"fn main");
    assert_eq!(h.lines[1].kind, LineKind::Delete);
    assert_eq!(h.lines[1].text, b"b\n");
    let h2 = &f.hunks[1];
    assert_eq!((h2.old_start, h2.old_len, h2.new_len), (10, 1, 2));
    assert_eq!(h2.header(), "@@ -10,1 +10,2 @@");
}

#[test]
fn no_newline_markers() {
    let text = b"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n";
    let p = parse_patch(text).unwrap();
    let l = &p.files[0].hunks[0].lines;
    assert_eq!(l[1].text, b"b");
    assert_eq!(l[2].text, b"c");
    assert_eq!(l[0].text, b"a\n");
}

#[test]
fn empty_context_line_is_accepted() {
    // Some editors strip the single space of empty context lines.
    let text = b"--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n";
    let p = parse_patch(text).unwrap();
    assert_eq!(p.files[0].hunks[0].lines[1].text, b"\n");
    assert_eq!(p.files[0].hunks[0].lines[1].kind, LineKind::Context);
}

#[test]
fn creation_deletion_modes_renames_copies() {
    let text = b"diff --git a/new.sh b/new.sh\n\
new file mode 100755\n\
index 0000000..e69de29\n\
diff --git a/gone b/gone\n\
deleted file mode 100644\n\
index e69de29..0000000\n\
diff --git a/mode b/mode\n\
old mode 100644\n\
new mode 100755\n\
diff --git a/old name.txt b/new name.txt\n\
similarity index 90%\n\
rename from old name.txt\n\
rename to new name.txt\n\
index 1234567..89abcde 100644\n\
--- a/old name.txt\t\n\
+++ b/new name.txt\t\n\
@@ -1 +1 @@\n\
-x\n\
+y\n\
diff --git a/src b/dst\n\
similarity index 100%\n\
copy from src\n\
copy to dst\n\
diff --git a/link b/link\n\
new file mode 120000\n\
index 0000000..1de5659\n\
--- /dev/null\n\
+++ b/link\n\
@@ -0,0 +1 @@\n\
+target\n\
\\ No newline at end of file\n";
    let p = parse_patch(text).unwrap();
    assert_eq!(p.files.len(), 6);
    let f = &p.files[0];
    assert!(f.is_creation() && f.new_mode == Some(0o100755) && f.hunks.is_empty());
    let f = &p.files[1];
    assert!(f.is_deletion() && f.old_mode == Some(0o100644));
    let f = &p.files[2];
    assert_eq!((f.old_mode, f.new_mode), (Some(0o100644), Some(0o100755)));
    let f = &p.files[3];
    assert!(f.is_rename);
    assert_eq!(f.similarity, Some(90));
    assert_eq!(f.old_path.as_ref().unwrap().to_string(), "old name.txt");
    assert_eq!(f.new_path.as_ref().unwrap().to_string(), "new name.txt");
    let f = &p.files[4];
    assert!(f.is_copy && !f.is_rename);
    assert_eq!(f.old_path.as_ref().unwrap().to_string(), "src");
    assert_eq!(f.new_path.as_ref().unwrap().to_string(), "dst");
    let f = &p.files[5];
    assert_eq!(f.new_mode, Some(0o120000));
    assert_eq!(f.hunks[0].lines[0].text, b"target");
    let names: Vec<String> = p.paths().iter().map(|p| p.to_string()).collect();
    assert_eq!(
        names,
        [
            "new.sh",
            "gone",
            "mode",
            "old name.txt",
            "new name.txt",
            "src",
            "dst",
            "link"
        ]
    );
}

#[test]
fn quoted_names() {
    let text = br#"diff --git "a/\303\244 \"q\"\tx" "b/\303\244 \"q\"\tx"
new file mode 100644
index 0000000..e69de29
diff --git a/plain "b/tab\there"
similarity index 100%
rename from plain
rename to "tab\there"
"#;
    let p = parse_patch(text).unwrap();
    assert_eq!(
        p.files[0].new_path.as_ref().unwrap().as_bytes(),
        b"\xc3\xa4 \"q\"\tx"
    );
    assert_eq!(
        p.files[1].new_path.as_ref().unwrap().as_bytes(),
        b"tab\there"
    );
    assert_eq!(unquote_c_style(br#""\101\102""#).unwrap().0, b"AB");
    assert!(unquote_c_style(br#""\q""#).is_none());
    assert!(unquote_c_style(br#""open"#).is_none());
}

#[test]
fn names_with_spaces_from_diff_git_line() {
    // A creation without ---/+++ (empty file): the name comes from the diff --git line, which
    // git writes unquoted even with spaces.
    let text =
        b"diff --git a/dir a/b c b/dir a/b c\nnew file mode 100644\nindex 0000000..e69de29\n";
    let p = parse_patch(text).unwrap();
    assert_eq!(
        p.files[0].new_path.as_ref().unwrap().to_string(),
        "dir a/b c"
    );
}

#[test]
fn traditional_diff_u() {
    let text = b"diff -ruN a/one.txt b/one.txt\n\
--- a/one.txt\t2024-01-01 10:00:00.000000000 +0100\n\
+++ b/one.txt\t2024-01-02 10:00:00.000000000 +0100\n\
@@ -1 +1 @@\n\
-1\n\
+one\n\
diff -ruN a/two.txt b/two.txt\n\
--- a/two.txt\t1970-01-01 01:00:00.000000000 +0100\n\
+++ b/two.txt\t2024-01-02 10:00:00.000000000 +0100\n\
@@ -0,0 +1 @@\n\
+new\n\
--- a/three.txt 2024-01-01 10:00:00\n\
+++ /dev/null\n\
@@ -1 +0,0 @@\n\
-bye\n\
Only in b: something\n";
    let p = parse_patch(text).unwrap();
    assert_eq!(p.files.len(), 3);
    assert!(!p.files[0].is_git);
    assert_eq!(p.files[0].path().unwrap().to_string(), "one.txt");
    assert!(!p.files[0].is_creation() && !p.files[0].is_deletion());
    // "1970-01-01 01:00:00 +0100" is the epoch in another time zone: a creation.
    assert_eq!(p.files[1].path().unwrap().to_string(), "two.txt");
    assert!(p.files[1].is_creation());
    assert!(p.files[2].is_deletion());
    assert_eq!(p.files[2].path().unwrap().to_string(), "three.txt");

    let epoch = b"--- a/n\t1970-01-01 00:00:00.000000000 +0000\n+++ b/n\t2024-01-01 00:00:00.000000000 +0000\n@@ -0,0 +1 @@\n+x\n";
    assert!(parse_patch(epoch).unwrap().files[0].is_creation());

    let p0 = parse_patch_strip(b"--- f.c.orig\n+++ f.c\n@@ -1 +1 @@\n-a\n+b\n", 0).unwrap();
    assert_eq!(p0.files[0].path().unwrap().to_string(), "f.c");
}

#[test]
fn garbage_is_a_parse_error_with_line() {
    let e = parse_patch(b"hello\nworld\n").unwrap_err();
    assert_eq!(parse_line(&e), 1);
    let e = parse_patch(b"\n\nnot a patch\n").unwrap_err();
    assert_eq!(parse_line(&e), 3);
    assert!(e.to_string().contains("no patch found"), "{e}");
    // Empty input is an empty patch.
    assert!(parse_patch(b"").unwrap().files.is_empty());
    assert!(parse_patch(b"\n\n").unwrap().files.is_empty());

    // Truncated hunk: reported at the end of the input, naming the hunk.
    let e = parse_patch(b"--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n").unwrap_err();
    assert_eq!(parse_line(&e), 6);
    assert!(e.to_string().contains("line 3"), "{e}");
    // Unexpected line inside a hunk.
    let e = parse_patch(b"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n*b\n").unwrap_err();
    assert_eq!(parse_line(&e), 5);
    // Bad hunk header.
    let e = parse_patch(b"--- a/f\n+++ b/f\n@@ -x +1 @@\n").unwrap_err();
    assert_eq!(parse_line(&e), 3);
    // Hunk outside a file.
    let e = parse_patch(b"intro\n@@ -1 +1 @@\n-a\n+b\n").unwrap_err();
    assert_eq!(parse_line(&e), 2);
    // --- without +++ in a git header.
    let e = parse_patch(b"diff --git a/f b/f\n--- a/f\nnope\n").unwrap_err();
    assert_eq!(parse_line(&e), 3);
    // Header without a hunk.
    let e = parse_patch(b"diff --git a/f b/f\nindex 1234567..89abcde 100644\n--- a/f\n+++ b/f\n")
        .unwrap_err();
    assert_eq!(parse_line(&e), 5);
    // Header without any change.
    let e = parse_patch(b"x\ndiff --git a/f b/f\nindex 1234567..89abcde 100644\n").unwrap_err();
    assert_eq!(parse_line(&e), 2);
    // Inconsistent names.
    let e =
        parse_patch(b"diff --git a/f b/f\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-a\n+b\n").unwrap_err();
    assert!(e.to_string().contains("inconsistent"), "{e}");
    // Bad mode.
    let e = parse_patch(b"diff --git a/f b/f\nold mode 040000\nnew mode 100644\n").unwrap_err();
    assert_eq!(parse_line(&e), 2);
    // Bad binary data.
    let e = parse_patch(b"diff --git a/f b/f\nindex 1234567..89abcde 100644\nGIT binary patch\nliteral 5\nzzzzz\n\n").unwrap_err();
    assert_eq!(parse_line(&e), 5);
    let e = parse_patch(
        b"diff --git a/f b/f\nindex 1234567..89abcde 100644\nGIT binary patch\nliteral 5\nD00000\n\n",
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("inflate") || e.to_string().contains("corrupt"),
        "{e}"
    );
    // A new file whose hunk needs old contents.
    let e = parse_patch(
        b"diff --git a/f b/f\nnew file mode 100644\n--- /dev/null\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n",
    )
    .unwrap_err();
    assert_eq!(parse_line(&e), 1);
    // "Binary files … differ" that does not hold two names.
    let e = parse_patch(b"Binary files differ\n").unwrap_err();
    assert_eq!(parse_line(&e), 1);
    // Hunk longer than its header says, inside the counted region.
    let e = parse_patch(b"--- a/f\n+++ b/f\n@@ -1,1 +1,2 @@\n-a\n-b\n+c\n").unwrap_err();
    assert_eq!(parse_line(&e), 5);
}

#[test]
fn unsafe_names_are_containment_errors() {
    let cases: &[&[u8]] = &[
        b"diff --git a/../evil b/../evil\nnew file mode 100644\nindex 0000000..e69de29\n",
        b"--- /dev/null\n+++ b/a/../../evil\n@@ -0,0 +1 @@\n+x\n",
        b"diff --git \"a/\\056\\056/evil\" \"b/\\056\\056/evil\"\nnew file mode 100644\nindex 0000000..e69de29\n",
        b"diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to ../../y\n",
        b"diff --git a/x b/y\nsimilarity index 100%\ncopy from /etc/passwd\ncopy to y\n",
    ];
    for c in cases {
        let e = parse_patch(c).unwrap_err();
        assert_eq!(
            e.kind(),
            "containment",
            "{}: {e}",
            String::from_utf8_lossy(c)
        );
    }
    // With -p0 an absolute name stays absolute. So does "b//etc/evil" with -p1: this test
    // used to expect the relative "etc/evil" (extra slashes skipped), but git counts every
    // slash, keeps "/etc/evil" and refuses it as an invalid path (see
    // `names_git_refuses_are_refused`).
    let e = parse_patch_strip(b"--- /dev/null\n+++ /etc/evil\n@@ -0,0 +1 @@\n+x\n", 0).unwrap_err();
    assert_eq!(e.kind(), "containment", "{e}");
    let e = parse_patch(b"--- /dev/null\n+++ b//etc/evil\n@@ -0,0 +1 @@\n+x\n").unwrap_err();
    assert_eq!(e.kind(), "containment", "{e}");
    // NUL bytes in names are parse errors.
    let e = parse_patch(
        b"diff --git \"a/x\\000y\" \"b/x\\000y\"\nnew file mode 100644\nindex 0000000..e69de29\n",
    )
    .unwrap_err();
    assert_eq!(e.kind(), "patch_parse", "{e}");
}

#[test]
fn binary_from_git_literal_and_delta() {
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git(r, home.path(), &["init", "-q", "."]);
    let mut old = Vec::new();
    let mut x: u32 = 12345;
    for _ in 0..6000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        old.push((x >> 16) as u8);
    }
    old[10] = 0;
    std::fs::write(r.join("blob.bin"), &old).unwrap();
    std::fs::write(r.join("small.bin"), b"\x00\x01\x02").unwrap();
    git(r, home.path(), &["add", "-A"]);
    git(r, home.path(), &["commit", "-qm", "base"]);
    let mut new = old.clone();
    new[3000] ^= 0xff;
    new.extend_from_slice(b"tail\x00");
    std::fs::write(r.join("blob.bin"), &new).unwrap();
    std::fs::write(r.join("small.bin"), b"\x00\x09\x02\x03").unwrap();
    let out = git(r, home.path(), &["diff", "--binary"]);
    let p = parse_patch(&out.stdout).unwrap();
    assert_eq!(p.files.len(), 2);
    let f = &p.files[0];
    assert_eq!(f.path().unwrap().to_string(), "blob.bin");
    assert_eq!(f.old_oid.as_deref(), Some(git_blob_id(&old).as_str()));
    assert_eq!(f.new_oid.as_deref(), Some(git_blob_id(&new).as_str()));
    let Some(BinaryPatch::Data { forward, reverse }) = &f.binary else {
        panic!("no binary data");
    };
    assert_eq!(forward.kind, BinaryKind::Delta);
    assert_eq!(forward.apply(&old).unwrap(), new);
    assert_eq!(reverse.as_ref().unwrap().apply(&new).unwrap(), old);
    let f = &p.files[1];
    let Some(BinaryPatch::Data { forward, .. }) = &f.binary else {
        panic!("no binary data");
    };
    assert_eq!(forward.kind, BinaryKind::Literal);
    assert_eq!(forward.data, b"\x00\x09\x02\x03");

    // Without --binary: parsed, but no data.
    let out = git(r, home.path(), &["diff"]);
    let p = parse_patch(&out.stdout).unwrap();
    assert_eq!(p.files[0].binary, Some(BinaryPatch::NoData));
}

#[test]
fn delta_decoder_rejects_bad_deltas() {
    let base = b"0123456789";
    // Copy 4 bytes from offset 2, insert "xy".
    let ok = [10u8, 6, 0x80 | 0x01 | 0x10, 2, 4, 2, b'x', b'y'];
    assert_eq!(apply_delta(base, &ok).unwrap(), b"2345xy");
    let bad: &[&[u8]] = &[
        &[],
        &[10],
        &[9, 6, 0x91, 2, 4, 2, b'x', b'y'],  // wrong base size
        &[10, 7, 0x91, 2, 4, 2, b'x', b'y'], // wrong result size
        &[10, 6, 0x91, 8, 4, 2, b'x', b'y'], // copy past the end
        &[10, 6, 0x91, 2, 4, 3, b'x', b'y'], // truncated insert
        &[10, 6, 0x00],                      // reserved opcode
        &[10, 6, 0x91],                      // truncated copy
        &[10, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], // huge result
        &[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
    ];
    for d in bad {
        assert!(apply_delta(base, d).is_err(), "{d:?}");
    }
    // Copy size 0 means 0x10000.
    let big = vec![7u8; 0x10000];
    let d = [0x80, 0x80, 0x04, 0x80, 0x80, 0x04, 0x80];
    assert_eq!(apply_delta(&big, &d).unwrap(), big);
}

#[test]
fn git_generated_text_patch_parses() {
    let home = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git(r, home.path(), &["init", "-q", "."]);
    std::fs::write(r.join("a b.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(r.join("\u{e4}.txt"), "x\n").unwrap();
    std::fs::write(r.join("tab\tname"), "t\n").unwrap();
    git(r, home.path(), &["add", "-A"]);
    git(r, home.path(), &["commit", "-qm", "base"]);
    std::fs::write(r.join("a b.txt"), "one\n2\nthree").unwrap();
    std::fs::write(r.join("\u{e4}.txt"), "y\n").unwrap();
    std::fs::remove_file(r.join("tab\tname")).unwrap();
    let out = git(r, home.path(), &["diff"]);
    let p = parse_patch(&out.stdout).unwrap();
    let names: Vec<Vec<u8>> = p
        .files
        .iter()
        .map(|f| f.path().unwrap().as_bytes().to_vec())
        .collect();
    assert_eq!(
        names,
        [
            b"a b.txt".to_vec(),
            b"tab\tname".to_vec(),
            "\u{e4}.txt".as_bytes().to_vec()
        ]
    );
    assert!(p.files[1].is_deletion());
    let last = p.files[0].hunks[0].lines.last().unwrap();
    assert_eq!(last.text, b"three");
}

const SAMPLE: &[u8] = b"diff --git a/f b/f\n\
index 1234567..89abcde 100644\n\
--- a/f\n\
+++ b/f\n\
@@ -1,3 +1,3 @@\n\
\x20a\n\
-b\n\
+c\n\
\x20d\n\
diff --git a/bin b/bin\n\
new file mode 100644\n\
index 0000000000000000000000000000000000000000..90802fedc2462f10bf2114d086cacb9e3af99ffb\n\
GIT binary patch\n\
literal 2\n\
JcmYdf0002Q0Ac_D\n\
\n\
literal 0\n\
HcmV?d00001\n\
\n\
diff --git a/x y b/z w\n\
similarity index 50%\n\
rename from x y\n\
rename to z w\n\
";

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = parse_patch(&data);
        let _ = parse_patch_strip(&data, 0);
    }

    #[test]
    fn random_lines_never_panic(lines in proptest::collection::vec(
        prop_oneof![
            Just("diff --git a/f b/f".to_string()),
            Just("--- a/f".to_string()),
            Just("+++ b/f".to_string()),
            Just("--- /dev/null".to_string()),
            Just("+++ /dev/null".to_string()),
            Just("new file mode 100644".to_string()),
            Just("deleted file mode 100644".to_string()),
            Just("rename from f".to_string()),
            Just("rename to g".to_string()),
            Just("GIT binary patch".to_string()),
            Just("literal 3".to_string()),
            Just("delta 3".to_string()),
            Just("\\ No newline at end of file".to_string()),
            Just(String::new()),
            Just("Binary files differ".to_string()),
            Just("Binary files a/f and b/f differ".to_string()),
            Just("Binary files /dev/null and b/f differ".to_string()),
            Just("index 1234567..89abcde 100644".to_string()),
            Just("similarity index 90%".to_string()),
            Just("copy from f".to_string()),
            Just("old mode 100644".to_string()),
            Just("new mode 100755".to_string()),
            "@@ -[0-9]{1,2}(,[0-9])? \\+[0-9]{1,2}(,[0-9])? @@".prop_map(|s| s),
            "[ +-][a-c]{0,3}".prop_map(|s| s),
            "[A-Za-z0-9!#$%&()*+;<=>?@^_`{|}~-]{0,12}".prop_map(|s| s),
        ],
        0..30,
    )) {
        let text = lines.join("\n");
        let _ = parse_patch(text.as_bytes());
    }

    #[test]
    fn mutated_sample_never_panics(
        cut in 0usize..SAMPLE.len(),
        flips in proptest::collection::vec((0usize..SAMPLE.len(), any::<u8>()), 0..4),
    ) {
        let mut data = SAMPLE.to_vec();
        for (i, b) in flips {
            data[i] = b;
        }
        let _ = parse_patch(&data);
        data.truncate(cut);
        let _ = parse_patch(&data);
    }
}

#[test]
fn sample_parses() {
    let p = parse_patch(SAMPLE).unwrap();
    assert_eq!(p.files.len(), 3);
    let Some(BinaryPatch::Data { forward, reverse }) = &p.files[1].binary else {
        panic!("binary expected");
    };
    assert_eq!(forward.data, b"a\0");
    assert_eq!(reverse.as_ref().unwrap().data, b"");
    assert_eq!(p.files[2].new_path.as_ref().unwrap().to_string(), "z w");
}

/// `git apply` of `patch` in an empty directory: whether it succeeded.
fn git_applies(patch: &[u8]) -> bool {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    gitcmd::git_apply(dir.path(), home.path(), patch)
        .status
        .success()
}

#[test]
fn names_git_refuses_are_refused() {
    let creation = |name: &str| {
        format!(
            "diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"
        )
    };
    let cases = [
        // "b//abs/path" is the absolute "/abs/path" after -p1 (every slash counts).
        creation("/abs/path"),
        "--- a//abs/path\n+++ b//abs/path\n@@ -0,0 +1 @@\n+x\n".to_string(),
        // A '.' component, a name ending with '/'.
        creation("dir/./x"),
        "--- /dev/null\n+++ b/dir/\n@@ -0,0 +1 @@\n+x\n".to_string(),
    ];
    for patch in &cases {
        assert!(!git_applies(patch.as_bytes()), "git applies\n{patch}");
        let e = parse_patch(patch.as_bytes()).unwrap_err();
        assert_eq!(e.kind(), "containment", "{patch}: {e}");
    }
    let e = parse_patch(cases[0].as_bytes()).unwrap_err();
    assert!(e.to_string().contains("/abs/path"), "{e}");
    // A doubled slash inside a name is squashed, as git does.
    let ok = "--- /dev/null\n+++ b/x//y\n@@ -0,0 +1 @@\n+x\n";
    assert!(git_applies(ok.as_bytes()));
    let p = parse_patch(ok.as_bytes()).unwrap();
    assert_eq!(p.files[0].path().unwrap().to_string(), "x/y");
}

#[test]
fn truncated_patches_are_errors() {
    let head = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
    // Cut inside the "\ No newline" line: git treats the stub as junk and keeps the
    // newline of "c"; it is a cut-off patch, so an error here.
    for cut in ["\\", "\\ No", "\\ No newline at end of fi"] {
        let patch = format!("{head}{cut}");
        let e = parse_patch(patch.as_bytes()).unwrap_err();
        assert_eq!(parse_line(&e), 7, "{cut:?}: {e}");
        assert!(e.to_string().contains("truncated"), "{e}");
    }
    // A marker line too short to be one, even with its newline.
    let e = parse_patch(format!("{head}\\ No\n").as_bytes()).unwrap_err();
    assert!(e.to_string().contains("malformed"), "{e}");
    // The whole marker, with or without its newline, and a translated one.
    for marker in [
        "\\ No newline at end of file",
        "\\ No newline at end of file\n",
        "\\ Kein Zeilenumbruch am Dateiende.\n",
    ] {
        let p = parse_patch(format!("{head}{marker}").as_bytes()).unwrap();
        assert_eq!(p.files[0].hunks[0].lines[2].text, b"c", "{marker:?}");
    }
    // Cut inside a hunk line (no newline at the end of the input): git says "corrupt patch".
    let patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+c";
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), "a\nb\n").unwrap();
    assert!(
        !gitcmd::git_apply(dir.path(), home.path(), patch.as_bytes())
            .status
            .success()
    );
    let e = parse_patch(patch.as_bytes()).unwrap_err();
    assert_eq!(parse_line(&e), 6, "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
    // Line counts not satisfied.
    let e = parse_patch(b"--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+c\n").unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
}

/// `git apply` of `patch` in a directory holding `files`: asserts that git refuses it with a
/// message containing `msg`.
fn assert_git_refuses(files: &[(&str, &str)], patch: &[u8], msg: &str) {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, data) in files {
        std::fs::write(dir.path().join(name), data).unwrap();
    }
    let out = gitcmd::git_apply(dir.path(), home.path(), patch);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "git applies\n{}",
        String::from_utf8_lossy(patch)
    );
    assert!(err.contains(msg), "git: {err}");
}

#[test]
fn git_header_names_must_agree_as_in_git() {
    let lacks = "git diff header lacks filename information";
    // Different names on a creation's 'diff --git' line, no '---'/'+++' lines.
    let patch = b"diff --git a/x \"b/y\"\nnew file mode 100644\nindex 0000000..e69de29\n";
    assert_git_refuses(&[], patch, lacks);
    let e = parse_patch(patch).unwrap_err();
    assert!(e.to_string().contains(lacks), "{e}");
    // The same with both names quoted.
    let patch = b"diff --git \"a/x\" \"b/y\"\nnew file mode 100644\nindex 0000000..e69de29\n";
    assert_git_refuses(&[], patch, lacks);
    assert!(parse_patch(patch).is_err());
    // A CRLF-converted mode change: the CR is part of the second name.
    let patch = b"diff --git a/f b/f\r\nold mode 100644\r\nnew mode 100755\r\n";
    assert_git_refuses(&[("f", "x\n")], patch, lacks);
    let e = parse_patch(patch).unwrap_err();
    assert!(e.to_string().contains(lacks), "{e}");
    // A '+++' line without '---' (spliced in).
    let patch = b"diff --git a/f b/f\nold mode 100644\nnew mode 100755\n+++ /dev/null\n";
    assert_git_refuses(&[("f", "x\n")], patch, lacks);
    let e = parse_patch(patch).unwrap_err();
    assert_eq!(parse_line(&e), 4, "{e}");
    assert!(e.to_string().contains(lacks), "{e}");
    // A '"' inside an unquoted first name: git takes it as the start of a quoted second
    // name, so the line names nothing.
    let patch = b"diff --git a/q\"t b/q\"t\nnew file mode 100644\nindex 0000000..e69de29\n";
    assert_git_refuses(&[], patch, lacks);
    let e = parse_patch(patch).unwrap_err();
    assert!(e.to_string().contains(lacks), "{e}");
    // Names with a leading '/': git's skip_tree_prefix finds no 'a/' prefix to skip.
    for patch in [
        &b"diff --git \"/abs\" \"/abs\"\nnew file mode 100644\nindex 0000000..e69de29\n"[..],
        b"diff --git /abs /abs\nnew file mode 100644\nindex 0000000..e69de29\n",
    ] {
        assert_git_refuses(&[], patch, lacks);
        let e = parse_patch(patch).unwrap_err();
        assert!(e.to_string().contains(lacks), "{e}");
    }
    // A NUL in the line (here for the 'b' of the second prefix): git's C strings end there.
    let patch = b"diff --git a/x \0/x\nnew file mode 100644\nindex 0000000..e69de29\n";
    assert!(parse_patch(patch).unwrap_err().to_string().contains(lacks));
    // Still fine: the same names, quoted or not, and a quoted pair from a CRLF patch.
    for patch in [
        &b"diff --git a/f b/f\nold mode 100644\nnew mode 100755\n"[..],
        b"diff --git \"a/f\" \"b/f\"\nold mode 100644\nnew mode 100755\n",
        b"diff --git \"a/f\" \"b/f\"\r\nold mode 100644\r\nnew mode 100755\r\n",
    ] {
        let p = parse_patch(patch).unwrap();
        assert_eq!(p.files[0].path().unwrap().to_string(), "f");
    }
}

#[test]
fn sections_without_change_are_garbage_as_in_git() {
    let garbage = "patch with only garbage";
    // Equal old and new modes.
    let patch = b"diff --git a/f b/f\nold mode 100644\nnew mode 100644\n";
    assert_git_refuses(&[("f", "x\n")], patch, garbage);
    assert!(parse_patch(patch).is_err());
    // A lone 'new mode' line without hunks.
    let patch = b"diff --git a/f b/f\nnew mode 100755\n";
    assert_git_refuses(&[("f", "x\n")], patch, garbage);
    assert!(parse_patch(patch).is_err());
    // 'GIT binary patch' with a CR: git does not see a binary patch there.
    let patch = b"diff --git \"a/f\" \"b/f\"\r\nindex 587be6b..e69de29 100644\r\nGIT binary patch\r\nliteral 0\r\nHcmV?d00001\r\n\r\nliteral 2\r\nJcmd;L0000C0RR91\r\n\r\n";
    assert_git_refuses(&[("f", "x\n")], patch, garbage);
    assert!(parse_patch(patch).is_err());
    // A mode change whose old mode comes from the 'index' line is a change.
    let p = parse_patch(b"diff --git a/f b/f\nindex 587be6b..587be6b 100644\nnew mode 100755\n")
        .unwrap();
    assert_eq!(
        (p.files[0].old_mode, p.files[0].new_mode),
        (Some(0o100644), Some(0o100755))
    );
}
