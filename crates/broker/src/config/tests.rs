//! Tests of the configuration layers and their validation.

use super::*;

/// The configuration with `file` as the only layer.
fn from_file(file: &ConfigLayer) -> BrokerConfig {
    BrokerConfig::resolve(Some(file), &ConfigLayer::default(), &ConfigLayer::default()).unwrap()
}

#[test]
fn layers_apply_in_order_file_env_flags() {
    let file: ConfigLayer =
        toml::from_str("listen = \"127.0.0.1:1\"\nfsync = \"never\"\nlease_ms = 5").unwrap();
    let env = ConfigLayer::from_env([
        ("FERRY_FSYNC".to_owned(), "interval:10".to_owned()),
        ("FERRY_SERVER".to_owned(), "ignored".to_owned()),
    ])
    .unwrap();
    let flags = ConfigLayer {
        lease_ms: Some(7),
        ..ConfigLayer::default()
    };
    let cfg = BrokerConfig::resolve(Some(&file), &env, &flags).unwrap();
    assert_eq!(cfg.listen, "127.0.0.1:1");
    assert_eq!(cfg.fsync, FsyncPolicy::Interval(Duration::from_millis(10)));
    assert_eq!(cfg.limits.lease_ms, 7);
}

#[test]
fn unknown_file_key_is_an_error_naming_it() {
    let err = toml::from_str::<ConfigLayer>("lisen = \"x\"").unwrap_err();
    assert!(err.to_string().contains("lisen"), "{err}");
}

#[test]
fn bad_env_number_names_the_setting() {
    let err = ConfigLayer::from_env([("FERRY_MAX_CONNECTIONS".to_owned(), "many".to_owned())])
        .unwrap_err();
    assert!(err.to_string().contains("max_connections"), "{err}");
}

#[test]
fn bad_fsync_policy_is_rejected() {
    let flags = ConfigLayer {
        fsync: Some("sometimes".into()),
        ..ConfigLayer::default()
    };
    let err = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).unwrap_err();
    assert!(err.to_string().contains("fsync"), "{err}");
}

#[test]
fn store_setting_selects_the_engine() {
    let env = ConfigLayer::from_env([(
        "FERRY_STORE".to_owned(),
        "postgres://ferry:secret@db/ferry".to_owned(),
    )])
    .unwrap();
    let cfg = BrokerConfig::resolve(None, &env, &ConfigLayer::default()).unwrap();
    assert_eq!(
        cfg.store,
        StoreSetting::Postgres("postgres://ferry:secret@db/ferry".into())
    );
    assert!(cfg.to_toml().contains("postgres://ferry:****@db/ferry"));
    assert!(!cfg.to_toml().contains("secret"));
    let file: ConfigLayer = toml::from_str("store = \"embedded\"").unwrap();
    let cfg = from_file(&file);
    assert_eq!(cfg.store, StoreSetting::Embedded);
    let flags = ConfigLayer {
        store: Some("mysql://x".into()),
        ..ConfigLayer::default()
    };
    let err = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).unwrap_err();
    assert!(err.to_string().contains("store"), "{err}");
}

#[test]
fn workers_come_from_any_layer_and_zero_is_refused() {
    assert_eq!(BrokerConfig::default().workers, None);
    assert!(BrokerConfig::default()
        .to_toml()
        .contains("# workers: one per core"));
    let env = ConfigLayer::from_env([("FERRY_WORKERS".to_owned(), "1".to_owned())]).unwrap();
    let cfg = BrokerConfig::resolve(None, &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.workers, Some(1));
    assert!(cfg.to_toml().contains("workers = 1\n"));
    let file: ConfigLayer = toml::from_str("workers = 3").unwrap();
    let cfg = from_file(&file);
    assert_eq!(cfg.workers, Some(3));
    let flags = ConfigLayer {
        workers: Some(0),
        ..ConfigLayer::default()
    };
    let err = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).unwrap_err();
    assert!(err.to_string().contains("workers"), "{err}");
}

