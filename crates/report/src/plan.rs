//! A plan in words, as `loadlab validate` shows it: the requests or what each scenario's users
//! do, then the load phase by phase.

use std::fmt::Write;

use loadlab_run::users::{
    Behaviour, Chain, RequestStep, SioEmit, Step, Think, WsMessage, WsPayload,
};
use loadlab_run::{Model, Plan};

/// The plan's requests (the round robin, or each scenario's flow or chain with its share of
/// the users and the payloads) and its phases with their totals, one line each.
pub fn render_plan(plan: &Plan) -> String {
    let mut out = String::new();
    match plan.model.users() {
        None => round_robin(&mut out, plan),
        Some(model) => {
            let _ = writeln!(
                out,
                "  virtual users, each with its own connections; scenarios by weight: {}",
                model.pattern.len()
            );
            if let Some(p) = &model.processor {
                let _ = writeln!(
                    out,
                    "  processor: {} (run by Node.js, one helper process per generator thread)",
                    p.path.display()
                );
                if let Some(b) = &p.browser {
                    let _ = writeln!(
                        out,
                        "  browser: Chromium driven by Playwright for Node.js (found beside the \
                         processor), one per helper, a new context for each user; settings {b}"
                    );
                }
            }
            if model.has_checks() {
                let _ = writeln!(
                    out,
                    "  expect: each check counted (plugins.expect.ok, plugins.expect.failed); {}; {}",
                    if model.checks_fail_user {
                        "a failed one ends its user (reportFailuresAsErrors)"
                    } else {
                        "a failed one does not stop its user"
                    },
                    if model.checks_set_exit_code {
                        "exit code 21 when one fails"
                    } else {
                        "without config.plugins.expect a failure leaves the exit code alone \
                         (Artillery does not check them at all)"
                    }
                );
            }
            if let Some(Behaviour::Flow(steps)) = model.before.as_ref().map(|b| &b.behaviour) {
                let _ = writeln!(
                    out,
                    "  before: one user runs once, before the load (its captures are every user's)"
                );
                flow(&mut out, plan, steps, 4);
            }
            if let Some(Behaviour::Flow(steps)) = model.after.as_ref().map(|b| &b.behaviour) {
                let _ = writeln!(out, "  after: one user runs once, after the load");
                flow(&mut out, plan, steps, 4);
            }
            for (i, sc) in model.scenarios.iter().enumerate() {
                let share = model.pattern.iter().filter(|k| **k == i).count() as f64
                    / model.pattern.len() as f64;
                let _ = writeln!(
                    out,
                    "  scenario {:?} ({:.0} % of users)",
                    sc.name,
                    100.0 * share
                );
                if let Some(ws) = &sc.websocket {
                    let t = &plan.requests[ws.request];
                    let scheme = if t.url.starts_with("https://") {
                        "wss"
                    } else {
                        "ws"
                    };
                    let at = t.url.split_once("://").map_or(t.url.as_str(), |(_, r)| r);
                    let protocols = if ws.subprotocols.is_empty() {
                        String::new()
                    } else {
                        format!(" (subprotocols {})", ws.subprotocols.join(", "))
                    };
                    let what = if ws.socketio {
                        "Socket.IO over WebSocket"
                    } else {
                        "WebSocket"
                    };
                    let _ = writeln!(
                        out,
                        "    {what} {scheme}://{at}{protocols}, opened first, closed at the end"
                    );
                }
                match &sc.behaviour {
                    Behaviour::Flow(steps) => flow(&mut out, plan, steps, 4),
                    Behaviour::Chain(c) => chain(&mut out, plan, c),
                }
            }
            for p in &model.payloads {
                let _ = writeln!(
                    out,
                    "  payload: {} rows of {} ({:?} order)",
                    p.rows.len(),
                    p.fields.join(", "),
                    p.order
                );
            }
        }
    }
    phases(&mut out, plan);
    out
}

