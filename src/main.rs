use clap::Parser;
use resctl_bench::cli::Cli;
use resctl_bench::error;

fn main() {
    // Inside a `resctl-bench vm` guest this binary is /init, PID 1: set the guest up, run the
    // command, power off. Never returns.
    if resctl_bench::vm::guest::is_vm_init() {
        resctl_bench::vm::guest::init_main();
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help/version to stdout with exit 0 and usage errors with exit 2.
            e.exit();
        }
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(
        match cli.global.verbose {
            0 => "info",
            1 => "debug",
            _ => "trace",
        },
    ))
    .format_timestamp(None)
    .init();
    if let Err(e) = run(cli) {
        eprintln!("error: {:#}", e);
        std::process::exit(error::exit_code(&e));
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    resctl_bench::app::dispatch(cli)
}
