//! Client-ack takes gathered per source: concurrent receives on one queue (or by one sender)
//! in one order, from any sessions of this node, are served by one scan of the ready rows.
//!
//! Competing consumers woken together by an arrival would otherwise each scan the head of the
//! queue, skip the rows the others locked, and mostly come back empty. Here the first receive
//! for a source starts a drain task; receives arriving while it runs queue up behind it, and
//! each round takes everything queued: it locks up to the sum of their `max` ready rows
//! eligible for any of them (`FOR UPDATE SKIP LOCKED`, so other nodes' receivers still never
//! wait), hands the rows out in order (a row addressed to a client only to that client's
//! receives; each receive gets its rows in order, up to its `max`), leases each row to its
//! receive's session and reads the messages, in one transaction. The locked rows are found
//! again by `ctid` (they cannot move while locked). A round with one receive
//! runs the single-statement receive instead.
//!
//! A receive whose caller went away before its answer arrived has its deliveries returned at
//! once (requeued), as if the session had nacked them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ferry_protocol::{Delivery, Order, Source};
use tokio::sync::oneshot;

use super::inner::Inner;
use super::receive::{as_i64, orders, source_condition, timely, COLUMNS, JOINS};
use super::tx::{retrying, TxResult};
use crate::api::ReceiveSpec;
use crate::error::StoreError;

/// What receives are gathered by.
type Key = (Source, Order);

/// One waiting receive.
struct Pending {
    spec: ReceiveSpec,
    max: usize,
    reply: oneshot::Sender<Result<Vec<Delivery>, StoreError>>,
}

/// The receives waiting per source; a key is present while its drain task runs.
#[derive(Default)]
pub struct Gathers {
    waiting: Mutex<HashMap<Key, Vec<Pending>>>,
}

impl std::fmt::Debug for Gathers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gathers").finish_non_exhaustive()
    }
}

/// Most rows one round locks (the sum of the receives' `max` is capped at this).
const MAX_ROUND: usize = 16_384;

/// A client-ack take, gathered with the concurrent ones on the same source and order.
pub async fn receive(
    inner: &Arc<Inner>,
    gathers: &Arc<Gathers>,
    spec: &ReceiveSpec,
    max: usize,
) -> Result<Vec<Delivery>, StoreError> {
    let (reply, answer) = oneshot::channel();
    let key = (spec.source.clone(), spec.order);
    let pending = Pending {
        spec: spec.clone(),
        max: max.max(1),
        reply,
    };
    let start = {
        let mut waiting = gathers
            .waiting
            .lock()
            .map_err(|_| StoreError::Internal("receive gathering poisoned".into()))?;
        match waiting.get_mut(&key) {
            Some(queue) => {
                queue.push(pending);
                false
            }
            None => {
                waiting.insert(key.clone(), vec![pending]);
                true
            }
        }
    };
    if start {
        tokio::spawn(drain(inner.clone(), gathers.clone(), key));
    }
    answer
        .await
        .map_err(|_| StoreError::Internal("a gathered receive got no answer".into()))?
}

/// Serves the receives queued under `key` round after round until none is left.
async fn drain(inner: Arc<Inner>, gathers: Arc<Gathers>, key: Key) {
    loop {
        let round = {
            let Ok(mut waiting) = gathers.waiting.lock() else {
                return;
            };
            match waiting.get_mut(&key) {
                Some(queue) if !queue.is_empty() => std::mem::take(queue),
                _ => {
                    waiting.remove(&key);
                    return;
                }
            }
        };
        serve(&inner, round).await;
    }
}

/// Serves one round and answers each receive.
async fn serve(inner: &Inner, mut round: Vec<Pending>) {
    if round.len() == 1 {
        if let Some(p) = round.pop() {
            let result = inner.receive(&p.spec, p.max).await;
            answer(inner, p, result).await;
        }
        return;
    }
    match retrying(|| take_for(inner, &round)).await {
        Ok(mut per) => {
            for (i, p) in round.into_iter().enumerate() {
                let got = per.remove(&i).unwrap_or_default();
                answer(inner, p, Ok(got)).await;
            }
        }
        Err(e) => {
            for p in round {
                let _ = p.reply.send(Err(e.clone()));
            }
        }
    }
}

/// Sends `result` to the receive; if its caller is gone, returns what it was leased.
async fn answer(inner: &Inner, p: Pending, result: Result<Vec<Delivery>, StoreError>) {
    if let Err(Ok(unclaimed)) = p.reply.send(result) {
        if unclaimed.is_empty() {
            return;
        }
        let ids: Vec<u64> = unclaimed.iter().map(|d| d.delivery_id).collect();
        if let Err(e) = inner.requeue(p.spec.session, &ids).await {
            tracing::warn!(error = %e, "returning the deliveries of a receive whose caller left");
        }
    }
}

