// capacity-launcher's web view: polls /api/view and fills the page's tables in place.
// Every value is written with textContent, never parsed as markup: names come from users.
"use strict";

const VIEW_URL = "/api/view";
const STATUSES = ["Fulfilled", "PartiallyFulfilled", "Failed", "Rejected", "Waiting"];
let refreshSeconds = 2;

function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined && text !== null) made.textContent = String(text);
  if (className) made.className = className;
  return made;
}

function cell(row, field, text, className) {
  const td = element("td", text === null || text === undefined ? "-" : text, className);
  td.dataset.field = field;
  row.appendChild(td);
  return td;
}

// Replace a table body's rows: one per item (`fill(row, item)`), or one "none" row.
function rows(id, items, key, fill) {
  const body = document.getElementById(id);
  const fresh = [];
  for (const item of items) {
    const row = document.createElement("tr");
    row.dataset.key = key(item);
    fill(row, item);
    fresh.push(row);
  }
  if (fresh.length === 0) {
    const row = document.createElement("tr");
    const td = element("td", "none", "none");
    td.colSpan = body.closest("table").tHead.rows[0].cells.length;
    row.appendChild(td);
    fresh.push(row);
  }
  body.replaceChildren(...fresh);
}

function condition(found) {
  if (!found) return ["-", ""];
  return found.status ? ["True", "yes"] : [`False (${found.reason})`, "no"];
}

function statusClass(status) {
  return STATUSES.includes(status) ? status : "";
}

function shortTime(iso) {
  return iso ? iso.replace("T", " ").slice(0, 19) : "-";
}

function renderPools(pools) {
  rows("pools", pools, (p) => p.name, (row, pool) => {
    cell(row, "name", pool.name);
    const used = cell(row, "usage", "");
    for (const r of pool.resources) {
      const line = element("div", `${r.name} ${r.used} / ${r.limit === null ? "∞" : r.limit}`);
      line.dataset.resource = r.name;
      if (r.fraction !== null) {
        const meter = element("meter");
        meter.min = 0;
        meter.max = 1;
        meter.high = 0.9;
        meter.value = Math.min(r.fraction, 1);
        line.appendChild(meter);
      }
      used.appendChild(line);
    }
    if (pool.resources.length === 0) used.textContent = "nothing used, no limits";
    if (pool.unready) used.appendChild(element("div", `unready ${pool.unready}`));
    cell(row, "inFlight", pool.inFlight);
    const [ready, readyClass] = condition(pool.ready);
    cell(row, "ready", ready, readyClass).title = pool.ready ? pool.ready.message : "";
    const [sufficient, sufficientClass] = condition(pool.sufficient);
    cell(row, "sufficient", sufficient, sufficientClass).title =
      pool.sufficient ? pool.sufficient.message : "";
  });
}

function requestCells(row, r) {
  cell(row, "requestId", r.requestId);
  cell(row, "pool", r.pool);
  cell(row, "requester", r.requester);
}

function renderRequests(requests) {
  const counts = Object.entries(requests.counts)
    .map(([status, n]) => `${n} ${status}`)
    .join(", ");
  document.getElementById("request-counts").textContent =
    `Newest ${requests.countedOf}: ${counts || "none"}; ` +
    `${requests.launching.length} launching now, ${requests.waiting.length} waiting`;
  rows("launching", requests.launching, (l) => l.lease, (row, l) => {
    cell(row, "lease", l.lease);
    cell(row, "pool", l.pool);
    cell(row, "requester", l.requester);
    cell(row, "upTo", l.upTo);
    cell(row, "leaseEndsIn", l.leaseEndsIn);
  });
  rows("waiting", requests.waiting, (r) => r.requestId, (row, r) => {
    requestCells(row, r);
    cell(row, "launched", `${r.launched}/${r.requested}`);
    cell(row, "waitingFor", r.waitingFor.map((w) => w.named).join(", "));
    cell(row, "waitEndsIn", r.waitEndsIn);
  });
  rows("recent", requests.recent, (r) => r.requestId, (row, r) => {
    requestCells(row, r);
    cell(row, "status", r.status, statusClass(r.status));
    cell(row, "launched", `${r.launched}/${r.requested}`);
    cell(row, "receivedAt", shortTime(r.receivedAt));
    cell(row, "finishedAt", shortTime(r.finishedAt));
  });
  document.getElementById("failures-title").textContent =
    `Recent failures (${requests.failuresOf} of the newest ${requests.countedOf})`;
  rows("failures", requests.failures, (r) => r.requestId, (row, r) => {
    requestCells(row, r);
    cell(row, "status", r.status, statusClass(r.status));
    cell(row, "finishedAt", shortTime(r.finishedAt));
    const list = element("ul", null, "reasons");
    for (const reason of r.reasons) list.appendChild(element("li", `${reason.code}: ${reason.message}`));
    cell(row, "reasons", "").appendChild(list);
  });
}

function renderReservations(reservations) {
  rows("reservations", reservations, (r) => r.id, (row, r) => {
    cell(row, "id", r.id);
    cell(row, "instanceType", r.instanceType);
    cell(row, "zone", r.zone);
    cell(row, "kind", r.kind);
    cell(row, "state", r.exhausted ? `${r.state} exhausted` : r.state);
    cell(row, "used", `${r.used}/${r.total}`);
    cell(row, "free", r.free);
    cell(row, "idle", r.idle);
    cell(row, "timeLeft", r.timeLeft);
  });
}

function renderIce(entries) {
  rows("ice", entries, (e) => e.offering, (row, e) => {
    cell(row, "offering", e.offering);
    cell(row, "reason", e.reason);
    cell(row, "message", e.message);
    cell(row, "cachedAt", e.cachedAt);
    cell(row, "clearsIn", e.clearsIn);
  });
}

function render(view) {
  refreshSeconds = view.refreshSeconds || refreshSeconds;
  document.getElementById("where").textContent = view.where;
  document.getElementById("observed").textContent = `observed ${shortTime(view.observedAt)} UTC`;
  renderPools(view.pools);
  renderRequests(view.requests);
  renderReservations(view.reservations);
  renderIce(view.iceCache);
}

function showState(ok, message) {
  const state = document.getElementById("state");
  state.textContent = ok ? `live, every ${refreshSeconds}s` : "stale";
  state.className = ok ? "state live" : "state stale";
  const error = document.getElementById("error");
  error.hidden = ok;
  error.textContent = ok ? "" : message;
}

async function poll() {
  try {
    const answer = await fetch(VIEW_URL, { cache: "no-store" });
    const view = await answer.json();
    if (!answer.ok) throw new Error(view.error || `HTTP ${answer.status}`);
    render(view);
    document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
    showState(true, "");
  } catch (error) {
    showState(false, `could not read the view (the page keeps trying): ${error.message}`);
  } finally {
    setTimeout(poll, refreshSeconds * 1000);
  }
}

poll();
