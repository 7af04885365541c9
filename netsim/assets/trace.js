// Replays a netsim trace: the graph with messages moving along their links, and the sequence
// diagram drawn as time advances. Plain JavaScript and SVG, no library, no network access.
// The data (netsim/viewer.py) is the JSON in #trace-data: nodes with positions, edges, kinds in
// protocol order with their colours, messages (kind, src, dst, sent, due, fate, corrupt, payload)
// and events [time, "send" | "deliver" | "drop", message] in the order they happened.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("trace-data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const M = D.messages, E = D.events, N = E.length;
  const $ = (id) => document.getElementById(id);

  function el(name, attrs, parent) {
    const node = document.createElementNS(NS, name);
    for (const key in attrs) node.setAttribute(key, attrs[key]);
    if (parent) parent.appendChild(node);
    return node;
  }
  const fmt = (t) => (Math.abs(t) >= 1000 ? t.toFixed(1) : t.toFixed(3).replace(/\.?0+$/, ""));
  const label = (n) => (D.servers.includes(n) ? "S" + n : String(n));
  const colour = (m) => (M[m].corrupt ? D.corrupt_colour : D.colours[M[m].kind]);

  // ---------------------------------------------------------------- time scale
  const delays = M.map((m) => m.due - m.sent).filter((d) => d > 0).sort((a, b) => a - b);
  const typical = delays.length ? delays[Math.floor(delays.length / 2)] : 1;   // median link delay
  const shortest = delays.length ? delays[Math.floor(0.05 * delays.length)] : 1;  // a short delay, not an outlier
  const tStart = (N ? E[0][0] : D.from) - 0.5 * typical;
  const tEnd = Math.max(N ? E[N - 1][0] : D.from, D.end) + 0.5 * typical;
  // messages sent and due at the same instant (zero delay) are staggered down by STAGGER px each,
  // in send order, so that a same-instant exchange still reads top to bottom
  const STAGGER = 5, lane = new Map(), perInstant = new Map();
  for (const [, , m] of E) {
    if (M[m].due === M[m].sent && !lane.has(m)) {
      const i = (perInstant.get(M[m].sent) || 0) + 1;
      perInstant.set(M[m].sent, i);
      lane.set(m, i);
    }
  }
  const times = [...new Set(E.map((e) => e[0]))].sort((a, b) => a - b);
  let room = 0;  // px per time unit that the most crowded instant needs before the next event
  for (let i = 0; i + 1 < times.length; i++) {
    const crowd = perInstant.get(times[i]);
    if (crowd) room = Math.max(room, ((crowd + 2) * STAGGER) / (times[i + 1] - times[i]));
  }
  let scale = Math.min(400, Math.max(4, 36 / shortest, room));                // px per time unit
  scale = Math.min(scale, 100000 / Math.max(tEnd - tStart, 1e-9));
  const fade = 1.5 * typical;                                                 // how long a drop's cross stays on the graph

  // ---------------------------------------------------------------- header, legend
  $("title").textContent = D.title;
  $("description").textContent = D.description;
  $("subtitle").textContent = D.subtitle;
  const legend = $("legend");
  function entry(text, draw) {
    const li = document.createElement("li");
    const icon = el("svg", { width: 28, height: 12 }, li);
    draw(icon);
    li.appendChild(document.createTextNode(text));
    legend.appendChild(li);
  }
  for (const kind of D.kinds) entry(kind, (s) => el("line", { x1: 2, y1: 6, x2: 26, y2: 6, stroke: D.colours[kind], "stroke-width": 2.5 }, s));
  if (M.some((m) => m.corrupt)) entry("corrupted", (s) => el("line", { x1: 2, y1: 6, x2: 26, y2: 6, stroke: D.corrupt_colour, "stroke-width": 2.5, "stroke-dasharray": "5 2" }, s));
  entry("dropped", (s) => cross(s, 14, 6, 4, "#000"));
  entry("in flight", (s) => el("circle", { cx: 14, cy: 6, r: 5, fill: "#888" }, s));

  function cross(parent, x, y, r, stroke) {
    return el("path", { d: `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`, stroke, "stroke-width": 2.2, fill: "none" }, parent);
  }

  // ---------------------------------------------------------------- graph
  const graph = $("graph");
  const G = 440, PAD = 30;
  const at = {};
  for (const n of D.nodes) at[n.id] = [PAD + n.x * (G - 2 * PAD), PAD + n.y * (G - 2 * PAD)];
  const edgeLayer = el("g", {}, graph);
  for (const [u, v] of D.edges) el("line", { x1: at[u][0], y1: at[u][1], x2: at[v][0], y2: at[v][1], stroke: "#bbb", "stroke-width": 1.5 }, edgeLayer);
  const nodeLayer = el("g", {}, graph);
  const radius = D.nodes.length > 40 ? 7 : 13;
  for (const n of D.nodes) {
    const g = el("g", { class: "node" }, nodeLayer);
    el("circle", { cx: at[n.id][0], cy: at[n.id][1], r: radius, fill: n.server ? "#f4a261" : "#8ecae6", stroke: "#456", "stroke-width": 1 }, g);
    if (radius > 8) el("text", { x: at[n.id][0], y: at[n.id][1] }, g).textContent = label(n.id);
    el("title", {}, g).textContent = (n.server ? "server " : "agent ") + n.id;
  }
  const flightLayer = el("g", {}, graph);
  const dropLayer = el("g", {}, graph);

  function along(m, f) {  // a point of the link src -> dst at fraction f, offset sideways by direction
    const [x0, y0] = at[M[m].src], [x1, y1] = at[M[m].dst];
    const len = Math.hypot(x1 - x0, y1 - y0) || 1, side = M[m].src < M[m].dst ? 4 : -4;
    return [x0 + f * (x1 - x0) - side * (y1 - y0) / len, y0 + f * (y1 - y0) + side * (x1 - x0) / len];
  }

  // ---------------------------------------------------------------- sequence diagram
  const lifelines = D.lifelines, col = {};
  const COL = lifelines.length > 30 ? 36 : 70, LEFT = 64, TOP = 8;
  lifelines.forEach((n, i) => { col[n] = LEFT + COL / 2 + i * COL; });
  const width = LEFT + COL * lifelines.length + 10;
  const height = TOP + (tEnd - tStart) * scale + 20;
  const ypos = (t) => TOP + (t - tStart) * scale;
  const ysent = (m) => ypos(M[m].sent) + (lane.get(m) || 0) * STAGGER;
  const ydue = (m) => ypos(M[m].due) + (lane.get(m) || 0) * STAGGER;
  const head = $("seqhead"), seq = $("sequence");
  head.setAttribute("width", width); head.setAttribute("height", 24);
  seq.setAttribute("width", width); seq.setAttribute("height", height);
  for (const n of lifelines) {
    el("text", { x: col[n], y: 16, "text-anchor": "middle", "font-size": 12, "font-weight": "bold" }, head).textContent = label(n);
    el("line", { x1: col[n], y1: 0, x2: col[n], y2: height, stroke: "#ddd" }, seq);
  }
  const tick = (() => { const raw = 40 / scale, p = Math.pow(10, Math.floor(Math.log10(raw))); return [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw); })();
  for (let t = Math.ceil(tStart / tick) * tick; t <= tEnd; t += tick) {
    el("text", { x: LEFT - 6, y: ypos(t) + 4, "text-anchor": "end", "font-size": 10, fill: "#777" }, seq).textContent = fmt(t);
    el("line", { x1: LEFT - 3, y1: ypos(t), x2: LEFT, y2: ypos(t), stroke: "#999" }, seq);
  }
  const defs = el("defs", {}, seq);
  for (const [name, c] of [...D.kinds.map((k) => [k, D.colours[k]]), ["corrupted", D.corrupt_colour]]) {
    const marker = el("marker", { id: "head-" + D.kinds.concat("corrupted").indexOf(name), viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, defs);
    el("path", { d: "M0,0L10,5L0,10z", fill: c }, marker);
  }
  const headOf = (m) => "url(#head-" + (M[m].corrupt ? D.kinds.length : D.kinds.indexOf(M[m].kind)) + ")";
  const arrowLayer = el("g", {}, seq);
  const nowLine = el("line", { x1: LEFT, x2: width, stroke: "#c00", "stroke-width": 1, "stroke-dasharray": "4 3" }, seq);

  function describe(m) {
    const x = M[m];
    const fate = { deliver: "delivered at " + fmt(x.due), drop: "dropped at " + fmt(x.due), flight: "still in flight when the trial ended" }[x.fate];
    return `${x.kind} ${label(x.src)} \u2192 ${label(x.dst)}${x.corrupt ? " (corrupted)" : ""}: sent at ${fmt(x.sent)}, ${fate}`;
  }

  // ---------------------------------------------------------------- state
  let k = 0, t = tStart, playing = false, last = null, current = null;
  const arrows = new Map(), dots = new Map(), flying = new Set();
  let recentDrops = [];

  function arrow(m) {
    const g = el("g", { class: "msg", "data-kind": M[m].kind, "data-id": m }, arrowLayer);
    const x0 = col[M[m].src], y0 = ysent(m);
    const line = el("line", { x1: x0, y1: y0, x2: x0, y2: y0, stroke: colour(m), "stroke-width": M[m].corrupt ? 2.2 : 1.4 }, g);
    if (M[m].corrupt) line.setAttribute("stroke-dasharray", "6 2");
    el("line", { x1: x0, y1: y0, x2: x0, y2: y0, stroke: "transparent", "stroke-width": 8 }, g);  // easier to click
    el("title", {}, g).textContent = describe(m) + "\npayload: " + JSON.stringify(M[m].payload);
    g.addEventListener("click", () => { $("details").textContent = describe(m) + "\n\n" + JSON.stringify(M[m].payload, null, 1); });
    arrows.set(m, g);
    return g;
  }
  function stretch(m, x2, y2) {
    for (const line of arrows.get(m).querySelectorAll("line")) { line.setAttribute("x2", x2); line.setAttribute("y2", y2); }
  }

  function apply(i) {
    const [, what, m] = E[i];
    const x = M[m];
    if (what === "send") {
      arrow(m);
      flying.add(m);
      dots.set(m, el("circle", { r: 6, fill: colour(m), stroke: x.corrupt ? D.corrupt_colour : "#fff", "stroke-width": x.corrupt ? 3 : 1 }, flightLayer));
      return;
    }
    flying.delete(m);
    if (dots.has(m)) { dots.get(m).remove(); dots.delete(m); }
    if (what === "deliver") {
      (arrows.get(m) || arrow(m)).querySelector("line").setAttribute("marker-end", headOf(m));
      stretch(m, col[x.dst], ydue(m));
      return;
    }
    // a drop: on its link when the message was sent (lost, link down), at the receiver when it was down
    const g = arrows.get(m) || arrow(m);
    const x0 = col[x.src], x1 = col[x.dst];
    const [ex, ey] = x.due > x.sent ? [x1 - 0.15 * (x1 - x0), ydue(m)] : [x0 + 0.4 * (x1 - x0), ysent(m) + 4];
    stretch(m, ex, ey);
    g.querySelector("line").setAttribute("stroke-dasharray", "3 3");
    cross(g, ex, ey, 4, "#000");
    recentDrops.push(m);
  }

  function reset() {
    for (const g of arrows.values()) g.remove();
    for (const c of dots.values()) c.remove();
    arrows.clear(); dots.clear(); flying.clear(); recentDrops = [];
    k = 0;
  }
  function seek(target) {  // apply exactly the first `target` events
    if (target < k) reset();
    while (k < target) apply(k++);
  }
  function upto(time) {  // how many events happen at or before `time`
    let lo = 0, hi = N;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (E[mid][0] <= time) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function eventText(i) {
    if (i < 0) return "start: no message yet";
    const [time, what, m] = E[i];
    const x = M[m];
    return `t=${fmt(time)}  ${what} ${x.kind} ${label(x.src)}\u2192${label(x.dst)}${x.corrupt ? " (corrupted)" : ""}`;
  }

  function render(follow) {
    for (const m of flying) {
      const x = M[m];
      const f = x.due > x.sent ? Math.min(1, Math.max(0, (t - x.sent) / (x.due - x.sent))) : 1;
      const [gx, gy] = along(m, f);
      const dot = dots.get(m);
      dot.setAttribute("cx", gx); dot.setAttribute("cy", gy);
      stretch(m, col[x.src] + f * (col[x.dst] - col[x.src]), ysent(m) + f * (ydue(m) - ysent(m)));
    }
    dropLayer.replaceChildren();
    recentDrops = recentDrops.filter((m) => t - M[m].due < fade && M[m].due <= t + 1e-12);
    for (const m of recentDrops) {
      const [gx, gy] = along(m, M[m].due > M[m].sent ? 0.85 : 0.4);
      cross(dropLayer, gx, gy, 6, "#000");
    }
    const y = ypos(t);
    nowLine.setAttribute("y1", y); nowLine.setAttribute("y2", y);
    $("now").textContent = "t = " + fmt(Math.max(t, tStart));
    $("drawn").textContent = String(arrows.size);
    $("slider").value = String(t);
    $("event").textContent = eventText(k - 1);
    if (current !== null && arrows.has(current)) arrows.get(current).classList.remove("current");
    current = k > 0 ? E[k - 1][2] : null;
    if (current !== null) arrows.get(current).classList.add("current");
    const log = $("log");
    log.replaceChildren();
    for (let i = k - 1; i >= Math.max(0, k - 12); i--) {
      const li = document.createElement("li");
      li.value = i + 1;
      li.textContent = eventText(i);
      log.appendChild(li);
    }
    if (follow) {
      const box = $("seqbox");
      if (y < box.scrollTop + 40 || y > box.scrollTop + box.clientHeight - 40) box.scrollTop = Math.max(0, y - box.clientHeight / 3);
    }
  }

  // ---------------------------------------------------------------- controls
  const speeds = [0.25, 0.5, 1, 2, 4, 10, 50, 200];
  for (const s of speeds) {
    const option = document.createElement("option");
    option.value = String(s); option.textContent = s + "\u00d7";
    if (s === 2) option.selected = true;
    $("speed").appendChild(option);
  }
  const slider = $("slider");
  slider.min = String(tStart); slider.max = String(tEnd); slider.step = String((tEnd - tStart) / 5000 || 1);

  const rate = () => typical * Number($("speed").value);  // time units per second of play
  function setPlaying(on) {
    playing = on;
    $("play").innerHTML = on ? "&#x275A;&#x275A; pause" : "&#x25B6; play";
    if (on) { last = null; requestAnimationFrame(frame); }
  }
  function frame(stamp) {
    if (!playing) return;
    const dt = last === null ? 0 : Math.min(0.25, (stamp - last) / 1000);
    last = stamp;
    t += dt * rate();
    if (flying.size === 0 && k < N && E[k][0] - t > 0.75 * rate()) t = E[k][0] - 0.25 * rate();  // skip idle time
    if (t >= tEnd || (flying.size === 0 && k >= N)) t = tEnd;
    seek(upto(t));
    render(true);
    if (t >= tEnd && k >= N) { setPlaying(false); return; }
    requestAnimationFrame(frame);
  }
  function step(by) {
    setPlaying(false);
    const target = Math.min(N, Math.max(0, k + by));
    seek(target);
    t = target > 0 ? E[target - 1][0] : tStart;
    render(true);
  }
  $("play").addEventListener("click", () => {
    if (!playing && t >= tEnd && k >= N) { seek(0); t = tStart; }
    setPlaying(!playing);
  });
  $("step").addEventListener("click", () => step(1));
  $("back").addEventListener("click", () => step(-1));
  $("restart").addEventListener("click", () => { setPlaying(false); seek(0); t = tStart; render(true); });
  slider.addEventListener("input", () => { setPlaying(false); t = Number(slider.value); seek(upto(t)); render(true); });
  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLSelectElement || e.target instanceof HTMLInputElement) return;
    if (e.key === " ") { e.preventDefault(); $("play").click(); }
    else if (e.key === "ArrowRight") { e.preventDefault(); step(1); }
    else if (e.key === "ArrowLeft") { e.preventDefault(); step(-1); }
  });
  render(false);
})();