/// The open model's arrival phases or the users phases, with their totals; nothing for the
/// closed model.
fn phases(out: &mut String, plan: &Plan) {
    match &plan.model {
        Model::Open { phases, .. } => {
            let what = if plan.model.users().is_some() {
                "users"
            } else {
                "arrivals"
            };
            let _ = writeln!(
                out,
                "  {:<24}{:>9}{:>9}{:>10}{:>10}{:>11}",
                "phase", "start s", "length s", "from/s", "to/s", what
            );
            let (mut start, mut total) = (0.0, 0.0);
            // A last phase with no end runs to the run's duration, or until it is stopped.
            let end = plan.stop.duration.map(|d| d.as_secs_f64());
            let endless = phases.last().is_some_and(|p| p.duration.is_none()) && end.is_none();
            for p in phases {
                let len = p
                    .duration
                    .map(|d| d.as_secs_f64())
                    .or(end.map(|e| (e - start).max(0.0)))
                    .unwrap_or(0.0);
                let before = total;
                total += (p.start_rps + p.end_rps) / 2.0 * len;
                // Each row counts the whole arrivals the running total passes in the phase, so
                // the rows add up to the total (rounding each phase alone gave 3 + 6 of 10).
                let arrivals = total.round() - before.round();
                let _ = writeln!(
                    out,
                    "  {:<24}{:>9.1}{:>9.1}{:>10.1}{:>10.1}{:>11.0}",
                    p.name, start, len, p.start_rps, p.end_rps, arrivals
                );
                start += len;
            }
            if endless {
                let _ = writeln!(
                    out,
                    "  total: {total:.0} {what} over {start:.1} s, then the last phase goes on \
                     until the run is stopped (Ctrl-C); timeout {:?}",
                    plan.timeout
                );
            } else {
                let _ = writeln!(
                    out,
                    "  total: {total:.0} {what} over {start:.1} s; timeout {:?}",
                    plan.timeout
                );
            }
        }
        Model::Users { phases, .. } => {
            let _ = writeln!(
                out,
                "  {:<24}{:>9}{:>9}{:>9}{:>14}",
                "phase", "start s", "length s", "users", "spawn/s"
            );
            let mut start = 0.0;
            for p in phases {
                let len = p.duration.as_secs_f64();
                let rate = p
                    .spawn_rate
                    .map_or("at once".to_string(), |r| format!("{r:.1}"));
                let _ = writeln!(
                    out,
                    "  {:<24}{:>9.1}{:>9.1}{:>9}{:>14}",
                    p.name, start, len, p.users, rate
                );
                start += len;
            }
            let most = phases.iter().map(|p| p.users).max().unwrap_or(0);
            let _ = writeln!(
                out,
                "  total: up to {most} users over {start:.1} s (closed model); timeout {:?}",
                plan.timeout
            );
        }
        Model::Closed { .. } => {}
    }
}

/// Plain requests: the round-robin list with its repetitions.
fn round_robin(out: &mut String, plan: &Plan) {
    let urls: Vec<&String> = plan.requests.iter().map(|r| &r.url).collect();
    let _ = writeln!(
        out,
        "  requests (round robin, weights as repetitions): {}",
        urls.len()
    );
    for u in plan.target_urls() {
        let n = urls.iter().filter(|x| ***x == u).count();
        let _ = writeln!(out, "    {u} × {n}");
    }
}

/// A think time in words.
fn think_text(t: &Think) -> String {
    match t {
        Think::Constant(d) => format!("{:.2} s", d.as_secs_f64()),
        Think::Uniform(a, b) => format!("{:.2}–{:.2} s", a.as_secs_f64(), b.as_secs_f64()),
        Think::Exponential(m) => format!("exponential, mean {:.2} s", m.as_secs_f64()),
    }
}

