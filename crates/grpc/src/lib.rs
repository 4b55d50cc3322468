//! gRPC's wire as loadlab speaks it over its own HTTP/2 path: a `grpc://` target, a method's
//! types from `.proto` files compiled in Rust (no `protoc`), request messages from JSON,
//! length-prefixed frames and deadlines (statuses are the records' `loadlab_run::GrpcCode`).

pub mod frame;
pub mod method;
pub mod reflection;
pub mod target;
pub mod timeout;

pub use frame::{frame, Deframer, FrameError};
pub use method::{Method, MethodError, Protos};
pub use target::{GrpcTarget, TargetError};
pub use timeout::grpc_timeout;
