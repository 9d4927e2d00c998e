//! The RFC 7677 test vector, round trips, and refusals of broken exchanges.

use super::*;

const SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn vector_credential() -> StoredCredential {
    StoredCredential::with_salt("pencil", B64.decode(SALT).unwrap(), 4096)
}

#[test]
fn the_client_reproduces_the_rfc_7677_vector() {
    let (mut client, first) = ScramClient::with_nonce("user", "pencil", CLIENT_NONCE);
    assert_eq!(first, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    assert_eq!(client.respond(SERVER_FIRST).unwrap(), CLIENT_FINAL);
    client.verify(SERVER_FINAL).unwrap();
}

#[test]
fn the_server_verifies_the_rfc_7677_vector() {
    let first = ClientFirst::parse("n,,n=user,r=rOprNGfwEbeRWgbNEkqO").unwrap();
    let (mut exchange, _) = ServerExchange::start(first, Some(vector_credential()), b"k", 4096);
    // Replace the random server nonce with the vector's to check the proof itself.
    exchange.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into();
    exchange.auth_prefix = format!("n=user,r=rOprNGfwEbeRWgbNEkqO,{SERVER_FIRST},");
    let (user, fin) = exchange.finish(CLIENT_FINAL).unwrap();
    assert_eq!(user, "user");
    assert_eq!(fin, SERVER_FINAL);
}

fn run(password: &str, stored: &str) -> Result<String, ScramError> {
    let credential = StoredCredential::new(stored, 4096);
    let (mut client, first) = ScramClient::new("alice", password);
    let first = ClientFirst::parse(&first)?;
    let (server, server_first) = ServerExchange::start(first, Some(credential), b"k", 4096);
    let fin = client.respond(&server_first)?;
    let (user, server_final) = server.finish(&fin)?;
    client.verify(&server_final)?;
    Ok(user)
}

#[test]
fn a_full_exchange_proves_the_user() {
    assert_eq!(run("s3cret", "s3cret").unwrap(), "alice");
}

#[test]
fn a_wrong_password_fails_the_proof() {
    assert_eq!(run("guess", "s3cret"), Err(ScramError::InvalidProof));
}

#[test]
fn an_unknown_user_fails_like_a_wrong_password_and_gets_a_stable_salt() {
    let (mut client, first) = ScramClient::new("mallory", "x");
    let parsed = ClientFirst::parse(&first).unwrap();
    let (server, server_first) = ServerExchange::start(parsed.clone(), None, b"k", 4096);
    let (_, again) = ServerExchange::start(parsed, None, b"k", 4096);
    let salt = |m: &str| m.split(",s=").nth(1).unwrap().to_owned();
    assert_eq!(salt(&server_first), salt(&again));
    let fin = client.respond(&server_first).unwrap();
    assert_eq!(server.finish(&fin), Err(ScramError::InvalidProof));
}

#[test]
fn a_replayed_client_final_fails_against_a_new_server_nonce() {
    let credential = StoredCredential::new("s3cret", 4096);
    let (mut client, first) = ScramClient::with_nonce("alice", "s3cret", "fixednonce");
    let parsed = ClientFirst::parse(&first).unwrap();
    let (server, server_first) =
        ServerExchange::start(parsed.clone(), Some(credential.clone()), b"k", 4096);
    let fin = client.respond(&server_first).unwrap();
    server.finish(&fin).unwrap();
    // The same client-first and client-final again: the server's nonce is new.
    let (server2, _) = ServerExchange::start(parsed, Some(credential), b"k", 4096);
    assert!(server2.finish(&fin).is_err());
}

#[test]
fn a_server_without_the_keys_is_detected_by_the_client() {
    let (mut client, first) = ScramClient::new("alice", "s3cret");
    let parsed = ClientFirst::parse(&first).unwrap();
    let (_, server_first) = ServerExchange::start(
        parsed,
        Some(StoredCredential::new("s3cret", 4096)),
        b"k",
        4096,
    );
    client.respond(&server_first).unwrap();
    assert_eq!(
        client.verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
        Err(ScramError::InvalidServerSignature)
    );
}

#[test]
fn user_names_with_commas_and_equals_are_escaped() {
    let (_, first) = ScramClient::with_nonce("a,b=c", "p", "n1");
    assert_eq!(first, "n,,n=a=2Cb=3Dc,r=n1");
    assert_eq!(ClientFirst::parse(&first).unwrap().user(), "a,b=c");
}

#[test]
fn malformed_client_first_messages_are_refused() {
    for m in [
        "",
        "n",
        "p=tls-unique,,n=a,r=x",
        "n,a=admin,n=a,r=x",
        "n,,r=x,n=a",
        "n,,n=a",
        "n,,n=,r=x",
        "n,,n=a,r=",
        "n,,n=a=4,r=x",
        "n,,m=ext,n=a,r=x",
        "n,,n=a,r=x,unexpected",
    ] {
        assert!(ClientFirst::parse(m).is_err(), "{m:?}");
    }
    assert!(ClientFirst::parse(&format!("n,,n=a,r={}", "x".repeat(2000))).is_err());
}

#[test]
fn malformed_client_final_messages_are_refused() {
    let credential = StoredCredential::new("s3cret", 4096);
    for m in [
        "",
        "c=biws",
        "c=biws,r=wrong,p=AAAA",
        "r=x,c=biws,p=AAAA",
        "c=cD10bHMtdW5pcXVlLCw=,r=NONCE,p=AAAA",
        "c=biws,r=NONCE,p=not base64!",
        "c=biws,r=NONCE,p=AAAA",
    ] {
        let (_, first) = ScramClient::new("alice", "s3cret");
        let parsed = ClientFirst::parse(&first).unwrap();
        let (server, _) = ServerExchange::start(parsed, Some(credential.clone()), b"k", 4096);
        let m = m.replace("NONCE", &server.nonce);
        assert!(server.finish(&m).is_err(), "{m:?}");
    }
}

#[test]
fn a_client_refuses_hostile_server_first_messages() {
    for m in [
        "r=othernonce,s=AAAA,i=4096",
        "r=NONCE,s=AAAA,i=4096",
        "r=NONCEx,s=AAAA,i=1",
        "r=NONCEx,s=AAAA,i=4294967295",
        "r=NONCEx,s=!!,i=4096",
        "e=other-error",
    ] {
        let (mut client, _) = ScramClient::with_nonce("alice", "p", "NONCE");
        assert!(client.respond(m).is_err(), "{m:?}");
    }
}

proptest::proptest! {
    #[test]
    fn arbitrary_messages_never_panic_or_prove(a in ".{0,300}", b in ".{0,300}") {
        if let Ok(first) = ClientFirst::parse(&a) {
            let (server, _) = ServerExchange::start(
                first, Some(StoredCredential::with_salt("p", vec![1; 16], 4096)), b"k", 4096);
            proptest::prop_assert!(server.finish(&b).is_err());
        }
        let (mut client, _) = ScramClient::new("u", "p");
        let _ = client.respond(&a);
        let _ = client.verify(&b);
    }
}
