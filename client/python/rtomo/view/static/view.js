// rtomo-view's page: polls api/state, fetches images as PNG, draws plots.
// Plain JavaScript, no library.  What the page shows is also written into
// data-* attributes (images: size, id, statistics of the decoded pixels;
// charts: number of points) so that a headless browser's DOM tells a test
// what a person would see.
"use strict";

const POLL_MS = 500;
const WINDOW_S = 120;            // seconds of history the plots show
const MAX_EVENTS = 300;
const ORDER = ["slice", "preview", "composite", "depth"];
const TITLES = {slice: "Slice", preview: "Preview (slice as it forms)",
                composite: "SBDX composite", depth: "SBDX depth map"};
const BAD_EVENTS = new Set(["rejected", "dropped", "error", "scan_aborted",
                            "missing_projections", "window_skipped"]);

const CHARTS = [
  {id: "ingest", title: "Ingest, frames/s", series: [["frames_per_s", "frames/s", "#37c"]],
   note: p => p && p.mb_per_s != null ? fmt(p.mb_per_s) + " MB/s" : ""},
  {id: "gu", title: "Reconstruction, GU/s", series: [["gu_per_s", "GU/s", "#2a7"]]},
  {id: "latency", title: "Latency, ms", series: [["latency_ms", "publish", "#c63"],
                                                 ["ready_ms", "engine", "#37c"]]},
  {id: "queues", title: "Queues", series: [["q_work", "work", "#37c"], ["q_frames", "frames", "#2a7"],
                                           ["q_windows", "windows", "#a6c"], ["q_publish", "publish", "#c63"]]},
  {id: "drops", title: "Rejects and drops, since start", series: [
    ["rejected", "rejected", "#c22"], ["dropped", "dropped", "#c63"],
    ["pub_dropped", "pub_dropped", "#a6c"], ["previews_dropped", "previews dropped", "#888"]]},
  {id: "view", title: "This view: images skipped, seq gaps", series: [
    ["skipped", "skipped", "#888"], ["lost", "seq gaps", "#c22"]]},
];

const S = {teleN: -1, evN: -1, tele: [], viewPts: [], cards: {}, polls: 0,
           planeCount: 0};
const $ = id => document.getElementById(id);

function fmt(v, digits) {
  if (v == null || v === "") return "–";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(digits || 3);
  return v.toPrecision(digits || 4).replace(/\.?0+$/, "");
}
function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  return e;
}

// -- contrast ------------------------------------------------------------
function contrastQuery() {
  const mode = $("c-mode").value;
  if (mode === "manual") return `mode=manual&lo=${+$("c-lo").value}&hi=${+$("c-hi").value}`;
  if (mode === "minmax") return "mode=minmax";
  return `mode=auto&plo=${+$("c-plo").value}&phi=${+$("c-phi").value}`;
}
function contrastChanged() {
  const mode = $("c-mode").value;
  $("c-auto").hidden = mode !== "auto";
  $("c-manual").hidden = mode !== "manual";
  for (const k in S.cards) S.cards[k].query = null;   // reload every image
  refreshImages();
}

// -- images --------------------------------------------------------------
function keyOrder(k) {
  const i = ORDER.indexOf(k);
  return i >= 0 ? i : 10 + parseInt(k.split("/")[1] || "0", 10);
}
function cardFor(key) {
  let c = S.cards[key];
  if (c) return c;
  const box = el("div", {class: "card" + (key === "slice" ? " main" : ""), id: "card-" + key.replace("/", "-")});
  const h = el("h3", {}, key.startsWith("plane/") ? "Plane " + key.split("/")[1] : (TITLES[key] || key));
  const canvas = el("canvas", {"data-key": key, width: 1, height: 1});
  const info = el("div", {class: "info"}, "");
  box.append(h, canvas, info);
  c = S.cards[key] = {key, box, h, canvas, info, id: 0, query: null, loading: false, meta: null};
  const cards = $("cards");
  const after = Object.keys(S.cards).filter(k => k !== key && keyOrder(k) > keyOrder(key))
    .sort((a, b) => keyOrder(a) - keyOrder(b))[0];
  cards.insertBefore(box, after ? S.cards[after].box : null);
  $("no-images").hidden = true;
  return c;
}