#[test]
fn spare_segments_come_from_file_or_environment_and_zero_is_allowed() {
    let defaults = BrokerConfig::default();
    assert_eq!(defaults.spare_segments, 8);
    assert!(defaults.to_toml().contains("\nspare_segments = 8\n"));
    let file: ConfigLayer = toml::from_str("spare_segments = 2").unwrap();
    let env = ConfigLayer::from_env([("FERRY_SPARE_SEGMENTS".to_owned(), "0".to_owned())]).unwrap();
    let cfg = from_file(&file);
    assert_eq!(cfg.spare_segments, 2);
    let cfg = BrokerConfig::resolve(Some(&file), &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.spare_segments, 0, "0 deletes compacted segments");
    let err =
        ConfigLayer::from_env([("FERRY_SPARE_SEGMENTS".to_owned(), "-1".to_owned())]).unwrap_err();
    assert!(err.to_string().contains("spare_segments"), "{err}");
}

#[test]
fn segment_bytes_come_from_file_or_environment_within_bounds() {
    assert_eq!(BrokerConfig::default().segment_bytes, 64 * 1024 * 1024);
    let file: ConfigLayer = toml::from_str("segment_bytes = 65536").unwrap();
    let cfg = from_file(&file);
    assert_eq!(cfg.segment_bytes, 65536);
    assert!(cfg.to_toml().contains("\nsegment_bytes = 65536\n"));
    let env =
        ConfigLayer::from_env([("FERRY_SEGMENT_BYTES".to_owned(), "1048576".to_owned())]).unwrap();
    let cfg = BrokerConfig::resolve(Some(&file), &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.segment_bytes, 1 << 20);
    for bad in [MIN_SEGMENT_BYTES - 1, MAX_SEGMENT_BYTES + 1] {
        let flags = ConfigLayer {
            segment_bytes: Some(bad),
            ..ConfigLayer::default()
        };
        let err = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).unwrap_err();
        assert!(err.to_string().contains("segment_bytes"), "{err}");
        assert!(err.to_string().contains("between 65536 and"), "{err}");
    }
    let err =
        ConfigLayer::from_env([("FERRY_SEGMENT_BYTES".to_owned(), "64M".to_owned())]).unwrap_err();
    assert!(err.to_string().contains("segment_bytes"), "{err}");
}

#[test]
fn frame_limit_must_hold_a_body() {
    let flags = ConfigLayer {
        max_frame_bytes: Some(1024),
        ..ConfigLayer::default()
    };
    assert!(BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).is_err());
}

