//! What one worker measured, per direction, and how workers add up.

use super::hist::{LatHist, LatOut};
use serde::{Deserialize, Serialize};

/// One second of one direction (seconds counted from the end of the ramp, by completion time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    pub ios: u64,
    pub bytes: u64,
    /// Sum and maximum of `lat` over the second's IOs, ns.
    pub lat_sum_ns: u64,
    pub lat_max_ns: u64,
}

impl Second {
    fn add(&mut self, o: &Second) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.lat_sum_ns += o.lat_sum_ns;
        self.lat_max_ns = self.lat_max_ns.max(o.lat_max_ns);
    }
}

/// One IO's times, ns: from due to prepared (`wait`), prepared to submitted (`slat`),
/// submitted to reaped (`clat`); its `lat` is their sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamps {
    pub wait: u64,
    pub slat: u64,
    pub clat: u64,
}

/// One direction's IOs.
#[derive(Debug, Clone, Default)]
pub struct DirStats {
    pub ios: u64,
    pub bytes: u64,
    /// IOs that transferred fewer bytes than asked.
    pub short: u64,
    pub slat: LatHist,
    pub clat: LatHist,
    pub lat: LatHist,
    pub seconds: Vec<Second>,
}

impl DirStats {
    /// One completed IO.
    #[inline]
    pub fn record(&mut self, bytes: u64, short: bool, t: Stamps, sec: usize) {
        self.ios += 1;
        self.bytes += bytes;
        self.short += short as u64;
        let lat = t.wait + t.slat + t.clat;
        self.slat.record(t.slat);
        self.clat.record(t.clat);
        self.lat.record(lat);
        if self.seconds.len() <= sec {
            self.seconds.resize(sec + 1, Second::default());
        }
        let s = &mut self.seconds[sec];
        s.ios += 1;
        s.bytes += bytes;
        s.lat_sum_ns += lat;
        s.lat_max_ns = s.lat_max_ns.max(lat);
    }

    pub fn merge(&mut self, o: &DirStats) {
        self.ios += o.ios;
        self.bytes += o.bytes;
        self.short += o.short;
        self.slat.merge(&o.slat);
        self.clat.merge(&o.clat);
        self.lat.merge(&o.lat);
        if self.seconds.len() < o.seconds.len() {
            self.seconds.resize(o.seconds.len(), Second::default());
        }
        for (a, b) in self.seconds.iter_mut().zip(&o.seconds) {
            a.add(b);
        }
    }

    /// The stored form over `runtime_ns`.
    pub fn out(&self, runtime_ns: u64, pcts: &[f64]) -> DirOut {
        let secs = runtime_ns as f64 / 1e9;
        let rate = |v: u64| if secs > 0.0 { v as f64 / secs } else { 0.0 };
        DirOut {
            ios: self.ios,
            bytes: self.bytes,
            short_ios: self.short,
            iops: rate(self.ios),
            bw_bytes: rate(self.bytes),
            slat: self.slat.out(pcts),
            clat: self.clat.out(pcts),
            lat: self.lat.out(pcts),
            seconds: self.seconds.clone(),
        }
    }

    pub fn from_out(o: &DirOut) -> Result<DirStats, String> {
        Ok(DirStats {
            ios: o.ios,
            bytes: o.bytes,
            short: o.short_ios,
            slat: LatHist::from_out(&o.slat).map_err(|e| format!("slat: {}", e))?,
            clat: LatHist::from_out(&o.clat).map_err(|e| format!("clat: {}", e))?,
            lat: LatHist::from_out(&o.lat).map_err(|e| format!("lat: {}", e))?,
            seconds: o.seconds.clone(),
        })
    }
}

/// A direction as stored in a result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirOut {
    pub ios: u64,
    pub bytes: u64,
    pub short_ios: u64,
    pub iops: f64,
    pub bw_bytes: f64,
    pub slat: LatOut,
    pub clat: LatOut,
    pub lat: LatOut,
    /// Per second from the end of the ramp.
    pub seconds: Vec<Second>,
}

/// CPU time a worker used (its thread, and its IO threads for the blocking fallback), ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    pub usr_ns: u64,
    pub sys_ns: u64,
}

impl Cpu {
    pub fn add(&mut self, o: &Cpu) {
        self.usr_ns += o.usr_ns;
        self.sys_ns += o.sys_ns;
    }

    /// CPU time of the calling thread so far.
    pub fn thread() -> Cpu {
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // RUSAGE_THREAD: this thread only. Cannot fail with valid arguments.
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
        let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
        Cpu {
            usr_ns: ns(ru.ru_utime),
            sys_ns: ns(ru.ru_stime),
        }
    }

    pub fn since(&self, start: &Cpu) -> Cpu {
        Cpu {
            usr_ns: self.usr_ns.saturating_sub(start.usr_ns),
            sys_ns: self.sys_ns.saturating_sub(start.sys_ns),
        }
    }
}

/// Everything one worker measured.
#[derive(Debug, Clone, Default)]
pub struct WorkerStats {
    pub read: DirStats,
    pub write: DirStats,
    pub cpu: Cpu,
    /// From the end of the ramp to the last counted completion, ns.
    pub runtime_ns: u64,
    /// IOs that failed (an error from the device or the file system).
    pub errors: u64,
    pub first_error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_add_up_per_second_and_merge() {
        let t = |wait, slat, clat| Stamps { wait, slat, clat };
        let mut a = DirStats::default();
        a.record(4096, false, t(0, 1_000, 99_000), 0);
        // A wait before preparing counts in lat, not in slat or clat.
        a.record(4096, false, t(50_000, 2_000, 148_000), 0);
        a.record(2048, true, t(0, 1_000, 49_000), 2);
        assert_eq!((a.ios, a.bytes, a.short), (3, 10240, 1));
        assert_eq!(a.seconds.len(), 3);
        assert_eq!(
            a.seconds[0],
            Second {
                ios: 2,
                bytes: 8192,
                lat_sum_ns: 300_000,
                lat_max_ns: 200_000
            }
        );
        assert_eq!(a.seconds[1], Second::default());
        let mut b = DirStats::default();
        b.record(4096, false, t(0, 500, 500), 4);
        b.merge(&a);
        assert_eq!((b.ios, b.seconds.len(), b.seconds[0].ios), (4, 5, 2));
        assert_eq!(b.lat.max(), 200_000);
        assert_eq!((b.slat.max(), b.clat.max()), (2_000, 148_000));
        let out = b.out(2_000_000_000, &[50.0]);
        assert_eq!((out.iops, out.bw_bytes), (2.0, 7168.0));
        let back = DirStats::from_out(&out)
            .unwrap()
            .out(2_000_000_000, &[50.0]);
        assert_eq!(back, out);
    }

    #[test]
    fn thread_cpu_time_moves_forward() {
        let t0 = Cpu::thread();
        // Busy for 50 ms of wall time: more than a scheduler tick of CPU time.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        let d = Cpu::thread().since(&t0);
        assert!(d.usr_ns + d.sys_ns > 0, "{:?}", d);
    }
}
