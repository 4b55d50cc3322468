//! nginx as the load balancer in front of replicas: loadlab writes its configuration into a
//! prefix directory of its own and runs it as a child process, never the system service.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Supervised;
use crate::LabError;

/// How nginx balances and waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NginxConfig {
    /// Port nginx listens on (127.0.0.1).
    pub port: u16,
    /// Ports of the replicas (127.0.0.1).
    pub upstreams: Vec<u16>,
    /// Connect, send and read timeouts towards the replicas (seed 001 used 60 s).
    pub proxy_timeout: Duration,
    /// Idle keep-alive connections kept open to the replicas per nginx worker.
    pub keepalive: usize,
    /// Requests served at once; past them nginx closes a new request's connection without an
    /// answer (its `limit_conn` with status 444). `None`: no limit.
    pub connections: Option<usize>,
    /// Serve `/static/NAME.css|js|png` from this directory's `site.css`, `app.js` and
    /// `image.png` instead of passing them to the replicas (seed 002 moved its static files to
    /// nginx); `None` passes everything on.
    pub static_dir: Option<PathBuf>,
}

/// How long nginx leaves a replica out of its round after it failed (its default
/// `fail_timeout`, with the default `max_fails=1`, as seed 001's nginx ran).
pub const FAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// True when `log` (nginx's error log) says nginx took a server out of its round.
pub fn disabled_a_server(log: &str) -> bool {
    log.contains("upstream server temporarily disabled")
}

/// The nginx binary, or an error saying how to install it.
pub fn find_nginx() -> Result<PathBuf, LabError> {
    crate::find_program("nginx", &[PathBuf::from("/usr/local/nginx/sbin")])
        .ok_or(LabError::NginxMissing)
}

/// Renders nginx.conf for `prefix`: round robin over the upstreams, HTTP/1.1 keep-alive to
/// them, temporary files and logs inside the prefix.
pub fn render(config: &NginxConfig, prefix: &Path) -> String {
    let p = prefix.display();
    let t = config.proxy_timeout.as_secs().max(1);
    let mut upstream = String::new();
    for port in &config.upstreams {
        let _ = writeln!(upstream, "        server 127.0.0.1:{port};");
    }
    // Every name of a kind has the same body, as the reference service answers them.
    let statics: String = config
        .static_dir
        .iter()
        .fold(String::new(), |mut out, dir| {
            for (ext, file, mime) in [
                ("css", "site.css", "text/css"),
                ("js", "app.js", "text/javascript"),
                ("png", "image.png", "image/png"),
            ] {
                let _ = write!(
                    out,
                    "        location ~ \"^/static/[a-z0-9-]{{1,32}}\\.{ext}$\" {{
            root {dir};
            types {{ }}
            default_type {mime};
            add_header Cache-Control \"public, max-age=3600\";
            try_files /{file} =404;
        }}
",
                    dir = dir.display()
                );
            }
            out
        });
    // A zone keyed on the port (never empty, so every request is counted); 444 closes the
    // connection without an answer, as a front out of connections does.
    let (zone, limit) = match config.connections {
        Some(n) => (
            "    limit_conn_zone $server_port zone=front:1m;\n".to_string(),
            format!(
                "        limit_conn front {n};\n        limit_conn_status 444;\n        limit_conn_log_level info;\n"
            ),
        ),
        None => (String::new(), String::new()),
    };
    format!(
        "# written by loadlab; started with: nginx -p {p} -c {p}/nginx.conf
worker_processes auto;
daemon off;
pid {p}/nginx.pid;
error_log {p}/error.log warn;
events {{
    worker_connections 10000;
}}
http {{
    access_log off;
    client_body_temp_path {p}/tmp/body;
    proxy_temp_path {p}/tmp/proxy;
    fastcgi_temp_path {p}/tmp/fastcgi;
    uwsgi_temp_path {p}/tmp/uwsgi;
    scgi_temp_path {p}/tmp/scgi;
    keepalive_requests 1000000;
{zone}    upstream replicas {{
{upstream}        keepalive {keepalive};
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
{limit}{statics}        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_connect_timeout {t}s;
            proxy_send_timeout {t}s;
            proxy_read_timeout {t}s;
        }}
    }}
}}
",
        keepalive = config.keepalive,
        port = config.port,
    )
}

/// Writes the configuration into `prefix` and checks it with `nginx -t`.
pub fn prepare(config: &NginxConfig, prefix: &Path) -> Result<PathBuf, LabError> {
    let nginx = find_nginx()?;
    std::fs::create_dir_all(prefix.join("tmp")).map_err(LabError::Io)?;
    let conf = prefix.join("nginx.conf");
    std::fs::write(&conf, render(config, prefix)).map_err(LabError::Io)?;
    let check = Command::new(&nginx)
        .arg("-t")
        .arg("-q")
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(&conf)
        .output()
        .map_err(LabError::Io)?;
    if !check.status.success() {
        return Err(LabError::NginxConfig(
            String::from_utf8_lossy(&check.stderr)
                .trim()
                .replace('\n', " | "),
        ));
    }
    Ok(conf)
}

/// Starts nginx with a prepared configuration.
pub fn start(
    prefix: &Path,
    conf: &Path,
    place: impl FnOnce(&mut Command) -> Result<(), LabError>,
) -> Result<Supervised, LabError> {
    let nginx = find_nginx()?;
    let mut cmd = Command::new(nginx);
    cmd.arg("-p").arg(prefix).arg("-c").arg(conf);
    place(&mut cmd)?;
    Supervised::spawn("nginx", cmd).map_err(LabError::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_lists_every_replica_and_the_timeouts() {
        let text = render(
            &NginxConfig {
                port: 8080,
                upstreams: vec![9001, 9002, 9003],
                proxy_timeout: Duration::from_secs(60),
                keepalive: 64,
                connections: None,
                static_dir: None,
            },
            Path::new("/tmp/x"),
        );
        for port in [9001, 9002, 9003] {
            assert!(text.contains(&format!("server 127.0.0.1:{port};")));
        }
        assert!(text.contains("listen 127.0.0.1:8080"));
        assert!(text.contains("proxy_read_timeout 60s;"));
        assert!(text.contains("pid /tmp/x/nginx.pid;"));
    }
}