#[test]
fn connection_budgets_and_timeouts_come_from_any_layer_within_bounds() {
    let d = BrokerConfig::default();
    assert_eq!(d.max_outbound_bytes, 8 << 20);
    assert_eq!(d.max_pending_bytes, 16 << 20);
    assert_eq!(d.keepalive_ms, 60_000);
    assert_eq!(d.max_connections_per_address, 0);
    assert_eq!(d.max_new_clients_per_sec, 100);
    let file: ConfigLayer = toml::from_str(
        "max_outbound_bytes = 65536\nmax_pending_bytes = 131072\nwrite_timeout_ms = 500\n\
         read_timeout_ms = 600\nhandshake_timeout_ms = 700\nkeepalive_ms = 800\n\
         max_connections_per_address = 3\nmax_new_clients_per_sec = 0\n\
         max_memory = 33554432",
    )
    .unwrap();
    let cfg = from_file(&file);
    assert_eq!(
        (
            cfg.max_outbound_bytes,
            cfg.max_pending_bytes,
            cfg.write_timeout_ms,
            cfg.read_timeout_ms,
            cfg.handshake_timeout_ms,
            cfg.keepalive_ms,
            cfg.max_connections_per_address,
            cfg.max_new_clients_per_sec,
            cfg.max_memory,
        ),
        (65536, 131072, 500, 600, 700, 800, 3, 0, 32 << 20)
    );
    let toml = cfg.to_toml();
    for line in [
        "max_outbound_bytes = 65536\n",
        "keepalive_ms = 800\n",
        "max_memory = 33554432\n",
        "max_new_clients_per_sec = 0\n",
    ] {
        assert!(toml.contains(line), "{line} missing from\n{toml}");
    }
    let env = ConfigLayer::from_env([
        ("FERRY_KEEPALIVE_MS".to_owned(), "1000".to_owned()),
        ("FERRY_MAX_MEMORY".to_owned(), "1073741824".to_owned()),
    ])
    .unwrap();
    let cfg = BrokerConfig::resolve(Some(&file), &env, &ConfigLayer::default()).unwrap();
    assert_eq!((cfg.keepalive_ms, cfg.max_memory), (1000, 1 << 30));
    for (flags, key) in [
        (
            ConfigLayer {
                max_outbound_bytes: Some(1000),
                ..ConfigLayer::default()
            },
            "max_outbound_bytes",
        ),
        (
            ConfigLayer {
                max_pending_bytes: Some(0),
                ..ConfigLayer::default()
            },
            "max_pending_bytes",
        ),
        (
            ConfigLayer {
                keepalive_ms: Some(99),
                ..ConfigLayer::default()
            },
            "keepalive_ms",
        ),
        (
            ConfigLayer {
                read_timeout_ms: Some(0),
                ..ConfigLayer::default()
            },
            "read_timeout_ms",
        ),
        (
            ConfigLayer {
                max_memory: Some(1 << 20),
                ..ConfigLayer::default()
            },
            "max_memory",
        ),
    ] {
        let err = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
    let err = ConfigLayer::from_env([("FERRY_WRITE_TIMEOUT_MS".to_owned(), "soon".to_owned())])
        .unwrap_err();
    assert!(err.to_string().contains("write_timeout_ms"), "{err}");
}

#[test]
fn client_expiry_comes_from_any_layer_and_zero_means_never() {
    let defaults = BrokerConfig::default();
    assert_eq!(defaults.client_expiry, Some(Duration::from_secs(86_400)));
    assert!(defaults
        .to_toml()
        .contains("\nclient_expiry_secs = 86400\n"));
    let file: ConfigLayer = toml::from_str("client_expiry_secs = 60").unwrap();
    assert_eq!(
        from_file(&file).client_expiry,
        Some(Duration::from_secs(60))
    );
    let env =
        ConfigLayer::from_env([("FERRY_CLIENT_EXPIRY_SECS".to_owned(), "0".to_owned())]).unwrap();
    let cfg = BrokerConfig::resolve(Some(&file), &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.client_expiry, None, "0 keeps names forever");
    assert!(cfg.to_toml().contains("\nclient_expiry_secs = 0\n"));
    let flags = ConfigLayer {
        client_expiry_secs: Some(5),
        ..ConfigLayer::default()
    };
    let cfg = BrokerConfig::resolve(Some(&file), &env, &flags).unwrap();
    assert_eq!(cfg.client_expiry, Some(Duration::from_secs(5)));
    let err = ConfigLayer::from_env([("FERRY_CLIENT_EXPIRY_SECS".to_owned(), "1d".to_owned())])
        .unwrap_err();
    assert!(err.to_string().contains("client_expiry_secs"), "{err}");
}

#[test]
fn http_listen_is_loopback_unless_remote_is_allowed() {
    let cfg = BrokerConfig::default();
    assert_eq!(cfg.http_addr(), Some("127.0.0.1:6731"));
    for (listen, allow, ok) in [
        ("off", false, true),
        ("127.0.0.1:0", false, true),
        ("[::1]:6731", false, true),
        ("localhost:6731", false, true),
        ("0.0.0.0:6731", false, false),
        ("10.1.2.3:6731", false, false),
        ("0.0.0.0:6731", true, true),
        ("127.0.0.1", false, false),
    ] {
        let flags = ConfigLayer {
            http_listen: Some(listen.into()),
            http_allow_remote: Some(allow),
            ..ConfigLayer::default()
        };
        let got = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags);
        assert_eq!(got.is_ok(), ok, "{listen} allow={allow}: {got:?}");
        if let Err(e) = got {
            assert!(e.to_string().contains("http_listen"), "{e}");
        }
    }
    let env = ConfigLayer::from_env([("FERRY_HTTP_LISTEN".to_owned(), "off".to_owned())]).unwrap();
    let cfg = BrokerConfig::resolve(None, &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.http_addr(), None);
    assert!(cfg.to_toml().contains("http_listen = \"off\""));
}

