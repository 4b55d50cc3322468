//! The lab's readers of a Redis server, checked against the real redis-server (which
//! scripts/test.sh installs): the server loadlab starts and stops, the store sampler's readings,
//! and the visits application's books.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use loadlab_lab::store_sampler::StoreReader;
use loadlab_lab::visits::{counted, drain};
use loadlab_lab::RedisServer;
use loadlab_run::StreamReading;
use redis::Value;

/// True when a Redis server at `url` answers PING.
fn answers(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    client
        .get_connection_with_timeout(Duration::from_millis(500))
        .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
        .is_ok_and(|pong| pong == "PONG")
}

#[test]
fn a_started_server_answers_and_is_gone_after_drop() {
    let server = RedisServer::start()
        .expect("redis-server starts: scripts/test.sh installs it (apt-get install redis-server)");
    let url = server.url();
    assert!(answers(&url));
    assert!(url.starts_with("redis://127.0.0.1:"));
    let (pid, dir) = (server.pid(), server.dir().to_path_buf());
    assert!(dir.is_dir());
    drop(server);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "stopped and reaped"
    );
    assert!(!dir.exists());
    assert!(!answers(&url));
}

#[test]
fn a_reading_counts_the_services_commands_and_a_streams_backlog() {
    let server = RedisServer::start().unwrap();
    let mut reader = StoreReader::new(&server.url()).unwrap();
    let first = Instant::now();
    reader.read(first);
    let first_done = Instant::now();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_connection().unwrap();
    for i in 0..100 {
        let _: u64 = redis::cmd("INCR").arg("n").query(&mut c).unwrap();
        let _: String = redis::cmd("XADD")
            .arg("visits")
            .arg("*")
            .arg("page")
            .arg(i)
            .query(&mut c)
            .unwrap();
    }
    let _: String = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("visits")
        .arg("counters")
        .arg("0")
        .query(&mut c)
        .unwrap();
    // One consumer takes 30 of the 100 and acknowledges none.
    let _: Value = redis::cmd("XREADGROUP")
        .arg("GROUP")
        .arg("counters")
        .arg("c1")
        .arg("COUNT")
        .arg(30)
        .arg("STREAMS")
        .arg("visits")
        .arg(">")
        .query(&mut c)
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let second = Instant::now();
    reader.read(first);
    let second_done = Instant::now();
    let series = reader.finish();
    assert_eq!(
        series.samples.len(),
        1,
        "the first reading only starts the counter"
    );
    let s = &series.samples[0];
    // The test sent 202 commands (100 INCR, 100 XADD, XGROUP, XREADGROUP), plus up to a
    // few the client sends when it connects; the reader's own are not counted. The time
    // between the two readings lies between these bounds.
    let shortest = second.duration_since(first_done).as_secs_f64();
    let longest = second_done.duration_since(first).as_secs_f64();
    let (low, high) = (s.commands_per_s * shortest, s.commands_per_s * longest);
    assert!(
        low <= 206.5 && high >= 201.5,
        "{low}..{high} commands, {s:?}"
    );
    assert!(s.clients >= 2, "{s:?}");
    // Both readings within the first second: the sample describes second 0.
    assert_eq!(s.second, 0, "{s:?}");
    assert_eq!(
        s.streams,
        vec![StreamReading {
            stream: "visits".into(),
            length: 100,
            pending: 30,
            lag: Some(70),
        }]
    );
}

#[test]
fn counts_sum_the_shards_and_a_queue_drains_once_acknowledged() {
    let server = RedisServer::start().unwrap();
    let url = server.url();
    let mut c = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    for (key, n) in [
        ("visits:home:0", 3),
        ("visits:home:7", 2),
        ("visits:news:1", 4),
    ] {
        let _: () = redis::cmd("SET").arg(key).arg(n).query(&mut c).unwrap();
    }
    let counts = counted(&url).unwrap();
    assert_eq!(
        counts,
        BTreeMap::from([("home".into(), 5), ("news".into(), 4)])
    );
    assert!(
        drain(&url, Duration::ZERO).unwrap().is_some(),
        "no stream yet: nothing to drain"
    );
    let _: redis::Value = redis::cmd("XGROUP")
        .arg(&["CREATE", "visits", "counters", "0", "MKSTREAM"][..])
        .query(&mut c)
        .unwrap();
    let _: String = redis::cmd("XADD")
        .arg(&["visits", "*", "page", "home"][..])
        .query(&mut c)
        .unwrap();
    assert_eq!(
        drain(&url, Duration::ZERO).unwrap(),
        None,
        "one entry queued, none delivered"
    );
    assert_eq!(drain(&url, Duration::from_millis(150)).unwrap(), None);
}
