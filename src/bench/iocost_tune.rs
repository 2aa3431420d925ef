//! `iocost-tune`: io.cost QoS solutions derived from `iocost-qos` results. Listed so its specs
//! are recognised; neither running nor formatting it is available in this version.

use crate::bench::api::{
    Bench, BenchDesc, DocPage, FormatOpts, SpecError, Stored, Unread, NO_PROPS,
};
use crate::spec::JobSpec;
use anyhow::Result;

pub struct IocostTune;

pub static DESC: BenchDesc = BenchDesc {
    kind: "iocost-tune",
    about: "Derive io.cost QoS solutions from iocost-qos results",
    hidden: false,
    incremental: true,
    runnable: false,
    shape: NO_PROPS,
    doc: Some(DocPage {
        title: "QoS solutions derived from iocost-qos results",
        text: include_str!("../../benches-doc/iocost-tune.md"),
    }),
    system: None,
};

impl Bench for IocostTune {
    /// It takes no properties.
    type Props = ();
    /// Its records and results are only listed in this version.
    type Record = Unread;
    type Result = Unread;

    fn desc(&self) -> &'static BenchDesc {
        &DESC
    }

    fn props(&self, _spec: &JobSpec) -> Result<(), SpecError> {
        Ok(())
    }

    fn format(
        &self,
        _out: &mut String,
        _stored: &Stored<Self>,
        _opts: &FormatOpts,
    ) -> Result<bool> {
        Ok(false)
    }
}
