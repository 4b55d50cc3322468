//! Virtual users' gRPC calls (sessions layer): each `grpc:` step's method read once per thread
//! from the types its plan carries, its request message encoded from the step's rendered JSON
//! for every call, and its answer's first message decoded into JSON for captures and checks.

use std::collections::HashMap;

use loadlab_grpc::{Deframer, Method, Protos};
use loadlab_run::users::{Behaviour, RequestStep, Step, UserModel};

/// The methods of a model's gRPC steps, by their plan request.
#[derive(Default)]
pub struct GrpcCalls {
    methods: HashMap<usize, Result<Method, String>>,
}

impl GrpcCalls {
    /// Reads the method of every gRPC step of `model`'s scenarios (a `before` or `after` flow
    /// runs as the scenario of a plan of its own).
    pub fn compile(model: &UserModel) -> Self {
        let mut steps = Vec::new();
        for sc in &model.scenarios {
            match &sc.behaviour {
                Behaviour::Flow(flow) => walk(flow, &mut steps),
                Behaviour::Chain(chain) => {
                    steps.extend(chain.states.iter().filter_map(|s| s.request.as_ref()));
                }
            }
        }
        let methods = steps
            .into_iter()
            .filter_map(|r| Some((r.request, r.grpc.as_deref()?)))
            .map(|(request, g)| {
                // The plan was checked when it was built; types that still fail to read fail
                // every call of their step, with the reason.
                let method = Protos::decode(&g.types, "the plan's gRPC types")
                    .and_then(|p| p.method_at(&g.method))
                    .map_err(|e| e.to_string());
                (request, method)
            })
            .collect();
        GrpcCalls { methods }
    }

    /// The body of a call of `step`: its rendered JSON `json` encoded as the method's input,
    /// framed (an array of them for a client stream); the reason when it is not one.
    pub fn encode(&self, step: &RequestStep, json: &[u8]) -> Result<Vec<u8>, String> {
        let method = self.method(step)?;
        let text = String::from_utf8_lossy(json);
        let text = if text.trim().is_empty() { "{}" } else { &text };
        method.framed_requests(text).map_err(|e| e.to_string())
    }

    /// The first message of an answer to `step` as JSON (gRPC's JSON mapping of the method's
    /// output); `None` when the answer holds no whole message or it does not decode.
    pub fn first_message_json(&self, step: &RequestStep, body: &[u8]) -> Option<Vec<u8>> {
        let method = self.method(step).ok()?;
        let mut d = Deframer::new();
        d.push(body);
        let message = d.next_message().ok()??;
        method
            .response_to_json(&message)
            .ok()
            .map(String::into_bytes)
    }

    fn method(&self, step: &RequestStep) -> Result<&Method, String> {
        match self.methods.get(&step.request) {
            Some(Ok(m)) => Ok(m),
            Some(Err(e)) => Err(e.clone()),
            None => Err("a gRPC step whose method the plan does not hold".into()),
        }
    }
}

/// Every request step of `steps`, loops and parallel steps included.
fn walk<'a>(steps: &'a [Step], out: &mut Vec<&'a RequestStep>) {
    for s in steps {
        match s {
            Step::Request(r) => out.push(r),
            Step::Loop { steps, .. } | Step::Parallel(steps) => walk(steps, out),
            _ => {}
        }
    }
}
