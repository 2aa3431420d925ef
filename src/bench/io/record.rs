//! What an `io` run stores: the engine's document of its one job, or, for a job file, each
//! job's by name.

use crate::workload::ioengine::result::{IoResult, RESULT_VERSION};
use serde::{Deserialize, Serialize};

/// One job of a job file and what the engine measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamedIo {
    pub name: String,
    /// Ran with the job before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub together: bool,
    pub io: IoResult,
}

/// The record (and result): the engine's document — one job's (`io`) or a job file's
/// (`jobs`) — and whether the test file was written first.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoRecord {
    pub period: (u64, u64),
    pub testfile_written: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<IoResult>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<NamedIo>,
    /// The SHA-1 of the job file's text, for a job file's run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs_sha1: Option<String>,
}

impl IoRecord {
    /// Every job's result in order, with its name when it came from a job file.
    pub fn each(&self) -> Vec<(Option<&NamedIo>, &IoResult)> {
        match &self.io {
            Some(io) => vec![(None, io)],
            None => self.jobs.iter().map(|j| (Some(j), &j.io)).collect(),
        }
    }

    /// Refuses a record this version can't read: a newer engine document, or none at all.
    pub fn check(&self) -> anyhow::Result<()> {
        let each = self.each();
        if each.is_empty() {
            crate::usage_bail!("the io record holds no job's result (neither \"io\" nor \"jobs\")");
        }
        for (_, io) in each {
            if io.version > RESULT_VERSION {
                crate::usage_bail!(
                    "the io record has version {}; this version reads up to {}",
                    io.version,
                    RESULT_VERSION
                );
            }
        }
        Ok(())
    }
}
