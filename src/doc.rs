//! `resctl-bench doc`: the pages under benches-doc/, compiled into the binary.
