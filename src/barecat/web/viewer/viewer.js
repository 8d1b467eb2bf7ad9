// barecat view: the page's behaviour. Where the page is lives in its URL (?dir=P or
// ?file=P, with sort, rev and filter): links and keys change the URL (pushState) and
// render() shows what it names, so back, forward, reload and deep links all work.
// Names are only ever put in the page as text (textContent), never as HTML.
"use strict";

const PAGE = 120;          // files asked for at a time
const THUMB = 256;         // thumbnail size asked for (the grid shows them at most 138x130)
const SHARP_SCALE = 3;     // small images (pixel art, icons) enlarged this much or more
const SHARP_SIZE = 64;     // keep sharp pixels (image-rendering: pixelated)
const q = (s) => document.querySelector(s);
const api = (route, params) => route + "?" + new URLSearchParams(params).toString();
const parentOf = (path) => path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
const human = (n) => { const u = ["B", "KB", "MB", "GB", "TB"]; let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; } return (i ? n.toFixed(1) : n) + " " + u[i]; };
const when = (ns) => ns ? new Date(ns / 1e6).toISOString().replace("T", " ").slice(0, 19) : "";

const SVG_NS = "http://www.w3.org/2000/svg";
const ICONS = {  // inline drawings: no emoji font needed
  folder: [["path", { d: "M3 7a2 2 0 0 1 2-2h5l2 2h7a2 2 0 0 1 2 2v9a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2z",
                      fill: "#d9a53f", stroke: "#8a6a22", "stroke-width": "1" }]],
  file: [["path", { d: "M6 3h8l4 4v14H6z", fill: "#e8e8e8", stroke: "#777", "stroke-width": "1" }],
         ["path", { d: "M14 3v4h4", fill: "none", stroke: "#777", "stroke-width": "1" }],
         ["path", { d: "M8.5 11h7M8.5 14h7M8.5 17h5", stroke: "#999", "stroke-width": "1" }]],
};
function icon(kind) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", "icon " + kind);
  for (const [tag, attrs] of ICONS[kind]) {
    const part = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs)) part.setAttribute(k, v);
    svg.append(part);
  }
  return svg;
}

const state = {
  key: null, dir: "", listing: {}, dirs: [], files: [], total: 0, offset: 0, loading: null,
  selected: -1, viewing: null, hint: null, generation: 0,
};

async function getJSON(url) {
  const r = await fetch(url);
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.statusText);
  return body;
}

// ---- the URL ----------------------------------------------------------------------------

function wanted() {
  const u = new URLSearchParams(location.search);
  const file = u.get("file");
  return { file, dir: file !== null ? parentOf(file) : (u.get("dir") || ""),
           sort: u.get("sort") || "name", rev: u.get("rev") === "1", filter: u.get("filter") || "" };
}

function urlOf(place) {
  const u = new URLSearchParams();
  if (place.file) u.set("file", place.file); else if (place.dir) u.set("dir", place.dir);
  if (place.sort && place.sort !== "name") u.set("sort", place.sort);
  if (place.rev) u.set("rev", "1");
  if (place.filter) u.set("filter", place.filter);
  const search = u.toString().replaceAll("%2F", "/");
  return location.pathname + (search ? "?" + search : "");
}

function go(change, { replace = false, fromFolder = false } = {}) {
  const place = { ...wanted(), ...change };
  if (change.dir !== undefined && change.file === undefined) place.file = null;
  const url = urlOf(place);
  if (replace) history.replaceState(history.state, "", url);
  else history.pushState({ fromFolder }, "", url);
  return render();
}

function listingParams(place) {
  const p = { sort: place.sort, filter: place.filter };
  if (place.rev) p.rev = "1";
  return p;
}

let rendering = Promise.resolve();  // the latest render(), which keys wait for
function render() { rendering = draw(); return rendering; }

async function draw() {
  const generation = ++state.generation;
  const place = wanted();
  showControls(place);
  const key = JSON.stringify([place.dir, place.sort, place.rev, place.filter]);
  if (key !== state.key) {
    try { await openDir(place, key, generation); }
    catch (e) { showProblem(e); return; }
  }
  if (generation !== state.generation) return;
  if (place.file) await showFile(place.file, generation);
  else closeViewer();
}

