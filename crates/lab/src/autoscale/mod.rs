//! Autoscalers that decide a topology's instance count from what its instances report (issue
//! 55), modelled on the platforms the seeds ran on: Kubernetes' Horizontal Pod Autoscaler
//! (`hpa`) and Knative's Pod Autoscaler, Cloud Run's model (`kpa`). Each is a pure decision at
//! each sync; starting and stopping instances is the topology's. The `balancer` in front of the
//! instances holds what finds no room and reports what each instance had in flight.

pub mod balancer;
pub mod hpa;
pub mod kpa;
pub mod scaler;
#[cfg(test)]
mod testing;
