//! With `send_eagerly = false`, puts stay queued until someone waits for
//! durability, and then leave together.

use vpml_event_logger::{CallId, Client, ClientConfig, Event, Server, ServerConfig, Tokens};

#[test]
fn lazy_puts_leave_only_when_durability_is_needed() {
    let tmp = tempfile::Builder::new()
        .prefix("vpml-el-lazy-")
        .tempdir()
        .expect("a temporary directory");
    let dir = tmp.path().join("logger");
    let token = "lazy-test-token-0123456789abcdef";
    let server = Server::bind(ServerConfig::new(
        &dir,
        Tokens::single(None, token).unwrap(),
    ))
    .unwrap();
    let mut cfg = ClientConfig::new(vec![server.local_addr()], "lazy", 0, 0, token);
    cfg.send_eagerly = false;
    let client = Client::connect(cfg).unwrap();
    for recv in 1..=5 {
        client
            .put(&Event::Match {
                recv: CallId::new(0, recv),
                source: 1,
            })
            .unwrap();
    }
    let before = client.stats().unwrap()[0].events_stored;
    assert_eq!(
        before, 0,
        "lazy puts reached the logger before anyone waited"
    );
    client.wait_all_durable().unwrap();
    let after = client.stats().unwrap().remove(0);
    assert_eq!(after.events_stored, 5);
    assert_eq!(after.puts, 1, "the five events should leave in one put");
    assert_eq!(client.get_events(1).unwrap().len(), 5);
    let _ = client.close();
    server.shutdown();
}
