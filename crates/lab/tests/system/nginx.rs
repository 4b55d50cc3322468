//! The generated nginx configuration, checked by the real nginx.

use std::time::Duration;

use loadlab_lab::nginx::{prepare, NginxConfig};

#[test]
fn the_generated_config_passes_nginx_t() {
    let prefix = std::env::temp_dir().join(format!("loadlab-nginx-test-{}", std::process::id()));
    let config = NginxConfig {
        port: 18_181,
        upstreams: vec![18_182, 18_183],
        proxy_timeout: Duration::from_secs(60),
        keepalive: 64,
        static_dir: None,
    };
    let result = prepare(&config, &prefix);
    let _ = std::fs::remove_dir_all(&prefix);
    let conf = result.expect("nginx -t accepts the configuration");
    assert!(conf.ends_with("nginx.conf"));
}
