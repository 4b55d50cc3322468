//! Where each second of a run goes while it runs: the live dashboard, the metric exporters
//! and the run directory's growing files, fed from the engine's collector and the sampler's
//! thread.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use loadlab_lab::sampler::Feed;
use loadlab_run::{Interval, LiveReading, Plan, RunDirError, SecondsWriter, Summary, TimelineRow};

use crate::dashboard::Dashboard;
use crate::export::Exporter;

/// The live outputs a command asked for; none by default.
#[derive(Default)]
pub struct LiveOutputs {
    /// The live dashboard (`--dashboard`).
    pub dashboard: Option<Dashboard>,
    /// The metric exporters (`--remote-write`, `--otlp`).
    pub export: Option<Exporter>,
    /// The run directory's files that grow a second at a time, while a run writes one, and
    /// why they stopped growing when a write failed.
    pub seconds: Mutex<(Option<SecondsWriter>, Option<String>)>,
}

impl LiveOutputs {
    /// Starts showing and sending a new run: `label` names it, `open` when it has an offered
    /// rate, `plan` gives its request names, and `labels` (a lab's topology and workload) go
    /// on its exported series.
    pub fn begin(&self, label: &str, open: bool, plan: &Plan, labels: Vec<(String, String)>) {
        if let Some(d) = &self.dashboard {
            d.begin(label, open, names_of(plan));
        }
        if let Some(e) = &self.export {
            let mut all = vec![("loadlab.plan".to_string(), label.to_string())];
            all.extend(labels);
            e.begin(label, open, names_of(plan), all);
        }
    }

    /// Writes the next run's seconds into run directory `dir` as they end (its `plan.json`
    /// first), until [`LiveOutputs::end_seconds`].
    pub fn write_seconds(&self, dir: &Path, plan: &Plan) -> Result<(), RunDirError> {
        let writer = SecondsWriter::start(dir, plan)?;
        *self.seconds.lock().unwrap_or_else(|e| e.into_inner()) = (Some(writer), None);
        Ok(())
    }

    /// Stops writing the run directory's seconds (the run ended; its files are written whole),
    /// and says why they stopped before, if a write failed.
    pub fn end_seconds(&self) -> Option<String> {
        std::mem::take(&mut *self.seconds.lock().unwrap_or_else(|e| e.into_inner())).1
    }

    /// Adds a finished second of the current run.
    pub fn add(&self, row: &TimelineRow, iv: &Interval) {
        let mut seconds = self.seconds.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(w), _) = &mut *seconds {
            if let Err(e) = w.add(row, iv) {
                // The run goes on (its records are in memory); the summary says why the files
                // stopped growing, and they are written whole at its end.
                *seconds = (None, Some(e.to_string()));
            }
        }
        drop(seconds);
        if let Some(d) = &self.dashboard {
            d.add(row, iv);
        }
        if let Some(e) = &self.export {
            e.add(row, iv, loadlab_lab::sampler::own_cpu_seconds());
        }
    }

    /// A feed for the sampler: each store and process reading reaches the dashboard's
    /// `/metrics` and the exporters as it is taken.
    pub fn feed(&self) -> Feed {
        let dashboard = self.dashboard.as_ref().map(Dashboard::feed);
        let export = self.export.as_ref().map(Exporter::feed);
        Box::new(move |r: LiveReading| {
            if let Some(e) = &export {
                e(r.clone());
            }
            if let Some(d) = &dashboard {
                d(r);
            }
        })
    }

    /// Marks the current run as ended, with its summary.
    pub fn finish(&self, summary: &Summary) {
        if let Some(d) = &self.dashboard {
            d.finish(summary);
        }
        if let Some(e) = &self.export {
            e.finish(summary);
        }
    }

    /// Sends what the exporters hold and says what they sent; keeps the dashboard up for
    /// `keep`, then stops it.
    pub fn close(self, keep: Duration) {
        if let Some(e) = self.export {
            e.close();
        }
        if let Some(d) = self.dashboard {
            d.close(keep);
        }
    }
}

/// The plan's request names with their method: the one every request of that name has, or
/// empty when they differ (a locustfile's requests all go under one name here).
pub fn names_of(plan: &Plan) -> Vec<(String, String)> {
    let (names, index) = plan.request_names();
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let mut methods = index
                .iter()
                .zip(&plan.requests)
                .filter(|(n, _)| **n == i)
                .map(|(_, r)| r.method.as_str());
            let first = methods.next().unwrap_or("");
            let method = if methods.all(|m| m == first) {
                first
            } else {
                ""
            };
            (name, method.to_string())
        })
        .collect()
}