// ---- the folder: path bar, grid, tree ------------------------------------------------

async function openDir(place, key, generation) {
  const listing = listingParams(place);
  const first = await getJSON(api("/api/dir", { path: place.dir, offset: 0, limit: PAGE, ...listing }));
  if (generation !== state.generation) return;
  Object.assign(state, { key, dir: place.dir, listing, dirs: first.dirs, files: [], total: first.total_files,
                         offset: 0, selected: -1, loading: null });
  q("#grid").replaceChildren(...first.dirs.map(dirCell));
  addFiles(first);
  showCrumbs(place.dir);
  markTree(place.dir);
  q("main").scrollTop = 0;
  const nothing = !first.dirs.length && !first.files.length;
  q("#empty").textContent = nothing ? (place.filter ? "nothing here matches the filter" : "this folder is empty") : "";
}

function addFiles(page) {
  const grid = q("#grid");
  for (const f of page.files) { state.files.push(f); grid.append(fileCell(f, state.files.length - 1)); }
  state.offset += page.files.length;
  const filtered = state.listing.filter ? " (filtered)" : "";
  q("#summary").textContent = `${state.dirs.length} folders, ${state.files.length} of ${state.total} files${filtered}`;
  q("#more").textContent = state.offset < state.total ? "scroll for more" : "";
}

function loadMore() {
  if (state.loading || state.offset >= state.total) return state.loading || Promise.resolve();
  const key = state.key;
  state.loading = getJSON(api("/api/dir", { path: state.dir, offset: state.offset, limit: PAGE, ...state.listing }))
    .then((page) => { if (key === state.key) addFiles(page); })
    .finally(() => { if (key === state.key) state.loading = null; });
  return state.loading;
}

function cellShell(kind, index) {
  const cell = document.createElement("div");
  cell.className = "cell " + kind;
  cell.dataset.index = index;
  cell.setAttribute("role", "option");
  const box = document.createElement("div");
  box.className = "thumb";
  cell.append(box);
  cell.onclick = () => { select(index); openSelected(); };
  return [cell, box];
}

function labelled(cell, name, detail) {
  const label = document.createElement("div");
  label.className = "name"; label.textContent = name; label.title = name;
  const more = document.createElement("div");
  more.className = "detail"; more.textContent = detail;
  cell.append(label, more);
  return cell;
}

function dirCell(d, i) {
  const [cell, box] = cellShell("dir", i);
  cell.dataset.path = d.path;
  box.append(icon("folder"));
  return labelled(cell, d.name + "/", `${d.files} files, ${human(d.size)}`);
}

function fileCell(f, i) {
  const [cell, box] = cellShell(f.image ? "image" : "other", state.dirs.length + i);
  cell.dataset.path = f.path;
  if (f.image) {
    const img = document.createElement("img");
    img.loading = "lazy"; img.alt = f.name;
    img.onload = () => { img.classList.add("checkered"); fit(img, box); };
    img.onerror = () => { img.replaceWith(icon("file")); cell.classList.replace("image", "other"); };
    img.src = api("/thumb", { path: f.path, size: THUMB });
    box.append(img);
  } else {
    box.append(icon("file"));
  }
  return labelled(cell, f.name, human(f.size));
}

// Size an image to fill its box (enlarging small ones); a small one enlarged a lot keeps
// sharp pixels.
function fit(img, box) {
  const w = img.naturalWidth, h = img.naturalHeight;
  if (!w || !h) return;
  const style = getComputedStyle(box);
  const bw = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const bh = box.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
  const scale = Math.min(bw / w, bh / h);
  img.style.width = Math.max(1, Math.floor(w * scale)) + "px";
  img.style.height = Math.max(1, Math.floor(h * scale)) + "px";
  img.style.objectFit = "fill";
  img.classList.toggle("pixelated", scale >= SHARP_SCALE && Math.max(w, h) <= SHARP_SIZE);
}

