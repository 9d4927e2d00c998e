//! The CONNECT handshake: reading the CONNECT (or STOMP) frame, negotiating the version and
//! heart-beats, checking the login and opening the broker session, or refusing with an ERROR.

use super::*;

/// Answers a refused handshake with an ERROR frame and closes.
pub(super) async fn refuse<W: FrameSink>(mut sink: W, failure: Failure, gw: &Inner) {
    debug!(reason = %failure.message, "STOMP connect refused");
    // The version is not known (or not agreed): the plainest form every version reads.
    let frame = mapping::error(
        &failure.message,
        &failure.details,
        failure.receipt.as_deref(),
        Version::V1_0,
    );
    let bytes = mapping::encode(&frame, Version::V1_0);
    let _ = tokio::time::timeout(gw.settings.write_timeout, sink.write(&[bytes])).await;
    let _ = tokio::time::timeout(gw.settings.write_timeout, sink.close()).await;
}

/// Reads up to the CONNECT (or STOMP) frame.
pub(super) async fn read_connect<S: ByteSource>(
    gw: &Inner,
    src: &mut S,
    buf: &mut BytesMut,
    scanner: &mut Scanner,
) -> Result<Frame, Failure> {
    loop {
        // CONNECT is never escaped, whatever the version.
        match codec::decode_with(scanner, buf, Version::V1_2, &gw.limits) {
            Ok(Some(Item::Heartbeat)) => continue,
            Ok(Some(Item::Frame(f))) => {
                return match f.command {
                    Command::Connect | Command::Stomp => Ok(f),
                    other => Err(Failure::new(
                        format!("expected CONNECT or STOMP, got {}", other.as_str()),
                        "a connection starts with a CONNECT or STOMP frame",
                    )),
                };
            }
            Ok(None) => {}
            Err(e) => return Err(malformed(&e)),
        }
        match src.read(buf).await {
            Ok(0) | Err(_) => {
                return Err(Failure::new("connection closed before CONNECT", ""));
            }
            Ok(_) => {}
        }
    }
}

pub(super) fn malformed(e: &codec::FrameError) -> Failure {
    Failure::new(
        e.to_string(),
        format!("the frame cannot be read ({e}); the connection is closed, since where the next frame starts cannot be trusted"),
    )
}

/// A CONNECT that was accepted.
pub(super) struct Accepted {
    pub(super) session: LocalSession,
    pub(super) pushes: ferry_broker::local::Pushes,
    pub(super) version: Version,
    /// How often the gateway sends heart-beats.
    pub(super) send_every: Option<Duration>,
    /// How often the client promised to send something.
    pub(super) expect_every: Option<Duration>,
    pub(super) connected: Frame,
    /// The client name was made up (no `client-id`).
    pub(super) generated: bool,
}

/// Negotiates the version and heart-beats, checks the login and opens the broker session.
pub(super) async fn accept(
    gw: &Arc<Inner>,
    f: &Frame,
    peer: &str,
    ip: Option<IpAddr>,
) -> Result<Accepted, Failure> {
    let receipt = f.header("receipt").map(str::to_owned);
    let Some(version) = negotiate::negotiate(f.header("accept-version")) else {
        return Err(Failure::new(
            "no supported protocol version",
            "Ferry speaks STOMP 1.0, 1.1 and 1.2; accept-version lists none of them",
        )
        .with_receipt(receipt));
    };
    let Some((cx, cy)) = negotiate::heart_beat(f.header("heart-beat")) else {
        return Err(Failure::new(
            "invalid heart-beat header",
            "heart-beat must be two numbers of milliseconds: cx,cy",
        ));
    };
    let principal = login::check(&gw.sessions, f.header("login"), f.header("passcode"), ip)
        .await
        .map_err(|refused| Failure::new(refused.message, refused.details))?;
    let hb = gw.settings.heartbeat_ms;
    let ms = |n: u32| (n > 0).then(|| Duration::from_millis(u64::from(n)));
    let send_every = ms(negotiate::interval(hb, cy));
    // Twice the client's interval: the specification leaves the tolerance to the server.
    let expect_every = ms(negotiate::interval(cx, hb)).map(|d| d * 2);
    let (name, generated) = match f.header("client-id") {
        Some(id) => (id.to_owned(), false),
        None => (gw.generated_name(&principal), true),
    };
    let (session, pushes) = gw
        .sessions
        .open(SessionRequest {
            client: name,
            ephemeral: generated,
            generated,
            principal,
            ip,
            peer: peer.to_owned(),
            protocol: "stomp",
        })
        .await
        .map_err(|e| Failure::refused("CONNECT", &e))?;
    let limits = gw.limits;
    let mut connected = Frame::new(Command::Connected)
        .header_with("version", version.as_str())
        .header_with("heart-beat", format!("{hb},{hb}"))
        .header_with("server", concat!("ferry/", env!("CARGO_PKG_VERSION")))
        .header_with("session", session.client())
        .header_with("ferry-max-body-bytes", limits.max_body_bytes.to_string())
        .header_with("ferry-max-frame-bytes", limits.max_frame_bytes.to_string())
        .header_with("ferry-max-headers", limits.max_headers.to_string())
        .header_with("ferry-max-header-line", limits.max_header_line.to_string());
    if version == Version::V1_0 {
        connected.headers.retain(|(n, _)| n != "heart-beat");
    }
    Ok(Accepted {
        session,
        pushes,
        version,
        send_every,
        expect_every,
        connected,
        generated,
    })
}