/// The settings table of docs/operations.md: the lines from its header row to the blank line.
fn docs_table() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operations.md");
    let text = std::fs::read_to_string(path).unwrap();
    let start = text
        .find("| file key | environment |")
        .expect("settings table");
    let end = text[start..]
        .find("\n\n")
        .map_or(text.len(), |n| start + n + 1);
    text[start..end].to_owned()
}

#[test]
fn docs_settings_table_matches_the_declarations() {
    let want = declare::settings_table();
    assert!(
        docs_table() == want,
        "docs/operations.md's settings table differs from the declarations; replace it with:\n\n{want}"
    );
}

#[test]
fn every_setting_has_a_variable_a_flag_and_a_line_in_check_config() {
    let toml = BrokerConfig::default().to_toml();
    for s in SETTINGS {
        assert!(
            toml.contains(&format!("\n{} = ", s.key))
                || toml.starts_with(&format!("{} = ", s.key))
                || toml.contains(&format!("# {}: ", s.key)),
            "{} missing from\n{toml}",
            s.key
        );
        let env = ConfigLayer::from_env([(s.env_var(), "bad\u{7f}".to_owned())]);
        let read = ConfigLayer::from_env([(s.env_var(), "1".to_owned())]).unwrap();
        assert_ne!(
            read,
            ConfigLayer::default(),
            "{} not read from the environment",
            s.key
        );
        if let Err(e) = env {
            assert!(e.to_string().contains(s.key), "{e}");
        }
    }
    let parsed: toml::Table = toml::from_str(&toml).unwrap();
    let layer: ConfigLayer = toml::from_str(&toml).unwrap();
    assert_eq!(
        parsed.len(),
        SETTINGS
            .iter()
            .filter(|s| (s.show)(&BrokerConfig::default()).is_some())
            .count()
    );
    assert_eq!(
        BrokerConfig::resolve(
            Some(&layer),
            &ConfigLayer::default(),
            &ConfigLayer::default()
        )
        .unwrap()
        .to_toml(),
        toml,
        "--check-config's output read back as a file gives the same configuration"
    );
}

#[test]
fn a_documented_numeric_default_is_the_real_one() {
    for s in SETTINGS {
        let (Some(doc), Some(real)) = (s.default_doc, (s.show)(&BrokerConfig::default())) else {
            continue;
        };
        if doc.starts_with(|c: char| c.is_ascii_digit()) {
            let real = real.toml();
            assert!(
                doc.split(' ').next() == Some(real.as_str()),
                "{}: docs say {doc}, the code {real}",
                s.key
            );
        }
    }
}

#[test]
fn lower_case_and_foreign_variables_are_ignored() {
    let layer = ConfigLayer::from_env([
        ("FERRY_listen".to_owned(), "x".to_owned()),
        ("FERRY_SERVER".to_owned(), "x".to_owned()),
        ("LISTEN".to_owned(), "x".to_owned()),
    ])
    .unwrap();
    assert_eq!(layer, ConfigLayer::default());
}