function showCrumbs(path) {
  const crumbs = q("#crumbs"); crumbs.replaceChildren();
  const parts = path ? path.split("/") : [];
  const link = (label, target) => {
    const a = document.createElement("a");
    a.textContent = label; a.dataset.path = target;
    a.href = urlOf({ ...wanted(), file: null, dir: target });
    a.onclick = (e) => { e.preventDefault(); go({ dir: target }); };
    crumbs.append(a);
  };
  link("/", "");
  parts.forEach((p, i) => {
    if (i) { const sep = document.createElement("span"); sep.className = "sep"; sep.textContent = "/"; crumbs.append(sep); }
    link(p, parts.slice(0, i + 1).join("/"));
  });
}

async function treeNode(d, li) {
  if (li.classList.toggle("open")) {
    const page = await getJSON(api("/api/dir", { path: d.path, limit: 1 }));
    const ul = document.createElement("ul");
    for (const sub of page.dirs) ul.append(treeItem(sub));
    li.append(ul);
    markTree(state.dir);
  } else {
    li.querySelector("ul")?.remove();
  }
}

function treeItem(d) {
  const li = document.createElement("li");
  const span = document.createElement("span");
  span.textContent = d.name; span.dataset.path = d.path;
  span.onclick = () => { treeNode(d, li); go({ dir: d.path }); };
  li.append(span);
  return li;
}

function markTree(path) {
  document.querySelectorAll("nav span").forEach((s) => s.classList.toggle("current", s.dataset.path === path));
}

function showControls(place) {
  if (document.activeElement !== q("#filter")) q("#filter").value = place.filter;
  q("#sort").value = place.sort;
  q("#reverse").setAttribute("aria-pressed", String(place.rev));
  q("#reverse").innerHTML = place.rev ? "&#8595;" : "&#8593;";
}

function showProblem(e) {
  q("#empty").textContent = "cannot show this: " + e.message;
}

// ---- selection and keys -------------------------------------------------------------

function cells() { return q("#grid").children; }

function select(index) {
  const all = cells();
  if (!all.length) return;
  index = Math.max(0, Math.min(index, all.length - 1));
  all[state.selected]?.classList.remove("selected");
  all[index].classList.add("selected");
  all[index].scrollIntoView({ block: "nearest" });
  state.selected = index;
}

function columns() {
  return getComputedStyle(q("#grid")).gridTemplateColumns.split(" ").filter(Boolean).length || 1;
}

async function move(delta) {
  const target = (state.selected < 0 ? 0 : state.selected + delta);
  if (target >= cells().length && state.offset < state.total) await loadMore();
  select(state.selected < 0 ? 0 : target);
}

function openSelected() {
  const i = state.selected;
  if (i < 0) return;
  if (i < state.dirs.length) { go({ dir: state.dirs[i].path }); return; }
  const at = i - state.dirs.length;
  state.hint = { path: state.files[at].path, at };
  go({ file: state.files[at].path }, { fromFolder: true });
}

function goUp() {  // from the address: the folder asked for may still be loading
  const dir = wanted().dir;
  if (dir) go({ dir: parentOf(dir) });
}

document.addEventListener("keydown", (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey) return;  // the browser's own (Alt+Left is back)
  const typing = e.target.matches("input, select, textarea");
  const viewing = wanted().file !== null;  // the address says so, even while it loads
  let handled = true;
  if (typing) {
    if (e.key === "Escape" || e.key === "Enter" || e.key === "ArrowDown") { e.target.blur(); select(0); }
    else handled = false;
  } else if (viewing) {
    if (e.key === "ArrowRight" || e.key === "ArrowDown" || e.key === " ") step(1);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp") step(-1);
    else if (e.key === "Escape" || e.key === "Backspace") closeFile();
    else handled = false;
  } else if (e.key === "ArrowRight") move(1);
  else if (e.key === "ArrowLeft") move(-1);
  else if (e.key === "ArrowDown") move(columns());
  else if (e.key === "ArrowUp") move(-columns());
  else if (e.key === "Home") select(0);
  else if (e.key === "End") select(cells().length - 1);
  else if (e.key === "Enter") openSelected();
  else if (e.key === "Backspace") goUp();
  else if (e.key === "/") q("#filter").focus();
  else handled = false;
  if (handled) e.preventDefault();
});

let filtering = 0;
q("#filter").addEventListener("input", () => {
  clearTimeout(filtering);
  filtering = setTimeout(() => go({ filter: q("#filter").value }, { replace: true }), 150);
});
q("#sort").onchange = () => go({ sort: q("#sort").value }, { replace: true });
q("#reverse").onclick = () => go({ rev: !wanted().rev }, { replace: true });