async function loadImage(c) {
  const query = contrastQuery();
  c.loading = true;
  try {
    const r = await fetch(`api/image?key=${encodeURIComponent(c.key)}&${query}`, {cache: "no-store"});
    if (!r.ok) return;
    const id = +r.headers.get("X-Rtomo-Id");
    const lo = +r.headers.get("X-Rtomo-Lo"), hi = +r.headers.get("X-Rtomo-Hi");
    const bmp = await createImageBitmap(await r.blob(),
                                        {colorSpaceConversion: "none", premultiplyAlpha: "none"});
    const cv = c.canvas;
    cv.width = bmp.width; cv.height = bmp.height;
    const ctx = cv.getContext("2d", {willReadFrequently: true});
    ctx.drawImage(bmp, 0, 0);
    // statistics of what is on the canvas: the grey levels after contrast
    const px = ctx.getImageData(0, 0, cv.width, cv.height).data;
    let sum = 0, mn = 255, mx = 0;
    for (let i = 0; i < px.length; i += 4) {
      const g = px[i]; sum += g; if (g < mn) mn = g; if (g > mx) mx = g;
    }
    const n = px.length / 4;
    const d = cv.dataset;
    d.id = id; d.width = cv.width; d.height = cv.height;
    d.sum = sum; d.mean = (sum / n).toFixed(4); d.min = mn; d.max = mx;
    d.lo = lo; d.hi = hi;
    c.id = id; c.query = query; c.lo = lo; c.hi = hi;
    const m = S.images && S.images[c.key];
    if (m && m.id === id) { c.meta = m; describe(c); }
  } catch (e) {
    c.info.textContent = "cannot show: " + e;
  } finally {
    c.loading = false;
  }
}

function describe(c) {
  const h = c.meta.header, d = c.canvas.dataset;
  if (c.key.startsWith("plane/"))
    c.h.textContent = h.ratio != null ? `SBDX plane ${h.plane} of ${h.count}` : `Plane ${h.plane} (any orientation)`;
  d.seq = h.seq; d.scan = h.scan; d.index = h.index; d.count = h.count;
  d.slice = h.slice; d.plane = h.plane; d.headerMin = h.min; d.headerMax = h.max; d.headerMean = h.mean;
  const age = S.now && c.meta.arrived ? (S.now - c.meta.arrived) : null;
  let where = `${h.scan}  ${h.index + 1}/${h.count}`;
  if (h.slice >= 0) where += `  row ${h.slice}`;
  if (h.plane >= 0) where += `  plane ${h.plane}` + (h.ratio != null ? ` ratio ${fmt(h.ratio)}` : "");
  if (h.frame >= 0) where += `  frame ${h.frame}`;
  if (h.projections != null) where += `  ${h.projections} proj.`;
  c.info.textContent =
    `${where}\n${h.width}×${h.height} ${h.dtype}  seq ${h.seq}` + (age != null ? `  ${fmt(age, 2)} s ago` : "") +
    `\nmin ${fmt(h.min)}  max ${fmt(h.max)}  mean ${fmt(h.mean)}` +
    `\nshown ${fmt(c.lo)} .. ${fmt(c.hi)}  latency ${fmt(h.latency_ms)} ms`;
}

function refreshImages() {
  if ($("c-pause").checked) return;
  for (const key of Object.keys(S.images || {})) {
    const m = S.images[key], c = cardFor(key);
    if (c.loading) continue;
    if (c.id !== m.id || c.query !== contrastQuery()) loadImage(c);
    else { c.meta = m; describe(c); }
  }
  for (const key of Object.keys(S.cards)) {
    if (!(key in (S.images || {}))) { S.cards[key].box.remove(); delete S.cards[key]; }
  }
  let planes = 0;
  for (const key in S.images || {}) if (key.startsWith("plane/")) planes = Math.max(planes, S.images[key].header.count);
  $("c-plane").hidden = planes <= 4;
  if (planes > 4 && $("c-planeno").value === "" && document.activeElement !== $("c-planeno")) {
    const kept = Object.keys(S.images).find(k => k.startsWith("plane/"));
    if (kept) { $("c-planeno").value = kept.split("/")[1]; $("c-planeno").max = planes - 1; }
  }
}

