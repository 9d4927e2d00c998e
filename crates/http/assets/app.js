// Ferry's web console: plain JavaScript over the JSON API, refreshed every two seconds.
"use strict";
const $ = (s, el = document) => el.querySelector(s);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
const fmt = (n) => (n == null ? "–" : Number(n).toLocaleString("en-US", { maximumFractionDigits: 1 }));
const bytes = (n) => (n == null ? "–" : n < 1024 ? `${n} B` : n < 1048576 ? `${fmt(n / 1024)} KiB` : n < 1073741824 ? `${fmt(n / 1048576)} MiB` : `${fmt(n / 1073741824)} GiB`);
const state = { page: "overview", queue: null, browse: { cursor: null, stack: [] } };

async function api(method, path, body) {
  const opts = { method, headers: {} };
  if (body !== undefined) { opts.headers["content-type"] = "application/json"; opts.body = JSON.stringify(body); }
  const r = await fetch(path, opts);
  const data = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(data.message || r.statusText);
  return data;
}
function toast(msg, error) {
  const t = $("#toast"); t.textContent = msg; t.className = error ? "error" : ""; t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => (t.hidden = true), 3500);
}
async function act(fn, ok) { try { await fn(); if (ok) toast(ok); refresh(); } catch (e) { toast(e.message, true); } }

function card(label, value, sub) {
  return `<div class="card"><div class="label">${esc(label)}</div><div class="value">${esc(value)}</div>${sub ? `<div class="sub">${esc(sub)}</div>` : ""}</div>`;
}
function chart(series, lines) {
  const w = 600, h = 180, pad = 28;
  const xs = series.map((s) => s.t);
  const max = Math.max(1, ...lines.flatMap((l) => series.map((s) => s[l.key])));
  const x0 = Math.min(...xs), x1 = Math.max(x0 + 1, ...xs);
  const px = (t) => pad + ((t - x0) / (x1 - x0)) * (w - pad - 8);
  const py = (v) => h - 20 - (v / max) * (h - 36);
  const grid = [0, 0.5, 1].map((f) => `<line x1="${pad}" x2="${w - 8}" y1="${py(max * f)}" y2="${py(max * f)}" stroke="#e3e8ee"/><text x="2" y="${py(max * f) + 4}" font-size="10" fill="#6b7785">${fmt(max * f)}</text>`).join("");
  const paths = lines.map((l) => `<polyline fill="none" stroke="${l.color}" stroke-width="2" points="${series.map((s) => `${px(s.t).toFixed(1)},${py(s[l.key]).toFixed(1)}`).join(" ")}"/>`).join("");
  const legend = lines.map((l) => `<i style="background:${l.color}"></i>${esc(l.label)} ${fmt(series.length ? series[series.length - 1][l.key] : 0)}`).join("");
  return `<svg viewBox="0 0 ${w} ${h}" preserveAspectRatio="none">${grid}${paths}</svg><div class="legend">${legend}</div>`;
}

async function overview() {
  const o = await api("GET", "/api/overview");
  $("#node").textContent = `node ${o.node} · ${o.engine} · v${o.version} · up ${Math.floor(o.uptime_secs)} s`;
  $("#cards").innerHTML = [
    card("Messages ready", fmt(o.messages.ready), `${fmt(o.messages.delayed)} delayed`),
    card("In flight", fmt(o.messages.in_flight)),
    card("Received / s", fmt(o.rates.received)),
    card("Delivered / s", fmt(o.rates.delivered)),
    card("Clients online", `${o.clients.online} / ${o.clients.registered}`, "online / in system"),
    card("Queues", fmt(o.queues), `${fmt(o.subscriptions)} subscriptions`),
    card("Log on disk", bytes(o.store.log_bytes), o.store.live_ratio == null ? "" : `${Math.round(o.store.live_ratio * 100)}% live`),
    card("Dead-lettered", fmt(o.store.dead_lettered), `${fmt(o.store.expired)} expired`),
  ].join("");
  const pts = [];
  for (let i = 1; i < o.series.length; i++) {
    const a = o.series[i - 1], b = o.series[i], dt = Math.max(1, b.at_ms - a.at_ms) / 1000;
    pts.push({ t: b.at_ms, received: (b.received - a.received) / dt, delivered: (b.delivered - a.delivered) / dt, acked: (b.acked - a.acked) / dt, ready: b.ready, in_flight: b.in_flight });
  }
  $("#chart-rates").innerHTML = chart(pts, [
    { key: "received", label: "received", color: "#1f6feb" },
    { key: "delivered", label: "delivered", color: "#12a594" },
    { key: "acked", label: "acked", color: "#9a6dd7" },
  ]);
  $("#chart-depth").innerHTML = chart(pts, [
    { key: "ready", label: "ready", color: "#1f6feb" },
    { key: "in_flight", label: "in flight", color: "#e5883a" },
  ]);
}

