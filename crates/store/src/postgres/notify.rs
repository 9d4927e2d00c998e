//! Change notices between nodes: `NOTIFY ferry_queue` in the transaction that made messages
//! ready (sends, requeues, returned leases), so every node sharing the database can wake its
//! long-poll receivers and subscriptions. PostgreSQL delivers a notice only if its transaction
//! commits, and only to sessions listening at that time.
//!
//! A payload is the sending node's name, then the queue names, one per line (names never hold
//! a newline). A payload with no queue names means "anything may have changed".

use deadpool_postgres::Transaction;

use super::tx::TxResult;

/// The channel every node listens on.
pub const CHANNEL: &str = "ferry_queue";

/// PostgreSQL refuses payloads of 8000 bytes or more; stay well below.
const MAX_PAYLOAD: usize = 7000;

/// The payloads announcing that `queues` changed on `node`, split to fit.
pub fn payloads<S: AsRef<str>>(node: &str, queues: &[S]) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = node.to_owned();
    let mut names = 0;
    for q in queues {
        let q = q.as_ref();
        if node.len() + 1 + q.len() > MAX_PAYLOAD {
            // Too long a name for a notice of its own: tell everybody to look everywhere.
            out.push(node.to_owned());
            continue;
        }
        if current.len() + 1 + q.len() > MAX_PAYLOAD {
            out.push(std::mem::replace(&mut current, node.to_owned()));
            names = 0;
        }
        current.push('\n');
        current.push_str(q);
        names += 1;
    }
    if names > 0 {
        out.push(current);
    }
    out
}

/// Splits a payload into the node that sent it and the queues it names.
pub fn parse(payload: &str) -> (&str, Vec<String>) {
    let mut lines = payload.split('\n');
    let node = lines.next().unwrap_or("");
    (
        node,
        lines.filter(|l| !l.is_empty()).map(str::to_owned).collect(),
    )
}

/// Announces, within `tx`, that `queues` changed.
pub async fn notify<S: AsRef<str>>(tx: &Transaction<'_>, node: &str, queues: &[S]) -> TxResult<()> {
    let payloads = payloads(node, queues);
    if payloads.is_empty() {
        return Ok(());
    }
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT pg_notify('{CHANNEL}', p) FROM unnest($1::text[]) AS p"
        ))
        .await?;
    tx.execute(&stmt, &[&payloads]).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_split_and_parse_back() {
        assert!(payloads::<&str>("n", &[]).is_empty());
        let one = payloads("n", &["a", "b"]);
        assert_eq!(one, vec!["n\na\nb"]);
        assert_eq!(parse(&one[0]), ("n", vec!["a".to_owned(), "b".to_owned()]));
        let many: Vec<String> = (0..2000).map(|i| format!("queue-{i}")).collect();
        let ps = payloads("node", &many);
        assert!(ps.len() > 1);
        let mut back = Vec::new();
        for p in &ps {
            assert!(p.len() <= MAX_PAYLOAD);
            let (node, qs) = parse(p);
            assert_eq!(node, "node");
            back.extend(qs);
        }
        assert_eq!(back, many);
        let huge = "x".repeat(MAX_PAYLOAD);
        assert_eq!(
            payloads("n", &[huge]),
            vec!["n"],
            "too long: look everywhere"
        );
        assert_eq!(parse("n"), ("n", vec![]));
    }
}
