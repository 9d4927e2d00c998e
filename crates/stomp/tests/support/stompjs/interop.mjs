// @stomp/stompjs (npm) in Node over WebSocket (the `ws` package) against a real `ferry serve`.
// Usage: node interop.mjs --ws ws://HOST:PORT/stomp --server HOST:PORT --ferry PATH
// Each check prints "ok: <name>"; the last line is "every check passed".

import { Client } from "@stomp/stompjs";
import WebSocket from "ws";
import { execFile } from "node:child_process";
import { promisify } from "node:util";

// The CLI runs beside the event loop, never blocking it: a loop blocked for two heart-beat
// intervals (a slow CLI start on a busy machine) loses the connection to the heart-beat checks.
const run = promisify(execFile);

const arg = (name) => process.argv[process.argv.indexOf(name) + 1];
const url = arg("--ws");
const server = arg("--server");
const ferry = arg("--ferry");

function connect(extra = {}) {
  return new Promise((resolve, reject) => {
    const client = new Client({
      webSocketFactory: () => new WebSocket(url, ["v12.stomp", "v11.stomp", "v10.stomp"]),
      reconnectDelay: 0,
      heartbeatIncoming: 1000,
      heartbeatOutgoing: 1000,
      ...extra,
    });
    client.onConnect = (frame) => resolve({ client, frame });
    client.onStompError = (frame) => reject(new Error(`ERROR ${frame.headers.message}`));
    client.onWebSocketError = (e) => reject(new Error(`WebSocket error ${e.message}`));
    client.activate();
  });
}

// The next `n` messages of a subscription, within 10 s.
function collector() {
  const got = [];
  const waiters = [];
  const onMessage = (m) => {
    got.push(m);
    waiters.splice(0).forEach((w) => w());
  };
  const take = async (n) => {
    const deadline = Date.now() + 10000;
    while (got.length < n) {
      if (Date.now() > deadline) throw new Error(`got ${got.length} of ${n} messages`);
      await new Promise((r) => { waiters.push(r); setTimeout(r, 100); });
    }
    return got.splice(0, n);
  };
  return { onMessage, take, got };
}

async function receipted(client, id, action) {
  const done = new Promise((r) => client.watchForReceipt(id, r));
  action({ receipt: id });
  await done;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check("connects with subprotocol v12.stomp and STOMP 1.2", async () => {
  const { client, frame } = await connect();
  if (frame.headers.version !== "1.2") throw new Error(`version ${frame.headers.version}`);
  if (client.webSocket.protocol !== "v12.stomp") throw new Error(`subprotocol ${client.webSocket.protocol}`);
  await client.deactivate();
});

check("queue: send, receive, ack (client-individual), headers both ways", async () => {
  const { client } = await connect();
  const c = collector();
  client.subscribe("/queue/js", c.onMessage, { ack: "client-individual" });
  await receipted(client, "s1", (h) =>
    client.publish({ destination: "/queue/js", body: "hello from node", headers: { ...h, priority: "6", region: "eu" } }));
  const [m] = await c.take(1);
  if (m.body !== "hello from node") throw new Error(m.body);
  if (m.headers.priority !== "6" || m.headers.region !== "eu") throw new Error(JSON.stringify(m.headers));
  m.ack();
  await client.deactivate();
  const again = await connect();
  const c2 = collector();
  again.client.subscribe("/queue/js", c2.onMessage);
  await sleep(500);
  if (c2.got.length !== 0) throw new Error("acknowledged message came back");
  await again.client.deactivate();
});

check("topic: every subscriber gets a copy", async () => {
  const { client } = await connect();
  const a = collector();
  const b = collector();
  client.subscribe("/topic/js.news", a.onMessage);
  client.subscribe("/topic/js.*", b.onMessage);
  await receipted(client, "p1", (h) => client.publish({ destination: "/topic/js.news", body: "news", headers: h }));
  await a.take(1);
  await b.take(1);
  await client.deactivate();
});

check("a binary body arrives byte-exact", async () => {
  const { client } = await connect();
  const c = collector();
  client.subscribe("/queue/js.binary", c.onMessage);
  const body = new Uint8Array(100000);
  for (let i = 0; i < body.length; i++) body[i] = (i * 7919) % 256;
  client.publish({ destination: "/queue/js.binary", binaryBody: body });
  const [m] = await c.take(1);
  const got = m.binaryBody;
  if (got.length !== body.length || got.some((x, i) => x !== body[i])) throw new Error("body differs");
  await client.deactivate();
});

check("a transaction: aborted sends never arrive, committed ones do", async () => {
  const { client } = await connect();
  const c = collector();
  client.subscribe("/queue/js.txn", c.onMessage);
  const t1 = client.begin();
  client.publish({ destination: "/queue/js.txn", body: "aborted", headers: { transaction: t1.id } });
  t1.abort();
  const t2 = client.begin();
  client.publish({ destination: "/queue/js.txn", body: "committed", headers: { transaction: t2.id } });
  t2.commit();
  const [m] = await c.take(1);
  if (m.body !== "committed") throw new Error(m.body);
  await sleep(300);
  if (c.got.length !== 0) throw new Error("an aborted message arrived");
  await client.deactivate();
});

check("a message published with the CLI arrives over WebSocket", async () => {
  const { client } = await connect();
  const c = collector();
  await receipted(client, "sub", (h) => client.subscribe("/topic/js.cli", c.onMessage, h));
  await run(ferry, ["publish", "--topic", "js.cli", "--server", server, "-p", "origin=cli", "from the cli"]);
  const [m] = await c.take(1);
  if (m.body !== "from the cli" || m.headers.origin !== "cli") throw new Error(JSON.stringify(m.headers));
  await client.deactivate();
});

check("heart-beats keep an idle connection open", async () => {
  const { client } = await connect();
  await sleep(3500);
  if (!client.connected) throw new Error("disconnected while idle");
  await client.deactivate();
});

for (const [name, fn] of checks) {
  await fn();
  console.log(`ok: ${name}`);
}
console.log("every check passed");
process.exit(0);