async function clients() {
  const c = await api("GET", "/api/clients");
  $("#client-cards").innerHTML = card("Clients in system", fmt(c.in_system)) + card("Online", fmt(c.online));
  $("#clients-table").innerHTML = `<tr><th>Client</th><th>State</th><th>Node</th><th>Address</th><th>Connected since</th><th class="num">In flight</th><th>Subscriptions</th><th></th></tr>` +
    c.clients.map((x) => `<tr data-client="${esc(x.name)}"><td>${esc(x.name)}</td><td><span class="pill ${x.online ? "on" : ""}">${x.online ? "online" : "offline"}</span></td>
      <td>${esc(x.node ?? "")}</td><td>${esc(x.address ?? "")}</td><td>${x.connected_at ? new Date(x.connected_at).toLocaleString() : ""}</td>
      <td class="num">${x.in_flight ?? ""}</td><td>${x.subscriptions.map((s) => esc(s.queue) + (s.selector ? ` <span class="muted">[${esc(s.selector)}]</span>` : "")).join("<br>")}</td>
      <td>${x.address ? `<button class="danger" data-disconnect="${esc(x.name)}">Disconnect</button>` : ""}</td></tr>`).join("");
}

async function queues() {
  const q = await api("GET", "/api/queues");
  $("#queues-table").innerHTML = `<tr><th>Queue</th><th class="num">Ready</th><th class="num">Delayed</th><th class="num">In flight</th><th class="num">In / s</th><th class="num">Out / s</th><th class="num">Oldest</th><th>Settings</th></tr>` +
    q.queues.map((x) => `<tr class="clickable" data-queue="${esc(x.name)}"><td><b>${esc(x.name)}</b></td><td class="num" data-depth="${esc(x.name)}">${fmt(x.ready)}</td><td class="num">${fmt(x.delayed)}</td><td class="num">${fmt(x.in_flight)}</td>
      <td class="num">${fmt(x.rate_in)}</td><td class="num">${fmt(x.rate_out)}</td><td class="num">${x.oldest_age_secs == null ? "" : fmt(x.oldest_age_secs) + " s"}</td>
      <td>${x.max_deliveries ? `max ${x.max_deliveries} deliveries ` : ""}${x.dead_letter_queue ? `<span class="pill dl">DLQ ${esc(x.dead_letter_queue)}</span> ` : ""}${x.expiry_queue ? `<span class="pill">expiry ${esc(x.expiry_queue)}</span>` : ""}</td></tr>`).join("");
  if (state.queue) await queueDetail(false);
}

