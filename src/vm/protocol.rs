//! What the host and the guest init agree on: the config file the host puts in the initramfs,
//! the serial ports, the shared directory's tag, the events the guest sends and the exit status
//! of a stalled guest.

use serde::{Deserialize, Serialize};

/// Where the guest configuration sits in the initramfs; its presence (with PID 1) selects the
/// vm-init mode of the binary.
pub const GUEST_CONFIG: &str = "/resctl-bench-vm.json";
/// virtio-serial port names: the command's stdout and stderr, and the control events.
pub const PORT_OUT: &str = "resctl.out";
pub const PORT_ERR: &str = "resctl.err";
pub const PORT_CTL: &str = "resctl.ctl";
/// 9p mount tag of the shared working directory.
pub const SHARE_TAG: &str = "resctl-cwd";
/// Serial of the root file system disk of a `vm --init systemd` guest.
pub const ROOT_SERIAL: &str = "resctl-root";
/// Set (to 1) in the environment of the systemd unit that runs the command in a
/// `vm --init systemd` guest: with [`GUEST_CONFIG`] present it selects the agent mode.
pub const AGENT_ENV: &str = "RESCTL_BENCH_VM_AGENT";
/// That unit.
pub const AGENT_UNIT: &str = "resctl-bench-vm.service";

/// What the host tells the guest init (a JSON file in the initramfs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestConfig {
    /// Arguments of the command (`resctl-bench` is prepended).
    pub args: Vec<String>,
    /// Working directory: the shared host directory, mounted at the same path.
    pub cwd: String,
    pub env: Vec<(String, String)>,
    /// Module files in the initramfs, in load order.
    pub modules: Vec<String>,
    /// Parameters for some of them (module file → `key=value …`).
    #[serde(default)]
    pub module_params: Vec<(String, String)>,
    /// Serial of the scratch disk.
    pub serial: String,
    pub rotational: bool,
    /// Where the scratch disk is mounted.
    pub scratch_dir: String,
    /// A directory of the shared cwd to bind-mount at `<scratch_dir>/report.d`, so the
    /// per-second reports land on the host (`<stem>-report.d` next to the `-r` result).
    #[serde(default)]
    pub reports_dir: Option<String>,
    pub swap_size: u64,
    pub verbose: u8,
    /// `--with-program` files in the initramfs (`/usr/bin/NAME`) and the libraries they came
    /// with: a `--init systemd` guest copies them into its root file system (the programs to
    /// `/usr/local/bin`, the libraries where that system has none).
    #[serde(default)]
    pub programs: Vec<String>,
    #[serde(default)]
    pub program_libs: Vec<String>,
    /// `vm --init systemd`: the serial of the disk holding the Debian root file system that
    /// init switches to, starting systemd as PID 1 and the command from a unit.
    #[serde(default)]
    pub systemd_root: Option<String>,
    /// `vm --ssh-port`: the public keys root's SSH logins take (authorized_keys text); the
    /// guest then brings its network interface up for QEMU's port forward.
    #[serde(default)]
    pub ssh_keys: Option<String>,
}

/// Guest → host events on the control port, one JSON object a line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Event {
    Log {
        msg: String,
    },
    /// The command is about to start; guest uptime in seconds.
    Ready {
        uptime: f64,
    },
    Exit {
        code: i32,
    },
    Error {
        msg: String,
    },
    /// Sent every [`HEARTBEAT_EVERY`] while the command runs: the guest kernel still schedules
    /// and its timers still fire.
    Heartbeat,
}

/// How often the guest sends [`Event::Heartbeat`].
pub const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// `vm`'s exit status when the guest went silent (no heartbeat for `--stall-timeout`) and was
/// stopped: distinct from the command's own statuses and from `vm`'s usage (2) and other (1)
/// errors.
pub const EXIT_STALLED: i32 = 124;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_one_json_object_a_line() {
        let s = serde_json::to_string(&Event::Exit { code: 3 }).unwrap();
        assert_eq!(s, r#"{"event":"exit","code":3}"#);
        let e: Event = serde_json::from_str(r#"{"event":"ready","uptime":4.5}"#).unwrap();
        assert_eq!(e, Event::Ready { uptime: 4.5 });
        let s = serde_json::to_string(&Event::Heartbeat).unwrap();
        assert_eq!(s, r#"{"event":"heartbeat"}"#);
    }
}
