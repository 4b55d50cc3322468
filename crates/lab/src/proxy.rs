//! The built-in load balancer, used when nginx is not installed: a round-robin TCP proxy.
//! It balances connections (layer 4), where nginx balances requests (layer 7): with
//! keep-alive clients each client connection stays on one replica.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A running proxy, stopped when dropped.
pub struct Proxy {
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Proxies every connection accepted on `listener` to the next of `backends` in turn.
    pub fn start(
        listener: std::net::TcpListener,
        backends: Vec<SocketAddr>,
    ) -> std::io::Result<Proxy> {
        listener.set_nonblocking(true)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (tx, rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("loadlab-proxy".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = TcpListener::from_std(listener).expect("non-blocking listener");
                    let next = Arc::new(AtomicUsize::new(0));
                    let backends = Arc::new(backends);
                    let accept = async {
                        loop {
                            let Ok((client, _)) = listener.accept().await else {
                                continue;
                            };
                            let i = next.fetch_add(1, Ordering::Relaxed) % backends.len();
                            let backend = backends[i];
                            tokio::spawn(async move {
                                if let Ok(mut upstream) = TcpStream::connect(backend).await {
                                    let mut client = client;
                                    let _ = client.set_nodelay(true);
                                    let _ = upstream.set_nodelay(true);
                                    let _ =
                                        tokio::io::copy_bidirectional(&mut client, &mut upstream)
                                            .await;
                                }
                            });
                        }
                    };
                    tokio::select! {
                        _ = accept => {}
                        _ = rx => {}
                    }
                });
                rt.shutdown_background();
            })?;
        Ok(Proxy {
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
