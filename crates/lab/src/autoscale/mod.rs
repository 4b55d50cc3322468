//! Autoscalers that decide a topology's instance count from what its instances report (issue
//! 55), modelled on the platforms the seeds ran on: Kubernetes' Horizontal Pod Autoscaler
//! (`hpa`). Each is a pure decision at each sync; starting and stopping instances is the
//! topology's.

pub mod hpa;