async function queueDetail(browse) {
  const name = state.queue, el = $("#queue-detail");
  let d;
  try { d = await api("GET", `/api/queues/${encodeURIComponent(name)}`); } catch (e) { el.hidden = true; state.queue = null; return; }
  const isDlq = d.used_by.some((u) => u.as === "dead-letter");
  if (!el.dataset.queue || el.dataset.queue !== name) {
    el.dataset.queue = name;
    el.innerHTML = `<div class="detail-head"><h2>${esc(name)}</h2><span id="qd-figures" class="muted"></span>
      <div class="actions">${isDlq ? `<button id="qd-redrive">Redrive all to origin</button>` : ""}<button class="secondary" id="qd-purge">Purge</button><button class="danger" id="qd-delete">Delete</button></div></div>
      <div class="grid2">
        <form id="qd-settings" class="inline"><b>Settings</b>
          <label class="field"><span>max deliveries</span><input name="max_deliveries" type="number" min="0" placeholder="0: unlimited" size="8"></label>
          <label class="field"><span>dead-letter queue</span><input name="dead_letter_queue" placeholder="none"></label>
          <label class="field"><span>expiry queue</span><input name="expiry_queue" placeholder="none"></label>
          <button type="submit" class="secondary">Save</button></form>
        <form id="qd-send" class="inline"><b>Send</b><input name="body" placeholder="message body" required>
          <select name="priority">${[10,9,8,7,6,5,4,3,2,1].map((p) => `<option ${p === 5 ? "selected" : ""}>${p}</option>`).join("")}</select>
          <button type="submit">Send</button></form>
      </div>
      <h3 style="margin-top:14px">Messages <small>browse without consuming</small></h3>
      <form id="qd-browse" class="inline"><select name="order"><option value="priority">priority order</option><option value="time">time order</option></select>
        <input name="selector" placeholder="selector, e.g. priority > 5" size="28">
        <select name="body"><option>text</option><option>json</option><option>hex</option></select>
        <button type="submit" class="secondary">Browse</button><button type="button" class="secondary" id="qd-next" disabled>Next page</button></form>
      <table id="qd-messages"></table>`;
    const s = $("#qd-settings", el);
    s.max_deliveries.value = d.max_deliveries; s.dead_letter_queue.value = d.dead_letter_queue ?? ""; s.expiry_queue.value = d.expiry_queue ?? "";
    browse = true;
  }
  $("#qd-figures", el).textContent = `${fmt(d.ready)} ready · ${fmt(d.delayed)} delayed · ${fmt(d.in_flight)} in flight · ${d.consumers.length} consumers` + (d.used_by.length ? ` · dead-letter queue of ${d.used_by.map((u) => u.queue).join(", ")}` : "");
  el.hidden = false;
  if (browse) { state.browse = { cursor: null, stack: [] }; await browsePage(); }
}

async function browsePage() {
  const f = $("#qd-browse"), name = state.queue;
  const p = new URLSearchParams({ order: f.order.value, body: f.body.value, limit: "50" });
  if (f.selector.value.trim()) p.set("selector", f.selector.value);
  if (state.browse.cursor) p.set("cursor", state.browse.cursor);
  const page = await api("GET", `/api/queues/${encodeURIComponent(name)}/messages?${p}`);
  state.browse.next = page.next;
  $("#qd-next").disabled = !page.next;
  const dl = page.messages.some((m) => m.properties.ferry_original_queue);
  $("#qd-messages").innerHTML = `<tr><th class="num">Id</th><th>Sender</th><th>To</th><th class="num">Prio</th><th>Created</th><th class="num">Deliveries</th><th>Properties</th><th>Body</th><th></th></tr>` +
    (page.messages.length ? page.messages.map((m) => `<tr data-message="${m.id}"><td class="num">${m.id}</td><td>${esc(m.sender)}</td><td>${esc(m.receiver ?? "")}</td><td class="num">${m.priority}</td>
      <td>${new Date(m.created_at).toLocaleTimeString()}</td><td class="num">${m.delivery_count}</td>
      <td>${Object.entries(m.properties).map(([k, v]) => `${esc(k)}=${esc(v)}`).join("<br>")}</td>
      <td><pre class="body">${esc(typeof m.body === "string" ? m.body : JSON.stringify(m.body, null, 1))}</pre></td>
      <td>${m.properties.ferry_original_queue ? `<button data-redrive="${m.id}">Redrive</button> ` : ""}<button class="secondary" data-delete-message="${m.id}">Delete</button></td></tr>`).join("")
      : `<tr><td colspan="9" class="muted">No ready messages${dl ? "" : ""}.</td></tr>`);
}

async function topics() {
  const t = await api("GET", "/api/topics");
  $("#topics-table").innerHTML = `<tr><th>Topic</th><th>Subscription</th><th>Kind</th><th class="num">Ready</th><th class="num">In flight</th><th class="num">Consumers</th><th>Selector</th><th></th></tr>` +
    t.topics.map((x) => (x.subscriptions.length ? x.subscriptions : [null]).map((s, i) => `<tr><td>${i ? "" : `<b>${esc(x.name)}</b>`}</td>
      <td>${s ? esc(s.name) : '<span class="muted">no subscriptions</span>'}</td><td>${s ? (s.durable ? "durable" : "non-durable") + (s.shared ? ", shared" : "") : ""}</td>
      <td class="num">${s ? fmt(s.ready) : ""}</td><td class="num">${s ? fmt(s.in_flight) : ""}</td><td class="num">${s ? s.consumers : ""}</td><td>${s ? esc(s.selector) : ""}</td>
      <td>${s && s.durable ? `<button class="secondary" data-unsubscribe="${esc(x.name)}/${esc(s.name)}">Delete</button>` : ""}</td></tr>`).join("")).join("");
}