// -- scan progress and daemon --------------------------------------------
function showStatus(st) {
  const badge = $("daemon-state");
  if (st.status_error || !st.status) {
    badge.textContent = "no status"; badge.className = "badge down";
    $("conn").textContent = st.status_error || "";
  } else {
    badge.textContent = st.status.state; badge.className = "badge " + st.status.state;
    $("conn").textContent = "";
  }
  const s = st.status;
  document.body.dataset.state = s ? s.state : "unknown";
  if (!s) return;
  const scan = s.scan;
  const line = $("scan-line"), bar = $("scan-bar"), det = $("scan-detail");
  if (scan) {
    const exp = scan.expected;
    const frac = exp ? Math.min(1, scan.received / exp) : 0;
    line.textContent = `${scan.id} (${scan.kind}) ${scan.phase || s.state}: ` +
      (exp != null ? `${scan.received} of ${exp} projections` : `${scan.received} frames`) +
      (exp ? ` (${(100 * frac).toFixed(0)} %)` : "");
    bar.style.width = (100 * frac) + "%";
    let more = `darks ${fmt(scan.darks)}  flats ${fmt(scan.flats)}  missing ${fmt(scan.missing)}`;
    if (scan.mode) more += `  mode ${scan.mode}`;
    if (scan.resident) more += `  resident ${scan.resident.slices} of ${scan.resident.of} slices (${scan.resident.mode})`;
    if (scan.windows != null) more += `  windows ${scan.windows}, skipped ${scan.windows_skipped}, pending ${scan.windows_pending}`;
    det.textContent = more;
    line.dataset.received = scan.received; line.dataset.expected = exp;
  } else {
    line.textContent = "no scan acquiring"; bar.style.width = "0";
    det.textContent = S.lastOutcome || "";
  }
  const tb = $("scans").tBodies[0];
  tb.textContent = "";
  for (const x of s.scans || []) {
    const tr = el("tr");
    const res = x.resident ? `${x.resident.slices}/${x.resident.of} ${x.resident.mode}` : "";
    for (const v of [x.id, x.kind, x.phase || "", x.expected != null ? `${x.received}/${x.expected}` : x.received,
                     x.mode || "", res]) tr.append(el("td", {}, v));
    tb.append(tr);
  }
  const m = s.memory || {};
  const loads = (s.workers || []).map(w => (w.device >= 0 ? "gpu" + w.device : "cpu") + " " +
                                          (100 * (w.load || 0)).toFixed(0) + "%").join(", ");
  $("daemon-detail").textContent =
    `rtomod ${s.version} ${s.backend}, up ${fmt(s.uptime_s, 3)} s; workers ${loads}; ` +
    `host memory ${fmt(m.host_used_mb)} of ${fmt(m.host_budget_mb)} MB; ` +
    `accepted ${fmt(s.counters && s.counters.accepted)}, rejected ${fmt(s.counters && s.counters.rejected)}, ` +
    `published ${fmt(s.counters && s.counters.published)}`;
  const pd = $("n-pubdropped");
  pd.textContent = fmt(s.counters && s.counters.pub_dropped);
  pd.className = s.counters && s.counters.pub_dropped ? "bad" : "";
}

function showView(st) {
  const v = st.view;
  $("n-received").textContent = v.received_total;
  $("n-shown").textContent = v.shown_total;
  $("n-skipped").textContent = v.skipped_total;
  $("n-skipped").title = JSON.stringify(v.skipped);
  $("n-gaps").textContent = v.lost + (v.restarts ? ` (daemon restarted ${v.restarts}×)` : "");
  $("n-gaps").title = JSON.stringify(v.gaps);
  $("n-gaps").className = v.lost ? "bad" : "";
  const e = st.endpoints;
  if (e) $("endpoints").textContent = `publish ${e.publish.join(", ")}  control ${e.control}`;
  S.viewPts.push({time: st.time, skipped: v.skipped_total, lost: v.lost});
  if (S.viewPts.length > 2000) S.viewPts.splice(0, S.viewPts.length - 2000);
}

// -- events --------------------------------------------------------------
function showEvents(events) {
  const tb = $("event-log").tBodies[0];
  for (const e of events) {
    const t = e.time ? new Date(e.time * 1000).toISOString().substr(11, 12) : "";
    const tr = el("tr", {class: BAD_EVENTS.has(e.event) ? "bad" : (e.event === "scan_complete" ? "good" : "")});
    for (const v of [t, e.event, e.scan || "", e.index >= 0 ? e.index : "", e.reason, e.message])
      tr.append(el("td", {}, v));
    tb.insertBefore(tr, tb.firstChild);
    if (e.event === "scan_complete" || e.event === "scan_aborted")
      S.lastOutcome = `last: ${e.scan} ${e.event === "scan_complete" ? "complete" : "aborted"}` +
        (e.reason ? ` (${e.reason})` : "") + `: ${e.message}`;
  }
  while (tb.rows.length > MAX_EVENTS) tb.deleteRow(-1);
  $("n-events").textContent = `(${tb.rows.length} shown)`;
  $("event-log").dataset.rows = tb.rows.length;
}

// -- plots ---------------------------------------------------------------
function buildCharts() {
  for (const ch of CHARTS) {
    const box = el("div", {class: "chart"});
    const h = el("h3", {}, ch.title);
    const cv = el("canvas", {id: "chart-" + ch.id, "data-points": "0"});
    const leg = el("div", {class: "legend"});
    box.append(h, cv, leg);
    $("charts").append(box);
    ch.canvas = cv; ch.legend = leg; ch.head = h;
  }
}