/// A flow's steps, one a line, loops' steps indented under them.
fn flow(out: &mut String, plan: &Plan, steps: &[Step], indent: usize) {
    let pad = " ".repeat(indent);
    for s in steps {
        let line = match s {
            Step::Request(r) => request_line(plan, r),
            Step::Ws(m) => ws_line(m),
            Step::Emit(e) => emit_line(e),
            Step::Think(t) => format!("think {}", think_text(t)),
            Step::ThinkTemplate(t) => format!("think {t} (rendered at each pass)"),
            Step::Log(t) => format!("log {t}"),
            Step::Function(name) => format!("function {name}"),
            Step::Browser(name) => format!(
                "browser flow {name}(page, context, events, test) on a page of the user's own \
                 browser context"
            ),
            Step::Loop {
                count,
                steps,
                over,
                while_true,
                count_template,
                ..
            } => {
                let head = match count {
                    _ if !over.is_empty() => format!("loop over {} items:", over.len()),
                    _ if count_template.is_some() => format!(
                        "loop × {} (rendered when the loop starts):",
                        count_template
                            .as_ref()
                            .map(|t| t.to_string())
                            .unwrap_or_default()
                    ),
                    _ if while_true.is_some() => format!(
                        "loop while {} answers true:",
                        while_true.as_deref().unwrap_or_default()
                    ),
                    Some(n) => format!("loop × {n}:"),
                    None => "loop until the run ends:".to_string(),
                };
                let _ = writeln!(out, "{pad}{head}");
                flow(out, plan, steps, indent + 2);
                continue;
            }
            Step::Parallel(steps) => {
                let _ = writeln!(
                    out,
                    "{pad}parallel (issued together, queued on the user's connection):"
                );
                flow(out, plan, steps, indent + 2);
                continue;
            }
        };
        let _ = writeln!(out, "{pad}{line}");
    }
}

/// `  [a; b]` of what a step does beside its request or message; empty when nothing.
fn bracketed(extra: &[String]) -> String {
    if extra.is_empty() {
        String::new()
    } else {
        format!("  [{}]", extra.join("; "))
    }
}

/// The variables a step's captures set, as `captures a, b`.
fn captures_text<'c>(vars: impl Iterator<Item = &'c str>) -> String {
    format!("captures {}", vars.collect::<Vec<_>>().join(", "))
}

/// A request step: its method and URL, then its captures, checks, hooks and options.
fn request_line(plan: &Plan, r: &RequestStep) -> String {
    let t = &plan.requests[r.request];
    let mut extra = Vec::new();
    if !r.captures.is_empty() {
        extra.push(captures_text(r.captures.iter().map(|c| c.var.as_str())));
    }
    if !r.checks.is_empty() {
        let keys: Vec<&str> = r.checks.iter().map(|e| e.key()).collect();
        extra.push(format!("expect {}", keys.join(", ")));
    }
    if !r.expects.is_empty() {
        extra.push(format!("match × {}", r.expects.len()));
    }
    if r.static_resources.is_some() {
        extra.push("static resources on first visit".into());
    }
    if !r.before_request.is_empty() {
        extra.push(format!("beforeRequest {}", r.before_request.join(", ")));
    }
    if !r.after_response.is_empty() {
        extra.push(format!("afterResponse {}", r.after_response.join(", ")));
    }
    if let Some(c) = &r.if_true {
        extra.push(format!("if {}", c.text));
    }
    if !r.follow_redirect {
        extra.push("no redirects".into());
    }
    if !r.cookies.is_empty() {
        let names: Vec<&str> = r.cookies.iter().map(|(k, _)| k.as_str()).collect();
        extra.push(format!("cookies {}", names.join(", ")));
    }
    format!("{} {}{}", t.method, t.url, bracketed(&extra))
}

/// A ws step: what it sends (or that it waits), whether it awaits the reply, what it takes
/// from it.
fn ws_line(m: &WsMessage) -> String {
    let sent = match &m.send {
        Some(WsPayload::Text(t)) => format!("send {:?}", t.to_string()),
        Some(WsPayload::Json(j)) => format!("send {j}"),
        None => "wait".into(),
    };
    let mut extra = Vec::new();
    if m.reply {
        extra.push("awaits the reply".to_string());
    }
    if !m.captures.is_empty() {
        extra.push(captures_text(m.captures.iter().map(|c| c.var.as_str())));
    }
    if !m.expects.is_empty() {
        extra.push(format!("match × {}", m.expects.len()));
    }
    format!("{sent}{}", bracketed(&extra))
}

