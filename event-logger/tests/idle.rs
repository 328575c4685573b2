//! A session may stay idle longer than the Hello time-out: that limit is
//! for peers that never introduce themselves, not for quiet ranks.

use std::time::Duration;

use vpml_event_logger::{CallId, Client, ClientConfig, Event, Server, ServerConfig, Tokens};

#[test]
fn an_idle_session_is_not_closed_by_the_hello_timeout() {
    let tmp = tempfile::Builder::new()
        .prefix("vpml-el-idle-")
        .tempdir()
        .expect("a temporary directory");
    let dir = tmp.path().join("logger");
    let token = "idle-test-token-0123456789abcdef";
    let mut cfg = ServerConfig::new(&dir, Tokens::single(None, token).unwrap());
    cfg.hello_timeout = Duration::from_millis(200);
    let server = Server::bind(cfg).unwrap();
    let client = Client::connect(ClientConfig::new(
        vec![server.local_addr()],
        "idle",
        0,
        0,
        token,
    ))
    .unwrap();
    // The scenario itself: a rank with nothing to log for longer than the
    // Hello time-out, right after connecting.
    std::thread::sleep(Duration::from_millis(600));
    client
        .put(&Event::Match {
            recv: CallId::new(0, 1),
            source: 1,
        })
        .unwrap();
    client.wait_all_durable().unwrap();
    let stats = client.stats().unwrap();
    assert_eq!(
        stats[0].connections_total, 1,
        "the idle session was closed and reopened"
    );
    assert_eq!(stats[0].connections_refused, 0);
    let _ = client.close();
    server.shutdown();
}
