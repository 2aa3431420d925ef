use resctl_bench::error;

fn main() {
    resctl_bench::util::out::ensure_std_fds();
    // Inside a `resctl-bench vm` guest this binary is /init, PID 1: set the guest up, run the
    // command, power off. Never returns.
    if resctl_bench::vm::guest::is_vm_init() {
        resctl_bench::vm::guest::init_main();
    }
    // In a `vm --init systemd` guest, the unit systemd starts: run the command, power off.
    if resctl_bench::vm::guest::systemd::is_vm_agent() {
        resctl_bench::vm::guest::systemd::agent_main();
    }
    let cli = match resctl_bench::commands::parse::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(resctl_bench::commands::parse::ParseError::Clap(e)) => {
            // clap prints help/version to stdout with exit 0 and usage errors with exit 2.
            resctl_bench::commands::parse::without_hidden_suggestions(e).exit();
        }
        Err(resctl_bench::commands::parse::ParseError::NotApplicable(msg)) => {
            resctl_bench::errln!("error: {}", error::one_line(&msg));
            std::process::exit(error::EXIT_USAGE);
        }
    };
    let (verbose, logfile) = cli.global.log_opts();
    if let Err(e) = resctl_bench::logging::init(verbose, logfile) {
        resctl_bench::errln!("error: {}", error::one_line(&e.to_string()));
        std::process::exit(error::EXIT_USAGE);
    }
    if let Err(e) = run(cli) {
        let msg = error::one_line(&format!("{:#}", e));
        resctl_bench::logging::log_final_error(&msg);
        resctl_bench::errln!("error: {}", msg);
        std::process::exit(error::exit_code(&e));
    }
}

fn run(cli: resctl_bench::commands::Cli) -> anyhow::Result<()> {
    resctl_bench::commands::dispatch(cli)
}