#[test]
fn udp_settings_come_from_any_layer_and_are_checked() {
    let defaults = BrokerConfig::default();
    assert_eq!(defaults.udp_listen, None);
    assert!(!defaults.udp_persistent);
    assert!(defaults
        .to_toml()
        .contains("# udp_listen: unset (no datagram ingest)"));
    let file: ConfigLayer =
        toml::from_str("udp_listen = \"127.0.0.1:6731\"\nudp_topic = \"monitoring\"").unwrap();
    assert_eq!(
        defaults.udp_receive_buffer,
        crate::config::DEFAULT_UDP_RECEIVE_BUFFER
    );
    let env = ConfigLayer::from_env([
        ("FERRY_UDP_PERSISTENT".to_owned(), "true".to_owned()),
        ("FERRY_UDP_RECEIVE_BUFFER".to_owned(), "1048576".to_owned()),
    ])
    .unwrap();
    let cfg = BrokerConfig::resolve(Some(&file), &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.udp_receive_buffer, 1 << 20);
    assert_eq!(cfg.udp_listen.as_deref(), Some("127.0.0.1:6731"));
    assert_eq!(cfg.udp_topic.as_deref(), Some("monitoring"));
    assert!(cfg.udp_persistent);
    let toml = cfg.to_toml();
    assert!(
        toml.contains(
            "udp_listen = \"127.0.0.1:6731\"\nudp_topic = \"monitoring\"\nudp_persistent = true\n"
        ),
        "{toml}"
    );
    let reread: ConfigLayer = toml::from_str(&toml).unwrap();
    assert_eq!(reread.udp_topic.as_deref(), Some("monitoring"));
    let err = ConfigLayer::from_env([("FERRY_UDP_PERSISTENT".to_owned(), "maybe".to_owned())])
        .unwrap_err();
    assert!(err.to_string().contains("udp_persistent"), "{err}");
    for (key, flags) in [
        (
            "udp_listen",
            ConfigLayer {
                udp_listen: Some("nowhere".into()),
                ..ConfigLayer::default()
            },
        ),
        (
            "udp_topic",
            ConfigLayer {
                udp_topic: Some("bad topic".into()),
                ..ConfigLayer::default()
            },
        ),
        (
            "udp_topic",
            ConfigLayer {
                udp_topic: Some("prices.>".into()),
                ..ConfigLayer::default()
            },
        ),
    ] {
        let err = BrokerConfig::resolve(None, &ConfigLayer::default(), &flags).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
}

#[test]
fn anonymous_grants_are_a_list_in_the_file_and_comma_separated_elsewhere() {
    let file: ConfigLayer =
        toml::from_str("anonymous_grants = [\"send queue public-*\", \"monitor\"]").unwrap();
    let cfg = from_file(&file);
    assert_eq!(cfg.anonymous_grants, ["send queue public-*", "monitor"]);
    let toml = cfg.to_toml();
    assert!(
        toml.contains("\nanonymous_grants = [\"send queue public-*\", \"monitor\"]\n"),
        "{toml}"
    );
    let again: ConfigLayer = toml::from_str(&toml).unwrap();
    assert_eq!(from_file(&again), cfg, "--check-config's list reads back");

    let env = ConfigLayer::from_env([(
        "FERRY_ANONYMOUS_GRANTS".to_owned(),
        " receive queue public-* , ,monitor".to_owned(),
    )])
    .unwrap();
    let cfg = BrokerConfig::resolve(None, &env, &ConfigLayer::default()).unwrap();
    assert_eq!(cfg.anonymous_grants, ["receive queue public-*", "monitor"]);

    #[derive(clap::Parser)]
    struct Flags {
        #[command(flatten)]
        settings: ConfigLayer,
    }
    let flags = <Flags as clap::Parser>::try_parse_from([
        "serve",
        "--anonymous-grants",
        "send queue a,receive queue b",
        "--allow-anonymous",
    ])
    .unwrap()
    .settings;
    let cfg = BrokerConfig::resolve(Some(&file), &env, &flags).unwrap();
    assert_eq!(cfg.anonymous_grants, ["send queue a", "receive queue b"]);
    assert!(cfg.allow_anonymous, "the flag alone means true");
}

#[test]
fn bad_grants_and_weak_iteration_counts_are_refused_naming_the_setting() {
    let env = ConfigLayer::from_env([(
        "FERRY_ANONYMOUS_GRANTS".to_owned(),
        "fly queue x".to_owned(),
    )])
    .unwrap();
    let err = BrokerConfig::resolve(None, &env, &ConfigLayer::default()).unwrap_err();
    assert!(err.to_string().contains("anonymous_grants"), "{err}");
    let file: ConfigLayer = toml::from_str("scram_iterations = 4095").unwrap();
    let err = BrokerConfig::resolve(
        Some(&file),
        &ConfigLayer::default(),
        &ConfigLayer::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("scram_iterations"), "{err}");
}

#[test]
fn tls_files_come_in_pairs_and_client_cas_need_them() {
    let cfg = |text: &str| {
        let file: ConfigLayer = toml::from_str(text).unwrap();
        BrokerConfig::resolve(
            Some(&file),
            &ConfigLayer::default(),
            &ConfigLayer::default(),
        )
    };
    let ok = cfg("tls_cert = \"s.pem\"\ntls_key = \"s.key\"\ntls_client_ca = \"ca.pem\"").unwrap();
    let files = ok.tls_files().expect("TLS on");
    assert_eq!(files.cert, std::path::Path::new("s.pem"));
    assert_eq!(
        files.client_ca.as_deref(),
        Some(std::path::Path::new("ca.pem"))
    );
    assert!(
        cfg("").unwrap().tls_files().is_none(),
        "plain TCP by default"
    );
    for (text, key) in [
        ("tls_cert = \"s.pem\"", "tls_cert"),
        ("tls_key = \"s.key\"", "tls_key"),
        ("tls_client_ca = \"ca.pem\"", "tls_client_ca"),
    ] {
        let err = cfg(text).unwrap_err();
        assert!(err.to_string().contains(key), "{text}: {err}");
    }
    let env = ConfigLayer::from_env([
        ("FERRY_TLS_CERT".to_owned(), "e.pem".to_owned()),
        ("FERRY_TLS_KEY".to_owned(), "e.key".to_owned()),
    ])
    .unwrap();
    let from_env = BrokerConfig::resolve(None, &env, &ConfigLayer::default()).unwrap();
    assert_eq!(
        from_env.tls_key.as_deref(),
        Some(std::path::Path::new("e.key"))
    );
}

#[test]
fn http_bounds_come_from_any_layer_and_a_clients_share_follows_the_slots() {
    let d = BrokerConfig::default();
    assert_eq!(d.http, HttpBounds::default());
    assert_eq!(
        (d.http.max_requests, d.http.requests_per_address()),
        (32, 16)
    );
    let file: ConfigLayer = toml::from_str(
        "http_max_requests = 5\nhttp_body_timeout_ms = 1000\nhttp_max_page_bytes = 65536",
    )
    .unwrap();
    let cfg = from_file(&file);
    // Unset, a client's share is half of the slots, rounded down, at least 1.
    assert_eq!(cfg.http.requests_per_address(), 2);
    assert_eq!(
        (cfg.http.body_timeout_ms, cfg.http.max_page_bytes),
        (1000, 65536)
    );
    let toml = cfg.to_toml();
    assert!(toml.contains("\nhttp_max_requests = 5\n"), "{toml}");
    assert!(
        toml.contains("# http_max_requests_per_address: half of http_max_requests"),
        "{toml}"
    );
    let env = ConfigLayer::from_env([(
        "FERRY_HTTP_MAX_REQUESTS_PER_ADDRESS".to_owned(),
        "5".to_owned(),
    )])
    .unwrap();
    let flags = ConfigLayer {
        http_max_requests: Some(1),
        http_max_requests_per_address: Some(1),
        http_write_timeout_ms: Some(250),
        ..ConfigLayer::default()
    };
    let cfg = BrokerConfig::resolve(Some(&file), &env, &ConfigLayer::default()).unwrap();
    assert_eq!(
        cfg.http.requests_per_address(),
        5,
        "one address may take every slot"
    );
    let cfg = BrokerConfig::resolve(Some(&file), &env, &flags).unwrap();
    assert_eq!(
        (
            cfg.http.max_requests,
            cfg.http.requests_per_address(),
            cfg.http.write_timeout_ms
        ),
        (1, 1, 250)
    );
    let one = BrokerConfig::resolve(
        None,
        &ConfigLayer::default(),
        &ConfigLayer {
            http_max_requests: Some(1),
            ..ConfigLayer::default()
        },
    )
    .unwrap();
    assert_eq!(one.http.requests_per_address(), 1, "at least 1");
}

#[test]
fn zero_and_absurd_http_bounds_are_refused_naming_the_setting_and_its_range() {
    let refused = |toml: &str| {
        let file: ConfigLayer = toml::from_str(toml).unwrap();
        BrokerConfig::resolve(
            Some(&file),
            &ConfigLayer::default(),
            &ConfigLayer::default(),
        )
        .unwrap_err()
        .to_string()
    };
    for (toml, want) in [
        ("http_max_connections = 0", "invalid http_max_connections = '0'"),
        (
            "http_max_connections = 1000000",
            "must be between 1 and 100000",
        ),
        ("http_header_timeout_ms = 0", "invalid http_header_timeout_ms"),
        ("http_max_body_bytes = 10", "must be between 65536 and"),
        (
            "http_max_requests = 0",
            "invalid http_max_requests = '0' (from config file): must be between 1 and 100000",
        ),
        ("http_max_requests_per_address = 0", "invalid http_max_requests_per_address = '0'"),
        (
            "http_max_requests = 4\nhttp_max_requests_per_address = 5",
            "must be between 1 and http_max_requests (4)",
        ),
        ("http_body_timeout_ms = 99", "invalid http_body_timeout_ms = '99'"),
        (
            "http_write_timeout_ms = 4000000",
            "invalid http_write_timeout_ms = '4000000' (from config file): must be between 100 and 3600000",
        ),
        ("http_max_page_bytes = 0", "invalid http_max_page_bytes = '0'"),
    ] {
        let err = refused(toml);
        assert!(err.contains(want), "{toml}: {err}");
    }
}

#[test]
fn a_value_out_of_range_is_named_with_the_layer_that_set_it_last() {
    let file: ConfigLayer = toml::from_str("http_max_requests = 0").unwrap();
    let env =
        ConfigLayer::from_env([("FERRY_HTTP_MAX_REQUESTS".to_owned(), "0".to_owned())]).unwrap();
    let flags = ConfigLayer {
        http_max_requests: Some(0),
        ..ConfigLayer::default()
    };
    let none = ConfigLayer::default();
    for (file, env, flags, origin) in [
        (Some(&file), &none, &none, "config file"),
        (Some(&file), &env, &none, "environment"),
        (Some(&file), &env, &flags, "command line"),
        (None, &none, &flags, "command line"),
    ] {
        let err = BrokerConfig::resolve(file, env, flags)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("invalid http_max_requests = '0' (from {origin})")),
            "{err}"
        );
    }
    // Set elsewhere, refused for another: named by where the refused one came from.
    let pair: ConfigLayer = toml::from_str("http_max_requests = 4").unwrap();
    let share = ConfigLayer {
        http_max_requests_per_address: Some(5),
        ..ConfigLayer::default()
    };
    let err = BrokerConfig::resolve(Some(&pair), &none, &share)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("invalid http_max_requests_per_address = '5' (from command line)"),
        "{err}"
    );
}
