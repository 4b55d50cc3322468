//! Static resources of a virtual user's page (sessions layer): on a user's first visit to a
//! page, the images, scripts and stylesheets its HTML names on its own origin are fetched one
//! after another on the page's connection, as a browser loads them.

use loadlab_run::RequestTemplate;

use crate::http1::encode_request;
use crate::record::Pending;
use crate::session::client::Client;
use crate::session::html::resource_urls;
use crate::session::state::Users;

/// Fetches the resources that the HTML `body` of the page at `base` names on the page's own
/// host, as request template `statics`; others are counted as skipped. A failed resource is
/// recorded but does not end the session, as a browser shows the page without it.
pub async fn fetch(users: &Users, client: &mut Client, statics: usize, base: &str, body: &[u8]) {
    let html = String::from_utf8_lossy(body);
    let base = url::Url::parse(base).ok();
    let t = &users.plan.requests[statics];
    let authority = &users.plan.endpoints[t.endpoint].authority;
    let pending = Pending {
        intended: None,
        template: statics,
    };
    let (mut fetched, mut skipped) = (0, 0);
    for src in resource_urls(&html) {
        // Built in a block so that the URLs and the template are not kept in the session's
        // state while the resource is fetched.
        let bytes = {
            let resolved = base.as_ref().and_then(|b| b.join(&src).ok());
            let same_host = resolved.as_ref().zip(base.as_ref()).is_some_and(|(r, b)| {
                r.scheme() == b.scheme()
                    && r.host_str() == b.host_str()
                    && r.port_or_known_default() == b.port_or_known_default()
            });
            let Some(url) = resolved.filter(|_| same_host) else {
                skipped += 1;
                continue;
            };
            let mut path = url.path().to_string();
            if let Some(q) = url.query() {
                path.push('?');
                path.push_str(q);
            }
            let req = RequestTemplate {
                path,
                headers: Vec::new(),
                body: Vec::new(),
                grpc_stream: None,
                method: "GET".into(),
                ..t.clone()
            };
            encode_request(&req, authority)
        };
        let sent = client.send(&users.wire, &pending, &bytes, false).await;
        if sent.is_ok() {
            fetched += 1;
        }
    }
    let mut record = users.record.borrow_mut();
    record.static_fetched += fetched;
    record.static_skipped += skipped;
}
