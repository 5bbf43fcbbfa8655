// The operator's dashboard: reads the worker's JSON API every few seconds and draws with plain DOM and
// SVG (no library, nothing fetched from elsewhere: these clusters are often offline). A token for
// CNSCHED_API_READ_NEEDS_TOKEN can be given as /ui#token=... (and a path and site to show first, below).
"use strict";

const REFRESH_MS = 3000;
// #token=...: a read token; #src=A&dst=B: the path whose history is shown first; #site=S: the site sized
const hash = Object.fromEntries(location.hash.slice(1).split("&").filter(Boolean)
  .map((kv) => kv.split("=").map(decodeURIComponent)));
const token = hash.token;
const state = { grain: "node", selected: hash.src && hash.dst ? { src: hash.src, dst: hash.dst } : null,
  site: hash.site || null, sites: [], down: new Set(), status: "", team: "" };

async function api(path) {
  const r = await fetch(path, { headers: token ? { Authorization: "Bearer " + token } : {} });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return { status: r.status, body };
}

// an operator's command on a task (cancel, hold, release): a write, so it needs a write token when the
// worker has tokens (#token=...); without tokens it is accepted from this machine only
async function command(taskId, action) {
  const path = action === "cancel" ? `/tasks/${encodeURIComponent(taskId)}` : `/tasks/${encodeURIComponent(taskId)}/${action}`;
  const headers = { "Content-Type": "application/json", ...(token ? { Authorization: "Bearer " + token } : {}) };
  const r = await fetch(path, { method: action === "cancel" ? "DELETE" : "POST", headers,
    body: JSON.stringify(token ? {} : { by: "dashboard" }) });  // with a token, the token's name is who asks
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  const note = document.getElementById("command-note");
  if (note) note.textContent = r.status < 300 ? `${action} ${taskId}: ${body?.status || "sent"}`
    : `${action} ${taskId}: HTTP ${r.status} ${body?.detail || body?.error || ""}`;
  refresh();
}

function actions(rec) {
  const id = rec.task.id, out = [];
  const button = (action) => el("button", { type: "button", "data-action": action, onclick: () => command(id, action) },
    action);
  if (!["finished", "failed", "expired", "rejected", "cancelled"].includes(rec.status) && !rec.task.scaling) {
    if (rec.status === "queued") out.push(button("hold"));
    if (rec.status === "held") out.push(button("release"));
    out.push(button("cancel"));
  }
  return out;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) e.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
  return e;
}

function svg(tag, attrs, ...children) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children.flat(Infinity)) e.append(c instanceof Node ? c : document.createTextNode(c));
  return e;
}

const num = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(d));
const clock = (t) => (t ? new Date(t * 1000).toLocaleTimeString([], { hour12: false }) : "–");
const since = (t) => (t ? Math.max(0, Date.now() / 1000 - t) : null);
const tag = (s) => el("span", { class: "tag " + s }, s);

// quality 0..100 -> red .. amber .. green
function qualityColour(q) {
  if (q === null || q === undefined) return null;
  const h = Math.max(0, Math.min(120, q * 1.2));
  return `hsl(${h.toFixed(0)}, 65%, ${q < 50 ? 62 : 70}%)`;
}

