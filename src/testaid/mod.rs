//! Hidden subcommands that exist only for the tests and the measurement scripts: they drive
//! one product piece on its own (the reporter, the IO-latency source, hashd's sizing search,
//! the restore journal, result saves under SIGKILL) or run guest-side checks in the VM tests
//! (`__probe`, `__vm-scenario`), and print what the test checks. They sit at the top, beside
//! `cli`, so the product layers never import the command line. The whole module builds only
//! with the `testaid` feature (`scripts/test` and the measurement scripts turn it on), so the
//! binary users install carries none of it.

pub mod curve_fio;
pub mod fast_compare;
pub mod fio_compare;
pub mod guest;
pub mod hashd_bench;
pub mod iolat;
pub mod journal_test;
pub mod probe;
pub mod reporter;
pub mod save_test;
pub mod seq;
pub mod tune_check;
pub mod tune_replay;
pub mod vm_apply;
pub mod vm_iocost_qos;
pub mod vm_protection;
pub mod vm_scenario;
pub mod vm_systemd;

use crate::cli::testaid::TestAid;
use crate::cli::GlobalOpts;
use anyhow::Result;

/// Runs one test-aid subcommand.
pub fn dispatch(cmd: TestAid, global: &GlobalOpts) -> Result<()> {
    match cmd {
        TestAid::JournalTest(a) => journal_test::journal_test(
            &crate::config::Config::from_opts(global)?.dir,
            &a.path,
            &a.value,
            a.spin,
            a.exit_after,
        ),
        TestAid::SaveTest(a) => {
            let Some(result) = global.result.clone().filter(|p| !p.as_os_str().is_empty()) else {
                crate::usage_bail!("__save-test requires --result");
            };
            save_test::save_test(&result, &a.from, a.loops, a.kills, a.seed)
        }
        TestAid::Probe(a) => probe::run(&a),
        TestAid::Reporter(a) => reporter::run(global, &a),
        TestAid::IoLat(a) => iolat::run(&a),
        TestAid::HashdBench(a) => hashd_bench::run_cmd(&a, global),
        TestAid::VmScenario(a) => vm_scenario::run(&a),
        TestAid::TuneCheck(a) => tune_check::run(&a),
        TestAid::TuneReplay(a) => tune_replay::run(&a),
    }
}