/// One round in one transaction: lock the rows, hand them out, lease them. Returns the
/// deliveries per receive (index in `round`), in order.
async fn take_for(inner: &Inner, round: &[Pending]) -> TxResult<HashMap<usize, Vec<Delivery>>> {
    let Some(first) = round.first().map(|p| &p.spec) else {
        return Ok(HashMap::new());
    };
    let mut conn = inner.conn().await?;
    let sender_id = match &first.source {
        Source::Queue(_) => None,
        Source::Sender(name) => {
            // Afresh: the name may have expired and been registered again under a new id.
            let found = inner
                .clients
                .lookup_fresh(&conn, &[name.as_str()], false)
                .await?;
            let Some(&id) = found.get(name.as_str()) else {
                return Err(StoreError::ClientNotFound(name.clone()).into());
            };
            Some(id)
        }
    };
    let names: Vec<&str> = round.iter().map(|p| p.spec.client.as_str()).collect();
    let ids = inner.clients.lookup(&conn, &names).await?;
    let client_ids: Vec<Option<i64>> = round
        .iter()
        .map(|p| ids.get(p.spec.client.as_str()).copied())
        .collect();
    let mut eligible: Vec<i64> = client_ids.iter().flatten().copied().collect();
    eligible.sort_unstable();
    eligible.dedup();
    let total = round.iter().map(|p| p.max).sum::<usize>().min(MAX_ROUND);
    let limit = i64::try_from(total).unwrap_or(i64::MAX);

    let (order, outer_order) = orders(first.order);
    // The receives of a round arrived together; the earliest current time among them decides
    // what is due (a row due for one of them only waits for the next round).
    let now = as_i64(round.iter().map(|p| p.spec.now_ms).min().unwrap_or(0));
    let pick = format!(
        "SELECT mq.ctid::text, mq.receiver_id, mq.body_bytes FROM message_queue mq \
         WHERE {} AND mq.lease_delivery_id IS NULL AND {} \
           AND (mq.receiver_id IS NULL OR mq.receiver_id = ANY($2)) \
         ORDER BY {order} LIMIT $3 FOR UPDATE OF mq SKIP LOCKED",
        source_condition(&first.source),
        timely("$4")
    );
    let tx = conn.transaction().await?;
    let stmt = tx.prepare_cached(&pick).await?;
    let rows = match (&first.source, sender_id) {
        (Source::Queue(name), _) => tx.query(&stmt, &[name, &eligible, &limit, &now]).await?,
        (Source::Sender(_), Some(id)) => tx.query(&stmt, &[&id, &eligible, &limit, &now]).await?,
        (Source::Sender(name), None) => return Err(StoreError::ClientNotFound(name.clone()).into()),
    };
    if rows.is_empty() {
        if let Source::Queue(name) = &first.source {
            let stmt = tx
                .prepare_cached("SELECT 1 FROM queues WHERE name = $1")
                .await?;
            if tx.query_opt(&stmt, &[name]).await?.is_none() {
                return Err(StoreError::QueueNotFound(name.clone()).into());
            }
        }
        tx.commit().await?;
        return Ok(HashMap::new());
    }

    // Hand the rows out in order: each to the first receive with room that may see it. A
    // receive whose byte limit the row would pass has no room left (its rows stay in order).
    // (receive index, room left, client id, session, lease deadline)
    let mut takers: Vec<(i64, usize, Option<i64>, i64, i64)> = round
        .iter()
        .zip(&client_ids)
        .enumerate()
        .map(|(i, (p, c))| {
            (
                i64::try_from(i).unwrap_or(0),
                p.max,
                *c,
                as_i64(p.spec.session),
                as_i64(p.spec.lease_until_ms),
            )
        })
        .collect();
    // The row ids each receive gets, in order.
    let mut tids: Vec<Vec<String>> = vec![Vec::new(); round.len()];
    // The bytes of the bodies each receive got.
    let mut bytes: Vec<u64> = vec![0; round.len()];
    for row in &rows {
        let receiver: Option<i64> = row.try_get(1)?;
        let size = u64::try_from(row.try_get::<_, i32>(2)?).unwrap_or(0);
        for (i, t) in takers.iter_mut().enumerate() {
            let (Some(p), Some(mine), Some(got)) =
                (round.get(i), tids.get_mut(i), bytes.get_mut(i))
            else {
                continue;
            };
            if t.1 == 0 || !(receiver.is_none() || receiver == t.2) {
                continue;
            }
            if !p.spec.fits(mine.len(), *got, size) {
                t.1 = 0;
                continue;
            }
            t.1 -= 1;
            mine.push(row.try_get::<_, String>(0)?);
            *got += size;
            break;
        }
        if takers.iter().all(|t| t.1 == 0) {
            break;
        }
    }
    // One statement per receive that got rows: a TID scan of its rows, no join with the
    // parameters (a join's plan depends on row estimates, which a queue table never has right).
    let stmt = tx
        .prepare_cached(&format!(
            "WITH r AS (UPDATE message_queue mq SET delivery_count = mq.delivery_count + 1, \
                 lease_node = $1, lease_session = $2, lease_until = $3, \
                 lease_delivery_id = nextval('delivery_ids') \
               WHERE mq.ctid = ANY($4::text[]::tid[]) \
               RETURNING mq.queue_id, mq.message_id, mq.priority, \
                 mq.delivery_count - 1 AS count, mq.lease_delivery_id AS delivery, mq.alone) \
             SELECT {COLUMNS} FROM r {JOINS} ORDER BY {outer_order}"
        ))
        .await?;
    let mut leased: Vec<(usize, Vec<tokio_postgres::Row>)> = Vec::new();
    for ((i, mine), t) in tids.iter().enumerate().zip(&takers) {
        if mine.is_empty() {
            continue;
        }
        let rows = tx.query(&stmt, &[&inner.node, &t.3, &t.4, mine]).await?;
        leased.push((i, rows));
    }
    tx.commit().await?;
    let mut per: HashMap<usize, Vec<Delivery>> = HashMap::new();
    for (i, rows) in leased {
        per.insert(i, inner.deliveries(&conn, &rows).await?);
    }
    Ok(per)
}
