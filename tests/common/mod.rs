//! Helpers shared by the VM test files (`mod common;`).

use serde_json::Value;
use std::process::Output;

#[allow(dead_code)]
pub const BIN: &str = env!("CARGO_BIN_EXE_resctl-bench");

/// Whether VM tests run (RESCTL_BENCH_VM_TESTS=1); says why not otherwise.
pub fn enabled() -> bool {
    if std::env::var("RESCTL_BENCH_VM_TESTS").as_deref() == Ok("1") {
        return true;
    }
    eprintln!("skipped: set RESCTL_BENCH_VM_TESTS=1 to boot VM guests");
    false
}

/// Asserts that the command exited 0 and returns its stdout parsed as JSON.
#[allow(dead_code)]
pub fn ok_json(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr:\n{}", stderr);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({}):\n{}\nstderr:\n{}",
            e,
            String::from_utf8_lossy(&out.stdout),
            stderr
        )
    })
}
