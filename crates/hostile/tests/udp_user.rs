//! The datagram ingest confined to a user (`udp_user`): datagrams naming a topic the user may
//! send to are published, one naming any other topic is refused by the broker and counted as
//! dropped, and an ingest set to run as a user that does not exist refuses to start.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use ferry_broker::stats::Stats;
use ferry_client::SubscribeTopic;
use ferry_protocol::AckMode;
use ferry_testkit::TestServer;
use ferry_udp::{Packer, UdpConfig, UdpGateway, MAX_DATAGRAM};

fn datagram(topic: &str, record: &[u8]) -> Vec<u8> {
    let mut p = Packer::new(Some(topic), MAX_DATAGRAM).expect("packer");
    assert!(p.push(record), "record fits");
    p.datagram().to_vec()
}

#[tokio::test]
async fn a_confined_ingest_publishes_only_where_its_user_may_send() {
    let s = TestServer::start().await;
    let m = s.broker().management();
    m.add_user("sensors", "pw", &["send topic metrics.*".into()])
        .await
        .unwrap();
    m.add_user(
        "admin",
        "admin-pw",
        &["admin".into(), "receive topic *".into()],
    )
    .await
    .unwrap();
    let admin = ferry_client::Client::connect_with(
        ferry_client::ConnectOptions::new(s.addr_string(), "admin").user("admin", "admin-pw"),
    )
    .await
    .unwrap();
    for t in ["metrics.cpu", "billing"] {
        admin.create_topic(t).await.unwrap();
    }
    let mut metrics = admin
        .subscribe_topic(SubscribeTopic::new("metrics.cpu").ack(AckMode::Auto))
        .await
        .unwrap();
    let mut config = UdpConfig::new("127.0.0.1:0", None);
    config.user = Some("sensors".into());
    let gateway = UdpGateway::start(s.broker(), config).await.expect("starts");
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .send_to(&datagram("metrics.cpu", b"load 0.5"), gateway.local_addr())
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), metrics.next())
        .await
        .expect("in time")
        .expect("open")
        .expect("delivery");
    assert_eq!(&got.message.body[..], b"load 0.5");
    socket
        .send_to(
            &datagram("billing", b"forged invoice"),
            gateway.local_addr(),
        )
        .unwrap();
    let stats = s.broker().stats();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Stats::get(&stats.udp.datagrams_dropped) < 1 {
        assert!(
            Instant::now() < deadline,
            "the forbidden datagram was not dropped"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(Stats::get(&stats.udp.records_published), 1);
    gateway.stop().await;

    let mut config = UdpConfig::new("127.0.0.1:0", None);
    config.user = Some("nobody".into());
    let e = UdpGateway::start(s.broker(), config)
        .await
        .err()
        .expect("started");
    assert!(e.to_string().contains("nobody"), "{e}");
}