function drawChart(ch, pts) {
  const cv = ch.canvas, dpr = window.devicePixelRatio || 1;
  const w = Math.max(200, cv.clientWidth), h = Math.max(60, cv.clientHeight);
  cv.width = w * dpr; cv.height = h * dpr;
  const ctx = cv.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  // the last WINDOW_S seconds, or less while there is less history
  const tEnd = pts.length ? pts[pts.length - 1].time : 0;
  const span = pts.length ? Math.min(WINDOW_S, Math.max(10, tEnd - pts[0].time)) : WINDOW_S;
  const tStart = tEnd - span;
  const shown = pts.filter(p => p.time >= tStart);
  let ymax = 0, n = 0;
  for (const p of shown) for (const [k] of ch.series) if (p[k] != null) { ymax = Math.max(ymax, p[k]); n++; }
  ymax = ymax > 0 ? ymax * 1.1 : 1;
  const L = 44, R = 6, T = 6, B = 14;
  ctx.strokeStyle = "#ccc"; ctx.lineWidth = 1;
  ctx.strokeRect(L, T, w - L - R, h - T - B);
  ctx.fillStyle = "#666"; ctx.font = "10px sans-serif";
  ctx.fillText(fmt(ymax, 3), 2, T + 8); ctx.fillText("0", 2, h - B);
  ctx.fillText(`−${fmt(span, 3)} s`, L, h - 2); ctx.fillText("now", w - R - 20, h - 2);
  const X = t => L + (w - L - R) * (t - tStart) / span;
  const Y = v => h - B - (h - T - B) * v / ymax;
  ch.legend.textContent = "";
  const last = shown[shown.length - 1];
  for (const [k, label, colour] of ch.series) {
    ctx.strokeStyle = colour; ctx.lineWidth = 1.5; ctx.beginPath();
    let started = false;
    for (const p of shown) {
      if (p[k] == null) continue;
      if (!started) { ctx.moveTo(X(p.time), Y(p[k])); started = true; } else ctx.lineTo(X(p.time), Y(p[k]));
    }
    ctx.stroke();
    const s = el("span", {}, `${label} ${fmt(last ? last[k] : null)}`);
    s.style.color = colour;
    ch.legend.append(s);
  }
  if (ch.note) ch.legend.append(el("span", {}, ch.note(last)));
  cv.dataset.points = shown.length;
  cv.dataset.values = n;
}

function drawCharts() {
  for (const ch of CHARTS) drawChart(ch, ch.id === "view" ? S.viewPts : S.tele);
  document.body.dataset.telemetry = S.tele.length;
}

// -- the loop ------------------------------------------------------------
async function poll() {
  try {
    const r = await fetch(`api/state?tele=${S.teleN}&ev=${S.evN}`, {cache: "no-store"});
    const st = await r.json();
    S.now = st.time;
    for (const p of st.tele) S.tele.push(p);
    if (S.tele.length > 5000) S.tele.splice(0, S.tele.length - 5000);
    if (st.tele.length) S.teleN = st.tele[st.tele.length - 1].n;
    if (st.events.length) S.evN = st.events[st.events.length - 1].n;
    S.images = st.images;
    showView(st);
    showEvents(st.events);
    showStatus(st);
    refreshImages();
    drawCharts();
    S.polls++;
    document.body.dataset.polls = S.polls;
    if (S.polls === 1) document.body.dataset.telemetryFirst = S.tele.length;
    document.body.dataset.images = Object.keys(st.images).sort().join(",");
  } catch (e) {
    $("daemon-state").textContent = "view down"; $("daemon-state").className = "badge down";
    $("conn").textContent = "rtomo-view does not answer: " + e;
  }
  setTimeout(poll, POLL_MS);
}

function init() {
  // ?mode=auto&plo=1&phi=99, ?mode=minmax, ?mode=manual&lo=0&hi=0.02:
  // the contrast to start with (a link to a given view)
  const q = new URLSearchParams(location.search);
  if (["auto", "minmax", "manual"].includes(q.get("mode"))) $("c-mode").value = q.get("mode");
  for (const k of ["plo", "phi", "lo", "hi"]) if (q.has(k)) $("c-" + k).value = q.get(k);
  $("c-auto").hidden = $("c-mode").value !== "auto";
  $("c-manual").hidden = $("c-mode").value !== "manual";
  buildCharts();
  for (const id of ["c-mode", "c-plo", "c-phi", "c-lo", "c-hi"]) $(id).addEventListener("change", contrastChanged);
  $("c-pause").addEventListener("change", refreshImages);
  $("c-planeno").addEventListener("change", () => {
    fetch(`api/plane?choose=${encodeURIComponent($("c-planeno").value)}`, {cache: "no-store"});
  });
  poll();
}
init();