function table(head, rows) {
  return el("table", {}, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
}

function replace(id, ...children) {
  const node = document.getElementById(id);
  node.replaceChildren(...children);
}

// ---- sites and nodes -------------------------------------------------------------------------

function siteOf(c) { return [c.report.region, c.report.zone].filter(Boolean).join(" / ") || "–"; }

function renderSites(compute) {
  const items = compute.items.slice().sort((a, b) => siteOf(a).localeCompare(siteOf(b)) || a.node.localeCompare(b.node));
  const rows = items.map((c) => el("tr", { "data-node": c.node },
    el("td", {}, siteOf(c)), el("td", {}, c.node), el("td", {}, c.class),
    el("td", { class: "num" }, num(c.cards ?? c.report.cards, 0)),
    el("td", { class: "num" }, num(c.cards_booked, 0)),
    el("td", { class: "num" }, num(c.cards_reported_free ?? c.report.free?.cards, 0)),
    el("td", { class: "num" }, num(c.cards_free, 0)),
    el("td", { class: ((c.state || (c.available ? "up" : "down")) === "up" ? "ok" : "bad") + " wrap", title: c.state_reason || "" },
      c.state || (c.available ? "up" : "down"), c.state_reason ? el("span", { class: "muted" }, " — " + c.state_reason) : ""),
    el("td", { class: "num" }, num(c.compute_score.training)),
    el("td", { class: "num" }, num(c.compute_score.inference)),
    el("td", { class: "num" }, num(c.age_s, 0) + " s")));
  replace("sites", table(["site", "node", "class", "cards", "booked", "reported free", "free to place", "state",
    "training", "inference", "report age"], rows));
  state.sites = [...new Set(compute.items.map((c) => c.report.zone).filter(Boolean))].sort();
  state.down = new Set(compute.items.filter((c) => (c.state || (c.available ? "up" : "down")) === "down").map((c) => c.node));
  state.siteOfNode = Object.fromEntries(compute.items.map((c) => [c.node, c.report.zone || c.node]));
}

// ---- path-quality heatmap ---------------------------------------------------------------------

function pathCells(paths) {
  if (state.grain === "node") return paths.map((p) => ({ src: p.src, dst: p.dst, path: p, quality: p.quality }));
  const worst = {};
  for (const p of paths) {
    const s = state.siteOfNode?.[p.src] || p.src, d = state.siteOfNode?.[p.dst] || p.dst;
    const k = s + "\u0000" + d;
    if (!worst[k] || (p.quality ?? 101) < (worst[k].quality ?? 101)) worst[k] = { src: s, dst: d, path: p, quality: p.quality };
  }
  return Object.values(worst);
}

function renderHeatmap(paths) {
  const cells = pathCells(paths);
  const names = [...new Set(cells.flatMap((c) => [c.src, c.dst]))].sort();
  const at = Object.fromEntries(cells.map((c) => [c.src + "\u0000" + c.dst, c]));
  // a down node's row and column are greyed: its last windows say nothing about now
  const rows = names.map((s) => el("tr", {}, el("th", { class: state.down.has(s) ? "bad" : "" },
    s + (state.down.has(s) ? " (down)" : "")), names.map((d) => {
    const c = at[s + "\u0000" + d];
    if (!c) return el("td", { class: "none" }, s === d ? "" : "·");
    if (state.down.has(s) || state.down.has(d)) return el("td", { class: "none down", title: `${s} → ${d}: a node is down` }, "down");
    const p = c.path, rtt = p.inputs?.p95_rtt_ms ?? p.metrics.rtt_ms?.p95, loss = p.inputs?.loss;
    const sel = state.selected && state.selected.src === p.src && state.selected.dst === p.dst;
    return el("td", {
      class: sel ? "selected" : "", style: `background:${qualityColour(c.quality) || "#eceff1"}`,
      title: `${p.src} → ${p.dst}: quality ${num(c.quality)}, p95 RTT ${num(rtt, 2)} ms, loss ${num((loss ?? 0) * 100, 2)} %`,
      "data-src": p.src, "data-dst": p.dst, "data-quality": num(c.quality),
      onclick: () => { state.selected = { src: p.src, dst: p.dst }; renderHistory(); },
    }, num(c.quality, 0), el("br"), rtt === undefined ? "" : num(rtt, 1) + " ms",
    loss > 0 ? [el("br"), num(loss * 100, 1) + " % lost"] : []);
  })));
  replace("heatmap", names.length ? el("table", { class: "heat" },
    el("thead", {}, el("tr", {}, el("th", {}, "src \\ dst"), names.map((n) => el("th", {}, n)))),
    el("tbody", {}, rows)) : el("p", { class: "muted" }, "no path windows yet"));
  if (!state.selected && paths.length) {
    const worst = paths.filter((p) => p.quality !== null).sort((a, b) => a.quality - b.quality)[0] || paths[0];
    state.selected = { src: worst.src, dst: worst.dst };
  }
}

// ---- tasks, decisions, reschedules ------------------------------------------------------------

function lastDecision(rec) {
  for (let i = rec.history.length - 1; i >= 0; i--) if (rec.history[i].decision) return rec.history[i].decision;
  return null;
}

function breakdown(rec) {
  const d = lastDecision(rec);
  const node = rec.nodes[0] || d?.nodes?.[0];
  const c = d?.candidates?.find((x) => x.node === node) || d?.candidates?.[0];
  return c || {};
}

function renderTasks(tasks, estimates) {
  const rows = tasks.items.map((rec) => {
    const t = rec.task, b = breakdown(rec), d = lastDecision(rec);
    const started = rec.running?.placed_at;
    const waiting = rec.status === "queued" || rec.status === "held";
    const wait = started && t.submitted_at ? started - t.submitted_at : (waiting ? since(t.submitted_at) : null);
    const est = estimates[t.id] || rec.estimate;
    return el("tr", { "data-task": t.id },
      el("td", {}, t.id), el("td", {}, t.type), el("td", {}, t.team || ""), el("td", {}, tag(rec.status)),
      el("td", { class: "wrap" }, rec.nodes.join(", ")),
      el("td", { class: "num", title: "compute / network / energy / data load" }, num(b.composite),
        el("span", { class: "muted" }, ` (${num(b.compute_score, 0)}/${num(b.network_score, 0)}/${num(b.energy_score, 0)}/${num(b.load_score, 0)})`)),
      el("td", { class: "num" }, num(d?.alpha, 2)),
      el("td", { class: "num" }, wait === null ? "–" : num(wait, 0) + " s"),
      el("td", {}, est?.start ? clock(est.start) : (waiting ? "unknown" : "")),
      el("td", { class: "wrap" }, est?.reason ? `${est.reason}: ${est.basis}` : ""),
      el("td", { class: "actions" }, actions(rec)));
  });
  replace("tasks", rows.length ? table(["task", "type", "team", "status", "nodes", "score (c/n/e/d)", "alpha", "wait",
    "est. start", "waiting for", ""], rows)
    : el("p", { class: "muted" }, "no tasks match"));
}

function eventsOf(tasks) {
  const out = [];
  for (const rec of tasks.items) {
    for (const h of rec.history) {
      if (h.decision) {
        const d = h.decision;
        const why = d.status === "placed" ? `→ ${d.nodes.join(", ")} (alpha ${num(d.alpha, 2)}, ${d.network_profile})`
          : d.status === "preempted" ? `preempted for ${d.preempted_by || "?"}`
          : d.status === "scaled" && d.scaling ? `${d.scaling.from_replicas} → ${d.scaling.to_replicas} replicas (${d.scaling.reason})`
          : Object.entries(d.rejected_counts || {}).map(([r, n]) => `${r} ×${n}`).join(", ") || d.status;
        out.push({ t: d.decided_at, kind: d.status, text: `${d.task_id} ${why}` });
      } else if (h.reschedule) {
        const r = h.reschedule;
        out.push({ t: r.at, kind: "reschedule", text: `${r.task_id} ${r.from_nodes.join(",")} → ${r.to_nodes.join(",")}: ${r.trigger}, gain ${num(r.expected_gain_s, 0)} s for a ${num(r.migration_cost_s, 0)} s move` });
      }
    }
  }
  return out.sort((a, b) => b.t - a.t).slice(0, 25);
}

function renderEvents(tasks) {
  const items = eventsOf(tasks).map((e) => el("li", {}, el("span", { class: "t" }, clock(e.t)), tag(e.kind), " ", e.text));
  replace("events", ...(items.length ? items : [el("li", { class: "muted" }, "nothing decided yet")]));
}

function renderSummary(s, paths, incidents, health) {
  const n = s.nodes || {}, total = Object.values(n).reduce((a, v) => a + v, 0);
  const tasks = Object.entries(s.tasks || {}).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${v} ${k}`).join(", ");
  replace("summary",
    el("span", {}, `${n.up || 0} of ${total} nodes up` + ["cordoned", "draining", "down"].filter((k) => n[k])
      .map((k) => `, ${n[k]} ${k}`).join("")),
    el("span", {}, `${s.cards_booked} of ${s.cards_up} cards booked (${s.cards_free} free)`),
    el("span", {}, `${paths.status === 200 ? paths.body.total : "–"} paths`),
    el("span", {}, tasks || "no tasks"),
    el("span", {}, `${incidents.status === 200 ? incidents.body.open.length : "–"} open incidents`),
    el("span", { class: health.status === 200 ? "ok" : "bad" }, health.status === 200 ? "worker ready" : "worker not ready"));
  const rows = (s.queues || []).map((q) => el("tr", {}, el("td", {}, q.team), el("td", {}, q.accel_class),
    el("td", { class: "num" }, num(q.queued, 0)), el("td", { class: "num" }, num(q.queued_cards, 0)),
    el("td", { class: "num" }, num(q.running, 0)), el("td", { class: "num" }, num(q.running_cards, 0))));
  replace("queues", rows.length ? table(["team", "class", "queued", "cards asked", "running", "cards held"], rows)
    : el("p", { class: "muted" }, "nothing queued or running"));
}

function renderIncidents(incidents) {
  const rows = incidents.open.map((i) => el("tr", {}, el("td", {}, i.node), el("td", {}, tag(i.status)),
    el("td", {}, i.cause), el("td", {}, clock(i.detected_at)), el("td", {}, i.tasks.join(", ")),
    el("td", { class: "num" }, num(i.work_lost_s, 0) + " s")));
  replace("incidents", rows.length ? table(["node", "status", "cause", "detected", "tasks", "work lost"], rows)
    : el("p", { class: "muted" }, "no open incidents"));
}

// ---- a path's history with its forecast band --------------------------------------------------

function chart(history, points, unit) {
  const W = 900, H = 240, L = 56, R = 10, T = 10, B = 26;
  const all = history.concat(points);
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t));
  const ys = history.map((p) => p.value).concat(points.flatMap((p) => [p.value, p.upper ?? p.value]));
  let y0 = Math.min(...ys), y1 = Math.max(...ys);
  if (y1 - y0 < 1e-9) { y0 -= 1; y1 += 1; }
  const x = (t) => L + ((t - t0) / Math.max(t1 - t0, 1)) * (W - L - R);
  const y = (v) => T + (1 - (v - y0) / (y1 - y0)) * (H - T - B);
  const line = (ps, key) => ps.map((p, i) => `${i ? "L" : "M"}${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join("");
  const band = points.length ? line(points, "value") + points.slice().reverse().map((p) => `L${x(p.t).toFixed(1)},${y(p.upper ?? p.value).toFixed(1)}`).join("") + "Z" : "";
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => y0 + f * (y1 - y0));
  return svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" },
    ticks.map((v) => [svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eceff1" }),
      svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, num(v, 2))]),
    svg("text", { x: L, y: H - 6 }, clock(t0)), svg("text", { x: W - R, y: H - 6, "text-anchor": "end" }, clock(t1)),
    svg("text", { x: 4, y: 12 }, unit),
    band ? svg("path", { d: band, fill: "#90caf9", "fill-opacity": 0.35, stroke: "none", class: "band" }) : [],
    history.length ? svg("path", { d: line(history, "value"), fill: "none", stroke: "#37474f", "stroke-width": 1.5, class: "history" }) : [],
    points.length ? svg("path", { d: line(points, "value"), fill: "none", stroke: "#1565c0", "stroke-width": 1.5, "stroke-dasharray": "4 3", class: "forecast" }) : []);
}