/// An emit step: the event and its arguments, its namespace, and what it awaits.
fn emit_line(e: &SioEmit) -> String {
    let args: Vec<String> = e.args.iter().map(|a| a.to_string()).collect();
    let on = if e.namespace == "/" {
        String::new()
    } else {
        format!(" on {}", e.namespace)
    };
    let awaits = match &e.wait {
        None => String::new(),
        Some(w) => {
            let mut what = vec![match &w.channel {
                Some(c) => format!("awaits {c}"),
                None => "awaits the acknowledgement".to_string(),
            }];
            if w.data.is_some() {
                what.push("data checked".into());
            }
            if !w.captures.is_empty() {
                what.push(captures_text(w.captures.iter().map(|c| c.var.as_str())));
            }
            if !w.expects.is_empty() {
                what.push(format!("match × {}", w.expects.len()));
            }
            bracketed(&what)
        }
    };
    format!("emit {}({}){on}{awaits}", e.channel, args.join(", "))
}

/// A chain's states with their pages, think times and transitions, and the share of visits
/// each gets in the long run (its stationary distribution).
fn chain(out: &mut String, plan: &Plan, chain: &Chain) {
    let pi = chain.stationary();
    let pages: Vec<String> = chain
        .states
        .iter()
        .map(|s| {
            s.request.as_ref().map_or("-".to_string(), |r| {
                let t = &plan.requests[r.request];
                let star = if r.static_resources.is_some() {
                    " +static"
                } else {
                    ""
                };
                format!("{} {}{star}", t.method, t.path)
            })
        })
        .collect();
    // A page as long as a templated URL widens its column rather than running into the next.
    let width = pages
        .iter()
        .map(|p| p.chars().count() + 2)
        .max()
        .unwrap_or(0)
        .max(38);
    let _ = writeln!(
        out,
        "    {:<14}{:>9}  {:<width$}{:<26}next",
        "state", "visits %", "page", "think"
    );
    for ((i, s), page) in chain.states.iter().enumerate().zip(pages) {
        let think = s.think.as_ref().map_or("-".to_string(), think_text);
        let mut prev = 0.0;
        let next: Vec<String> = s
            .next
            .iter()
            .map(|(to, cum)| {
                let p = cum - prev;
                prev = *cum;
                let name = to.map_or("end", |k| chain.states[k].name.as_str());
                format!("{name} {:.0} %", 100.0 * p)
            })
            .collect();
        let next = if next.is_empty() {
            "end".to_string()
        } else {
            next.join(", ")
        };
        let _ = writeln!(
            out,
            "    {:<14}{:>9.1}  {:<width$}{:<26}{next}",
            s.name,
            100.0 * pi[i],
            page,
            think
        );
    }
    let _ = writeln!(out, "    start: {}", chain.states[chain.start].name);
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadlab_run::Stop;

    #[test]
    fn a_closed_plan_lists_its_requests_and_no_phases() {
        let plan = Plan::get(
            "127.0.0.1:8080".parse().unwrap(),
            "/ping",
            Model::closed(2, 1),
            Stop::default(),
        );
        assert_eq!(
            render_plan(&plan),
            "  requests (round robin, weights as repetitions): 1\n    http://127.0.0.1:8080/ping × 1\n"
        );
    }

    #[test]
    fn the_arrivals_of_the_phases_add_up_to_the_total() {
        let secs = std::time::Duration::from_secs(5);
        // 3.5 then 6.5 arrivals: rounded alone they would read 4 + 7 of a total of 10.
        let phases = vec![
            loadlab_run::RatePhase::ramp("up", 0.0, 1.4, secs),
            loadlab_run::RatePhase::constant("steady", 1.3, Some(secs)),
        ];
        let plan = Plan::get(
            "127.0.0.1:8080".parse().unwrap(),
            "/ping",
            Model::open_phases(phases, 1, 1),
            Stop::default(),
        );
        let text = render_plan(&plan);
        let arrivals: Vec<f64> = text
            .lines()
            .filter(|l| l.trim_start().starts_with("up") || l.trim_start().starts_with("steady"))
            .map(|l| l.split_whitespace().last().unwrap().parse().unwrap())
            .collect();
        assert_eq!(arrivals, [4.0, 6.0], "{text}");
        assert!(text.contains("total: 10 arrivals"), "{text}");
    }
}
