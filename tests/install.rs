//! What the Debian package installs beside the binary, generated from the command-line
//! definitions: the manual pages (`man`) and the shell completions (`completions`).

#[allow(dead_code)] // each test file uses a part of the shared helpers
mod common;

use assert_cmd::Command;
use std::process::Stdio;

fn bin() -> Command {
    let mut c = Command::cargo_bin("resctl-bench").unwrap();
    c.timeout(std::time::Duration::from_secs(30));
    c
}

fn stdout(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(out.status.success(), "{:?}: {:?}", args, out);
    String::from_utf8(out.stdout).unwrap()
}

/// The visible subcommands, from the top-level help.
fn subcommands() -> Vec<String> {
    let help = stdout(&["--help"]);
    let list = help.split("Commands:").nth(1).unwrap();
    list.lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn man_prints_the_main_page_and_writes_one_per_subcommand() {
    let page = stdout(&["man"]);
    assert!(page.contains(".TH resctl-bench 1"), "{}", &page[..400]);
    assert!(
        page.contains("resctl\\-bench\\-run(1)"),
        "no subcommand list"
    );

    let d = tempfile::tempdir().unwrap();
    bin()
        .current_dir(d.path())
        .args(["man", "--out", "m"])
        .assert()
        .success();
    let mut written: Vec<String> = std::fs::read_dir(d.path().join("m"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    written.sort();
    let mut want: Vec<String> = subcommands()
        .iter()
        .map(|s| format!("resctl-bench-{}.1", s))
        .chain(["resctl-bench.1".to_string()])
        .collect();
    want.sort();
    assert_eq!(written, want);
    assert!(
        want.iter().any(|w| w == "resctl-bench-apply.1"),
        "{:?}",
        want
    );
    let apply = std::fs::read_to_string(d.path().join("m/resctl-bench-apply.1")).unwrap();
    // The global options apply reads are on its page; those it doesn't aren't.
    assert!(apply.contains("\\-\\-result"), "{}", apply);
    assert!(apply.contains("\\-\\-now"), "{}", apply);
    assert!(!apply.contains("\\-\\-mem\\-profile"), "{}", apply);
}

/// What bash offers after `resctl-bench WORDS…` with the cursor on the last word.
fn bash_complete(script: &std::path::Path, words: &[&str]) -> Vec<String> {
    let line = words
        .iter()
        .map(|w| format!("'{}'", w))
        .collect::<Vec<_>>()
        .join(" ");
    let prog = format!(
        "source '{}'; COMP_WORDS=(resctl-bench {line}); COMP_CWORD={n}; \
         _resctl__bench resctl-bench \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
         printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        script.display(),
        n = words.len()
    );
    let out = std::process::Command::new("bash")
        .args(["-c", &prog])
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_subcommands_and_their_options() {
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("resctl-bench.bash");
    std::fs::write(&script, stdout(&["completions", "bash"])).unwrap();
    assert_eq!(bash_complete(&script, &["ap"]), ["apply"]);
    // Past a subcommand: its own options and the global ones it reads, nothing else.
    assert_eq!(bash_complete(&script, &["apply", "--n"]), ["--now"]);
    let apply = bash_complete(&script, &["apply", "-"]);
    assert!(apply.iter().any(|o| o == "--result"), "{:?}", apply);
    assert!(!apply.iter().any(|o| o == "--mem-profile"), "{:?}", apply);
    assert_eq!(bash_complete(&script, &["db", "b"]), ["build"]);
    assert_eq!(bash_complete(&script, &["db", "build", "--o"]), ["--out"]);
    let shells = bash_complete(&script, &["completions", ""]);
    for s in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|o| o == s), "{:?}", shells);
    }
    // The hidden subcommands (test aids, the workloads the benches start) aren't offered.
    assert_eq!(bash_complete(&script, &["__"]), Vec::<String>::new());
}

#[test]
fn zsh_and_fish_scripts_name_the_subcommands() {
    for shell in ["zsh", "fish"] {
        let s = stdout(&["completions", shell]);
        assert!(s.contains("resctl-bench"), "{}", shell);
        assert!(s.contains("apply") && s.contains("now"), "{}", shell);
        assert!(!s.contains("__hashd"), "{}: a hidden subcommand", shell);
    }
}

/// `scripts/build-deb` around the tests' own binary: the control fields, and what unpacks —
/// a binary that runs, a manual page per subcommand, the completions the binary prints, the
/// copyright and changelog files, checksums that match.
#[test]
fn the_debian_package_holds_the_binary_its_pages_and_completions() {
    let d = tempfile::tempdir().unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_resctl-bench"));
    let deb = common::build_deb(bin, d.path());
    let name = format!("resctl-bench_{}_", env!("CARGO_PKG_VERSION"));
    assert!(deb.contains(&name) && deb.ends_with(".deb"), "{}", deb);
    let field = |f: &str| {
        let o = std::process::Command::new("dpkg-deb")
            .args(["-f", &deb, f])
            .output()
            .unwrap();
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    assert_eq!(field("Package"), "resctl-bench");
    assert_eq!(field("Version"), env!("CARGO_PKG_VERSION"));
    assert!(
        field("Depends").contains("libc6 (>= "),
        "{}",
        field("Depends")
    );
    assert!(field("Description").lines().count() > 3);

    let x = d.path().join("x");
    let st = std::process::Command::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&x)
        .status()
        .unwrap();
    assert!(st.success());
    let packed = x.join("usr/bin/resctl-bench");
    let v = std::process::Command::new(&packed)
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).starts_with("resctl-bench "));
    for s in subcommands() {
        let p = x.join(format!("usr/share/man/man1/resctl-bench-{}.1.gz", s));
        assert!(p.is_file(), "no page for {}", s);
    }
    assert!(x.join("usr/share/man/man1/resctl-bench.1.gz").is_file());
    let bash =
        std::fs::read_to_string(x.join("usr/share/bash-completion/completions/resctl-bench"))
            .unwrap();
    assert_eq!(bash, stdout(&["completions", "bash"]));
    assert!(x
        .join("usr/share/zsh/vendor-completions/_resctl-bench")
        .is_file());
    assert!(x
        .join("usr/share/fish/vendor_completions.d/resctl-bench.fish")
        .is_file());
    for f in ["copyright", "changelog.gz", "README.md.gz"] {
        assert!(
            x.join("usr/share/doc/resctl-bench").join(f).is_file(),
            "{}",
            f
        );
    }
    // The checksums the package carries are those of what it unpacks to.
    let ctl = d.path().join("ctl");
    assert!(std::process::Command::new("dpkg-deb")
        .arg("-e")
        .arg(&deb)
        .arg(&ctl)
        .status()
        .unwrap()
        .success());
    let sums = std::process::Command::new("md5sum")
        .args(["--check", "--quiet"])
        .arg(ctl.join("md5sums"))
        .current_dir(&x)
        .output()
        .unwrap();
    assert!(
        sums.status.success(),
        "{}",
        String::from_utf8_lossy(&sums.stdout)
    );
}