async function renderHistory() {
  const s = state.selected;
  if (!s) { replace("history", el("p", { class: "muted" }, "select a path in the heatmap")); return; }
  document.getElementById("history-path").textContent = `${s.src} → ${s.dst}, p95 RTT`;
  const r = await api(`/forecast/paths/${encodeURIComponent(s.src)}/${encodeURIComponent(s.dst)}?metric=rtt_ms&stat=p95&horizon=60m&history=6h`);
  if (r.status !== 200) {
    const why = r.body?.error === "not enough history"
      ? `not enough history yet: ${r.body.have_steps} of ${r.body.needed_steps} steps` : (r.body?.error || `HTTP ${r.status}`);
    replace("history", el("p", { class: "muted" }, why));
    return;
  }
  const f = r.body;
  replace("history", chart(f.history || [], f.points, "ms"),
    el("p", { class: "muted" }, `solid: the last 6 h; dashed: forecast (p50), band up to p${Math.round((f.quantile || 0.9) * 100)}; `
      + (f.seasonal ? "with the daily profile" : "from the current level")));
}

// ---- battery sizing of a site -----------------------------------------------------------------

async function renderBattery() {
  const select = document.getElementById("battery-site");
  if (select.options.length !== state.sites.length) {
    select.replaceChildren(...state.sites.map((s) => el("option", { value: s }, s)));
    if (state.site) select.value = state.site;
  }
  state.site = select.value || state.sites[0];
  if (!state.site) { replace("battery", el("p", { class: "muted" }, "no sites known yet")); return; }
  const win = document.getElementById("battery-window").value;
  const r = await api(`/power/${encodeURIComponent(state.site)}/smoothing?window=${win}&interval=1min&period=1d`);
  if (r.status !== 200) {
    replace("battery", el("p", { class: "muted" }, r.status === 404 ? `no power history for ${state.site}` : (r.body?.error || `HTTP ${r.status}`)));
    return;
  }
  const b = r.body;
  replace("battery", table(["site", "battery power", "energy (recommended)", "largest discharge", "max ramp before → after",
    "smoother by", "minutes"], [el("tr", {},
    el("td", {}, b.site), el("td", { class: "num" }, num(b.power_capacity_mw) + " MW"),
    el("td", { class: "num" }, num(b.recommended_energy_kwh, 0) + " kWh"),
    el("td", { class: "num" }, num(b.discharge_energy_kwh, 0) + " kWh"),
    el("td", { class: "num" }, `${num(b.original_max_ramp_mw_per_min)} → ${num(b.smoothed_max_ramp_mw_per_min)} MW/min`),
    el("td", { class: "num" }, num(b.smoothing_rate_pct, 0) + " %"),
    el("td", { class: "num" }, num(b.samples, 0)))]));
}