async function refresh() {
  try {
    await overview();
    if (state.page === "clients") await clients();
    if (state.page === "queues") await queues();
    if (state.page === "topics") await topics();
  } catch (e) { $("#node").textContent = "broker unreachable: " + e.message; }
}

function show(page) {
  state.page = page;
  document.querySelectorAll(".page").forEach((p) => p.classList.toggle("active", p.id === "page-" + page));
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === page));
  refresh();
}

document.addEventListener("click", (ev) => {
  const t = ev.target, q = state.queue && encodeURIComponent(state.queue);
  if (t.dataset.disconnect) return act(() => api("POST", `/api/clients/${encodeURIComponent(t.dataset.disconnect)}/disconnect`), `disconnected ${t.dataset.disconnect}`);
  if (t.dataset.redrive) return act(() => api("POST", `/api/queues/${q}/move`, { to_origin: true, ids: [Number(t.dataset.redrive)] }).then(() => browsePage()), "redriven");
  if (t.dataset.deleteMessage) return act(() => api("DELETE", `/api/queues/${q}/messages/${t.dataset.deleteMessage}`).then(() => browsePage()), "deleted");
  if (t.dataset.unsubscribe) { const [tp, s] = t.dataset.unsubscribe.split("/"); return act(() => api("DELETE", `/api/topics/${encodeURIComponent(tp)}/subscriptions/${encodeURIComponent(s)}`), "subscription deleted"); }
  if (t.id === "qd-purge" && confirm(`Purge every ready message of ${state.queue}?`)) return act(() => api("POST", `/api/queues/${q}/purge`).then(() => browsePage()), "purged");
  if (t.id === "qd-delete" && confirm(`Delete queue ${state.queue}?`)) return act(async () => { await api("DELETE", `/api/queues/${q}?force=true`); state.queue = null; $("#queue-detail").hidden = true; $("#queue-detail").dataset.queue = ""; }, "queue deleted");
  if (t.id === "qd-redrive") return act(() => api("POST", `/api/queues/${q}/move`, { to_origin: true, limit: 100000 }).then((r) => { toast(`redriven ${r.moved.length}, skipped ${r.skipped.length}`); return browsePage(); }));
  if (t.id === "qd-next") { state.browse.cursor = state.browse.next; return browsePage().catch((e) => toast(e.message, true)); }
  const row = t.closest("tr[data-queue]");
  if (row) { state.queue = row.dataset.queue; $("#queue-detail").dataset.queue = ""; queueDetail(true); }
});
document.addEventListener("submit", (ev) => {
  ev.preventDefault();
  const f = ev.target, q = state.queue && encodeURIComponent(state.queue);
  if (f.id === "create-queue") {
    const body = {}; if (f.max_deliveries.value) body.max_deliveries = Number(f.max_deliveries.value); if (f.dead_letter_queue.value) body.dead_letter_queue = f.dead_letter_queue.value;
    return act(() => api("PUT", `/api/queues/${encodeURIComponent(f.name.value)}`, body).then(() => f.reset()), "queue created");
  }
  if (f.id === "create-topic") return act(() => api("PUT", `/api/topics/${encodeURIComponent(f.name.value)}`).then(() => f.reset()), "topic created");
  if (f.id === "qd-settings") return act(() => api("PATCH", `/api/queues/${q}`, { max_deliveries: Number(f.max_deliveries.value || 0), dead_letter_queue: f.dead_letter_queue.value, expiry_queue: f.expiry_queue.value }), "settings saved");
  if (f.id === "qd-send") return act(() => api("POST", `/api/queues/${q}/messages`, { body: f.body.value, priority: Number(f.priority.value) }).then(() => { f.body.value = ""; return browsePage(); }), "sent");
  if (f.id === "qd-browse") { state.browse = { cursor: null, stack: [] }; return browsePage().catch((e) => toast(e.message, true)); }
});
window.addEventListener("hashchange", () => show(location.hash.slice(1) || "overview"));
show(location.hash.slice(1) || "overview");
setInterval(refresh, 2000);
