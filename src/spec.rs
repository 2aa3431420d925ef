//! Job specs: `BENCH[:KEY[=VAL],...][:GROUP]...`. (Grammar and validation: being written.)

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub type PropSet = BTreeMap<String, String>;

/// A parsed job spec, serialized exactly as upstream stores it in result files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    pub kind: String,
    pub id: Option<String>,
    pub passive: Option<String>,
    pub props: Vec<PropSet>,
}