// ---- refresh ----------------------------------------------------------------------------------

async function refresh() {
  const query = new URLSearchParams({ limit: "200", ...(state.status ? { status: state.status } : {}),
    ...(state.team ? { team: state.team } : {}) });
  const [compute, paths, tasks, incidents, health, summary] = await Promise.all([
    api("/compute/nodes?limit=1000"), api("/network/paths?limit=1000"), api("/tasks?" + query),
    api("/incidents"), api("/health"), api("/summary")]);
  if (compute.status === 200) renderSites(compute.body);
  if (paths.status === 200) renderHeatmap(paths.body.items);
  if (tasks.status === 200) {  // the list carries each live task's estimate and what a queued one waits for
    renderTasks(tasks.body, {});
    renderEvents(tasks.body);
  }
  if (incidents.status === 200) renderIncidents(incidents.body);
  if (summary.status === 200) renderSummary(summary.body, paths, incidents, health);  // totals from the server
  if (tasks.status === 200) document.getElementById("tasks-count").textContent =
    `(${tasks.body.items.length} of ${tasks.body.total} shown)`;
  await Promise.all([renderHistory(), renderBattery()]);
  document.getElementById("refreshed").textContent = "updated " + clock(Date.now() / 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  for (const r of document.querySelectorAll("input[name=grain]")) {
    r.addEventListener("change", () => { state.grain = r.value; refresh(); });
  }
  document.getElementById("battery-site").addEventListener("change", (e) => { state.site = e.target.value; renderBattery(); });
  document.getElementById("battery-window").addEventListener("change", () => renderBattery());
  document.getElementById("task-status").addEventListener("change", (e) => { state.status = e.target.value; refresh(); });
  document.getElementById("task-team").addEventListener("change", (e) => { state.team = e.target.value.trim(); refresh(); });
  refresh();
  setInterval(refresh, REFRESH_MS);
});
