//! The data every loadlab stage shares: a [`Plan`] goes into the engine, [`Interval`]
//! records come out, a [`RunData`] gathers them, and a [`Summary`] is what gets written.
//!
//! No async runtime and no HTTP here: this crate is the file format and the arithmetic
//! on it, so analysis and reports can read yesterday's runs without the engine.

#![deny(missing_docs)]

pub mod archive;
pub mod condition;
pub mod dir;
pub mod error_kind;
pub mod fake;
pub mod grpc_code;
pub mod hlog;
pub mod interval;
pub mod lab;
pub mod plan;
pub mod profile;
pub mod record;
pub mod scaling;
pub mod seconds;
pub mod server;
pub mod shard;
pub mod summary;
pub mod template;
pub mod thresholds;
pub mod topology;
pub mod trace;
pub mod users;

pub use dir::{
    read_records, read_run_dir, read_run_files, write_run_dir, write_summary, ReadRunError,
    RunDirError, SavedRun,
};
pub use error_kind::{ErrorKind, TlsFailure};
pub use grpc_code::GrpcCode;
pub use interval::{count_outcome, new_histogram, Counts, Interval, NameOutcomes, TimelineRow};
pub use plan::{
    defaults, Arrival, Arrivals, CaCert, Endpoint, GrpcStream, Model, Plan, PlanError, Protocol,
    RatePhase, RequestTemplate, Shard, Stop, TlsSettings, UserPhase, ValidPlan,
};
pub use profile::{Profile, ProfileOutcome, TopFunction};
pub use record::{
    ConnectStats, CustomMetrics, GeneratorStats, PacingStats, PhaseRecord, RunData, StreamTimings,
    Timings, UserRecord,
};
pub use seconds::{is_stopped_run, read_stopped_run, SecondsWriter};
pub use server::{
    GroupSample, GroupSeries, GroupTotals, HostSample, LiveReading, ProcessSample, ProcessSeries,
    ServerData, StoreSample, StoreSeries, StreamReading,
};
pub use shard::ShardError;
pub use summary::{
    summary_schema, Apdex, Breakdown, CustomHistogram, CustomSummary, Finding, GrpcStreams, Http2,
    LatencyStats, MergeSummary, MergedShard, ShardSummary, StartSummary, Summary, ThresholdResult,
    SUMMARY_SCHEMA,
};
pub use template::{Template, TemplateError};
pub use thresholds::{Threshold, ThresholdError};
pub use topology::{Lb, Runtime, Stdout, Topology};
pub use trace::{ClientSpan, TraceRecord, Tracing};
pub use users::UserModel;