// ---- the full view --------------------------------------------------------------------

async function showFile(path, generation) {
  const hint = state.hint && state.hint.path === path ? { at: state.hint.at } : {};
  let info;
  try { info = await getJSON(api("/api/file", { path, ...state.listing, ...hint })); }
  catch (e) { showProblem(e); return; }
  if (generation !== state.generation) return;
  state.viewing = info;
  const full = q("#full"), text = q("#text");
  full.classList.remove("loaded", "checkered", "pixelated"); full.removeAttribute("style");
  text.classList.remove("shown"); text.textContent = "";
  q("#viewer").classList.add("shown");
  const rows = metaRows(info);
  if (info.image) {
    full.alt = info.name;
    full.onload = () => { full.classList.add("loaded", "checkered"); fit(full, q("#viewer .stage"));
                          rows.add("dimensions", `${full.naturalWidth} x ${full.naturalHeight}`); };
    full.onerror = () => {  // a format the browser cannot show (TIFF): Pillow's rendering, else the bytes
      if (!full.src.includes("/thumb")) full.src = api("/thumb", { path, size: 1024 });
      else { full.removeAttribute("src"); showPreview(info, rows); }
    };
    full.src = api("/raw", { path });
  } else {
    full.removeAttribute("src");
    showPreview(info, rows);
  }
}

async function showPreview(info, rows) {
  const shown = await getJSON(api("/api/preview", { path: info.path }));
  if (state.viewing !== info) return;
  const text = q("#text");
  text.textContent = shown.text;
  text.dataset.kind = shown.kind;
  text.classList.add("shown");
  rows.add("preview", `${shown.kind === "text" ? "text" : "hex dump"}, the first ${human(shown.shown)}`
                      + (shown.shown < shown.size ? ` of ${human(shown.size)}` : ""));
}

function metaRows(info) {
  const meta = q("#meta"); meta.replaceChildren();
  const add = (k, v) => { const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v; meta.append(dt, dd); };
  add("name", info.name); add("path", info.path); add("size", `${human(info.size)} (${info.size} bytes)`);
  if (info.mtime_ns) add("modified", when(info.mtime_ns));
  if (info.crc32c !== null) add(info.sealed ? "CRC32C (of the sealed bytes)" : "CRC32C",
                                 info.crc32c.toString(16).padStart(8, "0"));
  if (info.mode !== null) add("mode", "0" + (info.mode & 0o7777).toString(8));
  if (info.position !== null) add("position", `${info.position + 1} of ${state.total} files`);
  return { add };
}

async function step(delta) {
  await rendering;
  const info = state.viewing;
  if (!info || info.position === null) return;
  const at = info.position + delta;
  if (at < 0 || at >= state.total) return;
  let next = state.files[at];
  if (!next) next = (await getJSON(api("/api/dir", { path: state.dir, offset: at, limit: 1, ...state.listing }))).files[0];
  if (!next || state.viewing !== info) return;
  state.hint = { path: next.path, at };
  go({ file: next.path }, { replace: true });
}

function closeFile() {
  if (history.state && history.state.fromFolder) history.back();
  else go({ dir: state.dir });
}

function closeViewer() {
  const was = state.viewing;
  q("#viewer").classList.remove("shown");
  q("#full").removeAttribute("src");
  state.viewing = null;
  if (was && was.position !== null && was.position < state.files.length) select(state.dirs.length + was.position);
}

q("#prev").onclick = () => step(-1);
q("#next").onclick = () => step(1);
q("#close").onclick = closeFile;
window.addEventListener("popstate", render);
window.addEventListener("resize", () => requestAnimationFrame(() => {
  document.querySelectorAll(".thumb img.checkered").forEach((img) => fit(img, img.parentElement));
  if (q("#full").classList.contains("loaded")) fit(q("#full"), q("#viewer .stage"));
}));
new IntersectionObserver((entries) => {
  if (entries.some((e) => e.isIntersecting)) loadMore();
}).observe(q("#more"));

(async () => {
  const root = await getJSON(api("/api/dir", { path: "", limit: 1 }));
  for (const d of root.dirs) q("#tree").append(treeItem(d));
  await render();
})();
